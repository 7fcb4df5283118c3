// map_location.cpp - SPEC parsing and the per-storage placement decision (pytorch-format.md §5.2-§5.3).
#include "maploc/remap/map_location.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "maploc/error.h"

namespace maploc::remap {
namespace {

[[noreturn]] void fail(ErrorCode code, std::string message) {
  throw Error(code, Stage::kRemap, std::move(message));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "cuda:N" -> N; nullopt when the suffix is not a plain decimal that fits an int.
std::optional<int> cuda_index(std::string_view spelling) {
  if (spelling == "cuda") return 0;  // torch: no index means the current device
  if (spelling.substr(0, 5) != "cuda:" || spelling.size() == 5 || spelling.size() > 14) return std::nullopt;
  int n = 0;
  for (char c : spelling.substr(5)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

bool is_target_spelling(std::string_view s) {
  return s == "cpu" || s == "meta" || s == "auto" || cuda_index(s).has_value();
}

// Who a storage is, for messages: "storage '3' of tensor 'fc.weight'".
std::string who(const StorageRef& s) {
  std::string out = "storage '" + std::string(s.key) + "'";
  if (!s.tensor_names.empty()) out += " of tensor '" + s.tensor_names.front() + "'";
  return out;
}

// "cuda:0, cuda:1" (the first few).
std::string device_list(int count) {
  std::string out;
  for (int d = 0; d < std::min(count, 8); ++d) out += (d ? ", cuda:" : "cuda:") + std::to_string(d);
  return count > 8 ? out + ", ..." : out;
}

struct Choice {
  std::string spelling;
  bool from_tag;  // the saved tag, not a rule or callback
};

// torch's default_restore_location over our inventory, with its errors made actionable.
Device restore(const StorageRef& s, const Choice& c, const DeviceInventory& inv) {
  // For messages only: built on the failure paths (W1 decides 30,000 storages).
  const auto how = [&] {
    return c.from_tag ? "is tagged " + c.spelling : "(tagged " + std::string(s.location) + ") is mapped to " + c.spelling;
  };
  if (c.spelling == "cpu") return Device::cpu();
  if (c.spelling == "meta") return Device::meta();
  if (c.spelling == "auto") return inv.cuda_device_count > 0 ? Device::cuda(0) : Device::cpu();
  if (auto index = cuda_index(c.spelling)) {
    if (inv.cuda_device_count == 0) {
      fail(ErrorCode::kRemapCudaUnavailable,
           who(s) + " " + how() + " but CUDA is not available (" +
               (!inv.cuda_note.empty() ? inv.cuda_note
                : inv.cuda_built       ? std::string("no CUDA device was found")
                                       : std::string("maploc was built without CUDA")) +
               "); map it, e.g. --map-location cpu");
    }
    if (*index >= inv.cuda_device_count) {
      fail(ErrorCode::kRemapNoSuchDevice,
           who(s) + " " + how() + " but only " + std::to_string(inv.cuda_device_count) +
               " CUDA device(s) are present (" + device_list(inv.cuda_device_count) + "); map it to an existing device, e.g. --map-location '" +
               std::string(s.location) + "->cuda:0'");
    }
    return Device::cuda(*index);
  }
  if (!c.from_tag) {
    fail(ErrorCode::kRemapBadSpec, who(s) + " is mapped to '" + c.spelling +
                                       "', which is not a device (use cpu, cuda, cuda:N, meta or auto)");
  }
  fail(ErrorCode::kRemapUnknownTag,
       who(s) + " is tagged '" + c.spelling + "', a device maploc cannot place; map it, e.g. --map-location '" +
           c.spelling + "->cpu'");
}

// The name rules that match any of the storage's tensors must agree.
std::optional<Choice> by_name(const StorageRef& s, const std::vector<Rule>& rules) {
  const Rule* claimed = nullptr;
  std::string claimed_by;
  for (const std::string& name : s.tensor_names) {
    for (const Rule& r : rules) {
      if (!r.by_name || !glob_match(r.pattern, name)) continue;
      if (claimed == nullptr) {
        claimed = &r;
        claimed_by = name;
      } else if (r.target != claimed->target) {
        fail(ErrorCode::kRemapConflictingRules,
             "storage '" + std::string(s.key) + "' is claimed by rule 'name:" + claimed->pattern + "->" +
                 claimed->target + "' (tensor '" + claimed_by + "') and by rule 'name:" + r.pattern + "->" +
                 r.target + "' (tensor '" + name +
                 "'); tensors sharing a storage live on one device, so make the rules agree");
      }
      break;  // first matching rule for this name
    }
  }
  if (claimed == nullptr) return std::nullopt;
  return Choice{claimed->target, false};
}

Choice choose(const StorageRef& s, const MapLocation& map) {
  if (map.callback) {
    if (auto r = map.callback(s)) return {*r, false};
    return {std::string(s.location), true};
  }
  if (auto named = by_name(s, map.rules)) return *named;
  for (const Rule& r : map.rules) {
    if (!r.by_name && glob_match(r.pattern, s.location)) return {r.target, false};
  }
  return {std::string(s.location), true};
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matcher with one backtrack point: linear in practice, no recursion.
  std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

MapLocation MapLocation::all_to(std::string device) {
  MapLocation m;
  m.rules.push_back({"*", std::move(device), false});
  return m;
}

MapLocation MapLocation::parse(std::string_view spec) {
  MapLocation m;
  const std::string whole(spec);
  if (trim(spec).empty()) fail(ErrorCode::kRemapBadSpec, "empty map-location SPEC; try 'cpu' or 'cuda:*->cpu'");
  // Items are split at every comma: an empty or blank item (a leading, trailing or doubled
  // comma) is an error naming its position, never skipped.
  std::size_t start = 0;
  for (std::size_t number = 1;; ++number) {
    const auto comma = spec.find(',', start);
    const std::string_view item = trim(spec.substr(start, comma == std::string_view::npos ? comma : comma - start));
    const std::size_t at = start;
    const bool last = comma == std::string_view::npos;
    start = last ? spec.size() : comma + 1;
    const auto bad = [&](const std::string& why) {
      fail(ErrorCode::kRemapBadSpec, "map-location item " + std::to_string(number) + " '" + std::string(item) +
                                         "' (at byte " + std::to_string(at) + ") in '" + whole + "' " + why +
                                         " (grammar: ITEM[,ITEM...], ITEM = DEVICE | TAG->DEVICE | "
                                         "name:PATTERN->DEVICE, DEVICE = cpu | cuda | cuda:N | cuda:local | meta | auto)");
    };
    if (item.empty()) {
      bad(last && number > 1 ? "is empty: a trailing comma"
          : at == 0          ? "is empty: a leading comma"
                             : "is empty: two commas in a row (or only blanks between them)");
    }
    Rule rule;
    std::string_view rest = item;
    if (rest.substr(0, 5) == "name:") {
      rule.by_name = true;
      rest.remove_prefix(5);
    }
    const auto arrow = rest.find("->");
    if (arrow == std::string_view::npos) {
      if (rule.by_name) bad("has no '->'");
      rule.pattern = "*";
      rule.target = std::string(rest);
    } else {
      rule.pattern = std::string(trim(rest.substr(0, arrow)));
      rule.target = std::string(trim(rest.substr(arrow + 2)));
      if (rule.pattern.empty()) bad("has nothing before '->'");
    }
    if (rule.target == "cuda:local") {
      // This process's own device in a multi-process job: torchrun (and
      // torch.distributed.launch) set LOCAL_RANK for each process on a machine.
      const char* rank = std::getenv("LOCAL_RANK");
      const std::string text = rank != nullptr ? rank : "";
      if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos) {
        bad(rank == nullptr ? "needs the environment variable LOCAL_RANK (set by torchrun for each process)"
                            : "needs LOCAL_RANK to be a device number, but it is '" + text + "'");
      }
      rule.target = "cuda:" + std::to_string(std::stoi(text));
    }
    if (!is_target_spelling(rule.target)) bad("names no device: '" + rule.target + "'");
    m.rules.push_back(std::move(rule));
    if (last) break;
  }
  return m;
}

std::vector<Device> decide(std::span<const StorageRef> storages, const MapLocation& map,
                           const DeviceInventory& inventory) {
  std::vector<Device> out;
  out.reserve(storages.size());
  for (const StorageRef& s : storages) out.push_back(restore(s, choose(s, map), inventory));
  return out;
}

}  // namespace maploc::remap
