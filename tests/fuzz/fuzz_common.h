// fuzz_common.h - shared helpers of the fuzz targets: tight limits and invariant checks.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/limits.h"
#include "maploc/mapped_file.h"

namespace maploc::fuzz {

/// Limits small enough that no input can make a target allocate more than a
/// few hundred MB (libFuzzer's -rss_limit_mb=2560 must never trip), yet large
/// enough for every fixture in the seed corpus.
inline Limits tight_limits() {
  Limits l;
  l.zip_max_entries = 1u << 16;
  l.zip_max_inflated_bytes = std::uint64_t{64} << 20;
  l.pickle_max_stack_depth = 1u << 16;
  l.pickle_max_nesting_depth = 200;
  l.pickle_max_memo_entries = 1u << 18;
  l.pickle_max_string_bytes = std::uint64_t{16} << 20;
  l.pickle_max_container_items = 1u << 20;
  l.pickle_max_total_bytes = std::uint64_t{256} << 20;
  l.torch_max_walk_paths = std::uint64_t{1} << 20;
  return l;
}

/// The limits a target runs with: tight_limits(), or with MAPLOC_FUZZ_LIMITS=default in
/// the environment the library's defaults (tools/fuzz.sh's second mode, issue 15: inputs of
/// a few MB, where an input that is slow or big under the default limits is a finding).
inline Limits fuzz_limits() {
  static const bool defaults = [] {
    const char* mode = std::getenv("MAPLOC_FUZZ_LIMITS");
    return mode != nullptr && std::strcmp(mode, "default") == 0;
  }();
  return defaults ? Limits{} : tight_limits();
}

/// The input as a MappedFile that owns a copy (the fuzzer's buffer dies after the call).
inline MappedFile as_file(const std::uint8_t* data, std::size_t size) {
  return MappedFile::from_bytes(Bytes::owned(std::vector<std::uint8_t>(data, data + size)), "fuzz-input");
}

/// Aborts with a message: an invariant of maploc's output was broken.
[[noreturn]] inline void invariant_failed(const char* what) {
  std::fprintf(stderr, "maploc fuzz invariant broken: %s\n", what);
  std::abort();
}

}  // namespace maploc::fuzz
