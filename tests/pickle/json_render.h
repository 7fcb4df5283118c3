// json_render.h - renders a pickle value tree in the corpus' golden JSON encoding (tests only).
#pragma once

#include <nlohmann/json.hpp>

#include "maploc/pickle/value.h"

namespace maploc::pickle::testing {

/// The encoding written by fixtures/pickle/generate_corpus.py (see its docstring).
nlohmann::json to_json(const Value& root);
/// Sorts the elements of every "set"/"frozenset" array (CPython iterates sets in hash order).
void sort_sets(nlohmann::json& j);
/// Reads a whole file (empty vector if it cannot be read).
std::vector<std::uint8_t> read_file(const std::string& path);

}  // namespace maploc::pickle::testing
