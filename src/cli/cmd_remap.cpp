// cmd_remap.cpp - `maploc remap IN OUT --map-location SPEC`: rewrite storage location tags into a new archive.
#include <cstdio>
#include <iostream>
#include <map>

#include "commands.h"
#include "progress.h"
#include "format.h"
#include "json_writer.h"
#include "maploc/error.h"
#include "maploc/remap/plan.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/write.h"

namespace maploc::cli {

int cmd_remap(const Args& args) {
  if (args.positional.size() != 2 || !args.has("map-location")) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "usage: maploc remap IN OUT --map-location SPEC [--json]");
  }
  const auto map = map_location_of(args);
  const auto checkpoint = torch::Checkpoint::open(args.positional[0], open_options(args));
  refuse_out_is_in(checkpoint, args.positional[0], args.positional[1]);
  checkpoint.prefetch();  // a URL source: every storage in one go, several requests in flight
  torch::ArchiveOptions options;
  options.locations = remap::rewritten_tags(checkpoint, map);
  if (args.has("shard-size")) return write_set_command(args, checkpoint, args.positional[1], false, options.locations);
  ProgressBar bar(args, "remapping");
  options.progress = bar.callback();
  const auto report = writing_out([&] { return torch::save_archive(checkpoint, args.positional[1], options); });

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
