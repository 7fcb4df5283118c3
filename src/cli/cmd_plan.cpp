// cmd_plan.cpp - `maploc plan`: where every storage would go, decided before any byte is read.
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "format.h"
#include "json_writer.h"
#include "maploc/error.h"
#include "maploc/remap/plan.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::cli {
namespace {

// "80GiB", "512MiB", "1.5TB", "4096" -> bytes.
std::uint64_t size_of(const std::string& text, const std::string& item) {
  char* end = nullptr;
  const double n = std::strtod(text.c_str(), &end);
  const std::string unit = end != nullptr ? std::string(end) : "";
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},         {"B", 1},        {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40},
      {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name && end != text.c_str() && n >= 0 && n * scale < 0x1p62) {
      return static_cast<std::uint64_t>(n * scale);
    }
  }
  throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
              "--devices item '" + item + "': '" + text + "' is no size (e.g. 80GiB, 24GB, 512MiB)");
}

// --devices cuda:0=80GiB,cuda:1=80GiB: simulated devices of those capacities, numbered from 0.
remap::DeviceInventory devices_of(const std::string& spec) {
  std::vector<std::uint64_t> capacities;
  std::vector<bool> seen;
  for (std::size_t begin = 0; begin <= spec.size();) {
    std::size_t end = spec.find(',', begin);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(begin, end - begin);
    begin = end + 1;
    const auto eq = item.find('=');
    char* stop = nullptr;
    const long index = item.rfind("cuda:", 0) == 0 ? std::strtol(item.c_str() + 5, &stop, 10) : -1;
    if (eq == std::string::npos || index < 0 || index > 1023 || stop != item.c_str() + eq) {
      throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                  "--devices takes cuda:N=SIZE[,cuda:M=SIZE...], e.g. cuda:0=80GiB,cuda:1=80GiB; not '" + item + "'");
    }
    const auto i = static_cast<std::size_t>(index);
    if (i >= capacities.size()) {
      capacities.resize(i + 1, 0);
      seen.resize(i + 1, false);
    }
    if (seen[i]) throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "--devices names cuda:" + std::to_string(i) + " twice");
    seen[i] = true;
    capacities[i] = size_of(item.substr(eq + 1), item);
  }
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                  "--devices skips cuda:" + std::to_string(i) + "; devices are numbered from cuda:0 without gaps");
    }
  }
  return remap::DeviceInventory::simulated(std::move(capacities));
}

bool fits(const remap::DeviceTotal& t) { return !t.free_bytes || t.bytes <= *t.free_bytes; }

void print_plan_json(const torch::Checkpoint& checkpoint, const remap::Plan& plan) {
  OutBuffer out(OutBuffer::Mode::kWhole);
  JsonWriter w(out.text());
  w.begin_object().key("devices").begin_array();
  for (const auto& t : plan.totals) {
    w.begin_object().field("bytes", t.bytes).field("device", t.device.str()).key("fits");
    if (t.free_bytes) w.value(fits(t)); else w.null();
    w.key("free_bytes");
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
    if (t.free_bytes) {
      out.printf("  (free %s: %s)", human_bytes(*t.free_bytes).c_str(), fits(t) ? "fits" : "DOES NOT FIT");
    }
    out.printf("\n");
  }
}

}  // namespace

remap::MapLocation map_location_of(const Args& args) {
  if (!args.has("map-location")) return remap::MapLocation::none();
  return as_usage([&] { return remap::MapLocation::parse(args.get("map-location")); });
}

int cmd_plan(const Args& args) {
  if (args.positional.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                "usage: maploc plan FILE [--map-location SPEC] [--devices cuda:0=SIZE,...] [--json]");
  }
  const auto checkpoint = torch::Checkpoint::open(args.positional[0], open_options(args));
  // Against a machine you are not on: simulated devices of the given sizes.
  const remap::DeviceInventory inventory =
      args.has("devices") ? devices_of(args.get("devices")) : remap::DeviceInventory::probe();
  const auto plan = remap::make_plan(checkpoint, map_location_of(args), inventory);
  if (args.has("json")) {
    print_plan_json(checkpoint, plan);
  } else {
    print_plan(checkpoint, plan);
  }
  remap::check_fits(plan);
  return kExitOk;
}

}  // namespace maploc::cli
