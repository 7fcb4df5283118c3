// rewrite.cpp - the location tags a SPEC gives a checkpoint's storages when a file is rewritten (`maploc remap`).
#include <climits>

#include "maploc/error.h"
#include "maploc/remap/plan.h"

namespace maploc::remap {
namespace {

// `auto` names a placement, not a tag: resolve it against this machine once.
MapLocation resolve_auto(MapLocation map) {
  const bool gpu = DeviceInventory::probe().cuda_device_count > 0;
  for (auto& rule : map.rules) {
    if (rule.target == "auto") rule.target = gpu ? "cuda:0" : "cpu";
  }
  return map;
}

bool any_rule_matches(const MapLocation& map, const torch::Storage& s, const std::vector<std::string>& names) {
  for (const auto& rule : map.rules) {
    if (!rule.by_name && glob_match(rule.pattern, s.location)) return true;
    if (rule.by_name) {
      for (const auto& n : names) {
        if (glob_match(rule.pattern, n)) return true;
      }
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> rewritten_tags(const torch::Checkpoint& checkpoint, const MapLocation& spec) {
  const MapLocation map = resolve_auto(spec);
  std::vector<std::vector<std::string>> names(checkpoint.storages().size());
  for (const auto& t : checkpoint.tensors()) {
    if (t.storage) names[*t.storage].push_back(t.name);
  }
  // A tag is only text: rewriting to cuda:3 needs no GPU, so decide against
  // an inventory that has every device. Storages no rule matches keep their
  // tag verbatim (mps, xpu:0, ... included), unlike a load.
  DeviceInventory any;
  any.cuda_device_count = INT_MAX;
  any.cuda_built = true;
  std::vector<std::string> tags(checkpoint.storages().size());
  for (std::size_t i = 0; i < tags.size(); ++i) {
    const auto& s = checkpoint.storages()[i];
    if (!any_rule_matches(map, s, names[i])) continue;
    const std::string dtype(torch::dtype_name(s.dtype));
    StorageRef ref{s.key, dtype, s.nbytes, s.location, names[i]};
    const Device d = decide({&ref, 1}, map, any).at(0);
    if (d.kind == Device::Kind::kMeta) {
      throw Error(ErrorCode::kRemapBadRewriteTarget, Stage::kRemap,
                  "storage '" + s.key + "' would be tagged meta: a meta storage has no bytes, so no file can hold it "
                  "(map it to cpu or cuda:N)",
                  std::nullopt, names[i].empty() ? s.key : names[i].front());
    }
    tags[i] = d.str();
  }
  return tags;
}

}  // namespace maploc::remap
