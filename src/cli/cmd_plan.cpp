// cmd_plan.cpp - `maploc plan`: where every storage would go, decided before any byte is read.
#include <cstdio>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_writer.h"
#include "maploc/error.h"
#include "maploc/remap/plan.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::cli {
namespace {

void print_plan_json(const torch::Checkpoint& checkpoint, const remap::Plan& plan) {
  OutBuffer out(OutBuffer::Mode::kWhole);
  JsonWriter w(out.text());
  w.begin_object().key("devices").begin_array();
  for (const auto& t : plan.totals) {
    w.begin_object().field("bytes", t.bytes).field("device", t.device.str()).key("free_bytes");
    if (t.free_bytes) w.value(*t.free_bytes); else w.null();
    w.field("storages", t.storages).end_object();
  }
  w.end_array().field("file", checkpoint.path()).key("storages").begin_array();
  for (std::size_t i = 0; i < plan.targets.size(); ++i) {
    const auto& s = checkpoint.storages()[i];
    w.begin_object()
        .field("dtype", torch::dtype_name(s.dtype))
        .field("key", s.key)
        .field("location", s.location)
        .field("nbytes", s.nbytes)
        .field("target", plan.targets[i].str())
        .end_object();
  }
  w.end_array().end_object();
  out.append('\n');
  out.finish();
}

void print_plan(const torch::Checkpoint& checkpoint, const remap::Plan& plan) {
  OutBuffer out(OutBuffer::Mode::kStream);
  out.printf("%s: %zu storages\n", checkpoint.path().c_str(), plan.targets.size());
  out.printf("  %-16s %-10s %12s  %-10s    %s\n", "storage", "dtype", "bytes", "tag", "target");
  for (std::size_t i = 0; i < plan.targets.size(); ++i) {
    const auto& s = checkpoint.storages()[i];
    out.printf("  %-16s %-10s %12llu  %-10s -> %s\n", s.key.c_str(), std::string(torch::dtype_name(s.dtype)).c_str(),
               static_cast<unsigned long long>(s.nbytes), s.location.c_str(), plan.targets[i].str().c_str());
  }
  out.printf("per device:\n");
  for (const auto& t : plan.totals) {
    out.printf("  %-8s %6llu storages  %10s", t.device.str().c_str(), static_cast<unsigned long long>(t.storages),
               human_bytes(t.bytes).c_str());
    if (t.free_bytes) out.printf("  (free %s)", human_bytes(*t.free_bytes).c_str());
    out.printf("\n");
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
  const auto checkpoint = torch::Checkpoint::open(args.positional[0], open_options(args));
  const auto plan = remap::make_plan(checkpoint, map_location_of(args), remap::DeviceInventory::probe());
  if (args.has("json")) {
    print_plan_json(checkpoint, plan);
  } else {
    print_plan(checkpoint, plan);
  }
  remap::check_fits(plan);
  return kExitOk;
}

}  // namespace maploc::cli
