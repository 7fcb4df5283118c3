// cmd_remap.cpp - `maploc remap IN OUT --map-location SPEC`: rewrite storage location tags into a new archive.
#include <climits>
#include <cstdio>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/format.h"
#include "cli/json_writer.h"
#include "maploc/error.h"
#include "maploc/remap/map_location.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/write.h"

namespace maploc::cli {
namespace {

// `auto` names a placement, not a tag: resolve it against this machine once.
remap::MapLocation resolve_auto(remap::MapLocation map) {
  const bool gpu = remap::DeviceInventory::probe().cuda_device_count > 0;
  for (auto& rule : map.rules) {
    if (rule.target == "auto") rule.target = gpu ? "cuda:0" : "cpu";
  }
  return map;
}

bool any_rule_matches(const remap::MapLocation& map, const torch::Storage& s, const std::vector<std::string>& names) {
  for (const auto& rule : map.rules) {
    if (!rule.by_name && remap::glob_match(rule.pattern, s.location)) return true;
    if (rule.by_name) {
      for (const auto& n : names) {
        if (remap::glob_match(rule.pattern, n)) return true;
      }
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> rewritten_tags(const torch::Checkpoint& checkpoint, const remap::MapLocation& spec) {
  const remap::MapLocation map = resolve_auto(spec);
  std::vector<std::vector<std::string>> names(checkpoint.storages().size());
  for (const auto& t : checkpoint.tensors()) {
    if (t.storage) names[*t.storage].push_back(t.name);
  }
  // A tag is only text: rewriting to cuda:3 needs no GPU, so decide against
  // an inventory that has every device. Storages no rule matches keep their
  // tag verbatim (mps, xpu:0, ... included), unlike a load.
  remap::DeviceInventory any;
  any.cuda_device_count = INT_MAX;
  any.cuda_built = true;
  std::vector<std::string> tags(checkpoint.storages().size());
  for (std::size_t i = 0; i < tags.size(); ++i) {
    const auto& s = checkpoint.storages()[i];
    if (!any_rule_matches(map, s, names[i])) continue;
    const std::string dtype(torch::dtype_name(s.dtype));
    remap::StorageRef ref{s.key, dtype, s.nbytes, s.location, names[i]};
    const remap::Device d = remap::decide({&ref, 1}, map, any).at(0);
    if (d.kind == remap::Device::Kind::kMeta) {
      throw Error(ErrorCode::kRemapBadRewriteTarget, Stage::kRemap,
                  "storage '" + s.key + "' would be tagged meta: a meta storage has no bytes, so no file can hold it "
                  "(map it to cpu or cuda:N)",
                  std::nullopt, names[i].empty() ? s.key : names[i].front());
    }
    tags[i] = d.str();
  }
  return tags;
}

int cmd_remap(const Args& args) {
  if (args.positional.size() != 2 || !args.has("map-location")) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "usage: maploc remap IN OUT --map-location SPEC [--json]");
  }
  const auto map = map_location_of(args);
  const auto checkpoint = torch::Checkpoint::open(args.positional[0], open_options(args));
  torch::ArchiveOptions options;
  options.locations = rewritten_tags(checkpoint, map);
  if (args.has("shard-size")) return write_set_command(args, checkpoint, args.positional[1], false, options.locations);
  ProgressBar bar(args, "remapping");
  options.progress = bar.callback();
  const auto report = torch::save_archive(checkpoint, args.positional[1], options);

  std::map<std::pair<std::string, std::string>, std::size_t> changes;
  for (std::size_t i = 0; i < options.locations.size(); ++i) {
    const auto& from = checkpoint.storages()[i].location;
    const auto& to = options.locations[i].empty() ? from : options.locations[i];
    ++changes[{from, to}];
  }
  if (args.has("json")) {
    OutBuffer out(OutBuffer::Mode::kWhole);
    JsonWriter w(out.text());
    w.begin_object()
        .field("data_bytes", report.data_bytes)
        .field("input", checkpoint.path())
        .field("input_format", torch::format_name(checkpoint.format()))
        .field("layout", report.layout)
        .field_array("notes", report.notes)
        .field("output", args.positional[1])
        .field("storages", report.storages)
        .key("tags")
        .begin_array();
    for (const auto& [ft, n] : changes) {
      w.begin_object().field("from", ft.first).field("storages", n).field("to", ft.second).end_object();
    }
    w.end_array().end_object();
    out.append('\n');
    out.finish();
    return kExitOk;
  }
  std::printf("wrote %s: %zu storages, %s (%s input: %s)\n", args.positional[1].c_str(), report.storages,
              human_bytes(report.data_bytes).c_str(), std::string(torch::format_name(checkpoint.format())).c_str(),
              report.layout.c_str());
  for (const auto& [ft, n] : changes) {
    std::printf("  %-10s -> %-10s %zu storage%s%s\n", ft.first.c_str(), ft.second.c_str(), n, n == 1 ? "" : "s",
                ft.first == ft.second ? " (unchanged)" : "");
  }
  for (const auto& note : report.notes) std::printf("note: %s\n", note.c_str());
  return kExitOk;
}

}  // namespace maploc::cli
