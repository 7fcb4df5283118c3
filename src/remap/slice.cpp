// slice.cpp - rank-slicing rules: parsing "rows:GLOB,cols:GLOB,stageN:GLOB,all:GLOB", the launcher's environment, bounds.
#include "maploc/remap/slice.h"

#include <charconv>
#include <cstdlib>

#include "maploc/error.h"

namespace maploc::remap {
namespace {

[[noreturn]] void bad(const std::string& why) { throw Error(ErrorCode::kInvalidArgument, Stage::kRemap, why); }

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// The first of `names` set in the environment, parsed as a non-negative int.
std::optional<int> env_int(std::initializer_list<const char*> names, const char*& used) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v == nullptr || *v == '\0') continue;
    used = n;
    const auto i = parse_int(v);
    if (!i) bad(std::string("the environment variable ") + n + "='" + v + "' is not a non-negative integer");
    return i;
  }
  return std::nullopt;
}

}  // namespace

SliceSpec SliceSpec::parse(std::string_view text) {
  SliceSpec spec;
  const std::string whole(text);
  if (text.empty()) return spec;
  for (std::size_t start = 0, number = 1;; ++number) {
    const auto comma = text.find(',', start);
    const std::string_view rule =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (rule.find_first_not_of(" \t") == std::string_view::npos) {
      bad("slice rule " + std::to_string(number) + " (at byte " + std::to_string(start) + ") in '" + whole +
          "' is empty: a leading, trailing or doubled comma (RULES = KIND:GLOB[,KIND:GLOB...])");
    }
    start = comma == std::string_view::npos ? std::string_view::npos : comma + 1;
    const auto colon = rule.find(':');
    if (colon == std::string_view::npos || colon + 1 == rule.size()) {
      bad("slice rule '" + std::string(rule) + "' is not KIND:GLOB (KIND: rows, cols, all, stageN)");
    }
    const std::string_view kind = rule.substr(0, colon);
    SliceRule r;
    r.pattern = std::string(rule.substr(colon + 1));
    if (kind == "rows") {
      r.kind = SliceKind::kRows;
    } else if (kind == "cols") {
      r.kind = SliceKind::kColumns;
    } else if (kind == "all") {
      r.kind = SliceKind::kReplicate;
    } else if (kind.starts_with("stage") && parse_int(kind.substr(5))) {
      r.kind = SliceKind::kStage;
      r.stage = *parse_int(kind.substr(5));
    } else {
      bad("slice rule '" + std::string(rule) + "': unknown kind '" + std::string(kind) +
          "' (rows, cols, all, stageN)");
    }
    spec.rules.push_back(std::move(r));
    if (start == std::string_view::npos) break;
  }
  return spec;
}

RankSlice RankSlice::from_environment(SliceSpec spec) {
  const char* rank_name = "RANK";
  const char* size_name = "WORLD_SIZE";
  const auto rank = env_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}, rank_name);
  const auto size = env_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, size_name);
  if (!rank || !size) {
    bad("no rank in the environment: set RANK and WORLD_SIZE (torchrun and torch.distributed launchers do), "
        "or give the rank and world size explicitly");
  }
  RankSlice r;
  r.rank = *rank;
  r.world_size = *size;
  r.spec = std::move(spec);
  if (r.world_size < 1 || r.rank >= r.world_size) {
    bad(std::string(rank_name) + "=" + std::to_string(r.rank) + " is not below " + size_name + "=" +
        std::to_string(r.world_size));
  }
  return r;
}

std::pair<std::int64_t, std::int64_t> slice_bounds(std::int64_t size, int rank, int world_size) noexcept {
  if (world_size <= 0 || size <= 0) return {0, 0};
  const std::int64_t w = world_size;
  const std::int64_t chunk = (size + w - 1) / w;
  const std::int64_t begin = std::min<std::int64_t>(size, chunk * rank);
  return {begin, std::min<std::int64_t>(size, begin + chunk)};
}

}  // namespace maploc::remap
