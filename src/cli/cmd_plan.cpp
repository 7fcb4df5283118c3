// cmd_plan.cpp - `maploc plan`: where every storage would go, decided before any byte is read.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/format.h"
#include "maploc/error.h"
#include "maploc/remap/plan.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::cli {
namespace {

nlohmann::json plan_json(const torch::Checkpoint& checkpoint, const remap::Plan& plan) {
  nlohmann::json out;
  out["file"] = checkpoint.path();
  auto& storages = out["storages"] = nlohmann::json::array();
  for (std::size_t i = 0; i < plan.targets.size(); ++i) {
    const auto& s = checkpoint.storages()[i];
    storages.push_back({{"key", s.key}, {"dtype", torch::dtype_name(s.dtype)}, {"nbytes", s.nbytes},
                        {"location", s.location}, {"target", plan.targets[i].str()}});
  }
  auto& totals = out["devices"] = nlohmann::json::array();
  for (const auto& t : plan.totals) {
    nlohmann::json row = {{"device", t.device.str()}, {"storages", t.storages}, {"bytes", t.bytes}};
    row["free_bytes"] = t.free_bytes ? nlohmann::json(*t.free_bytes) : nlohmann::json(nullptr);
    totals.push_back(row);
  }
  return out;
}

void print_plan(const torch::Checkpoint& checkpoint, const remap::Plan& plan) {
  std::printf("%s: %zu storages\n", checkpoint.path().c_str(), plan.targets.size());
  std::printf("  %-16s %-10s %12s  %-10s    %s\n", "storage", "dtype", "bytes", "tag", "target");
  for (std::size_t i = 0; i < plan.targets.size(); ++i) {
    const auto& s = checkpoint.storages()[i];
    std::printf("  %-16s %-10s %12llu  %-10s -> %s\n", s.key.c_str(), std::string(torch::dtype_name(s.dtype)).c_str(),
                static_cast<unsigned long long>(s.nbytes), s.location.c_str(), plan.targets[i].str().c_str());
  }
  std::printf("per device:\n");
  for (const auto& t : plan.totals) {
    std::printf("  %-8s %6llu storages  %10s", t.device.str().c_str(), static_cast<unsigned long long>(t.storages),
                human_bytes(t.bytes).c_str());
    if (t.free_bytes) std::printf("  (free %s)", human_bytes(*t.free_bytes).c_str());
    std::printf("\n");
  }
}

}  // namespace

remap::MapLocation map_location_of(const Args& args) {
  return args.has("map-location") ? remap::MapLocation::parse(args.get("map-location")) : remap::MapLocation::none();
}

int cmd_plan(const Args& args) {
  if (args.positional.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "usage: maploc plan FILE [--map-location SPEC] [--json]");
  }
  const auto checkpoint = torch::Checkpoint::open(args.positional[0], {limits_of(args)});
  const auto plan = remap::make_plan(checkpoint, map_location_of(args), remap::DeviceInventory::probe());
  if (args.has("json")) {
    std::cout << plan_json(checkpoint, plan).dump(2) << "\n";
  } else {
    print_plan(checkpoint, plan);
  }
  remap::check_fits(plan);
  return kExitOk;
}

}  // namespace maploc::cli
