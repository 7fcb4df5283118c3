// cmd_convert.cpp - `maploc convert IN OUT`: torch checkpoints to safetensors and back.
#include <cstdio>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/format.h"
#include "cli/json_writer.h"
#include "maploc/error.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/safetensors.h"
#include "maploc/torch/write.h"

namespace maploc::cli {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The output format: --to, else the output's extension (.safetensors or a torch file).
std::string target_of(const Args& args) {
  const std::string to = args.get("to");
  if (!to.empty()) {
    if (to != "safetensors" && to != "torch") {
      throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "--to takes safetensors or torch, not '" + to + "'");
    }
    return to;
  }
  return ends_with(args.positional[1], ".safetensors") ? "safetensors" : "torch";
}

}  // namespace

int cmd_convert(const Args& args) {
  if (args.positional.size() != 2) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                "usage: maploc convert IN OUT [--to safetensors|torch] [--duplicate-tied] [--json]");
  }
  const std::string& out_path = args.positional[1];
  const auto checkpoint = torch::Checkpoint::open(args.positional[0], open_options(args));
  const std::string target = target_of(args);
  OutBuffer out(OutBuffer::Mode::kWhole);
  JsonWriter w(out.text());
  // Keys in byte order: data_bytes, input, input_format, [layout, notes,] output, output_format, [storages | tensors, tied].
  const auto head = [&](std::uint64_t data_bytes) {
    w.begin_object().field("data_bytes", data_bytes).field("input", checkpoint.path());
    w.field("input_format", torch::format_name(checkpoint.format()));
  };
  const auto tail = [&] { w.field("output", out_path).field("output_format", target); };
  if (target == "safetensors") {
    torch::SafetensorsOptions options;
    options.duplicate_tied = args.has("duplicate-tied");
    options.metadata.emplace_back("maploc.source", checkpoint.path());
    ProgressBar bar(args, "converting");
    options.progress = bar.callback();
    const auto report = torch::save_safetensors(checkpoint, out_path, options);
    head(report.data_bytes);
    tail();
    w.field("tensors", report.tensors).key("tied").begin_array();
    for (const auto& [name, kept] : report.tied) w.begin_object().field("name", name).field("same_as", kept).end_object();
    w.end_array().end_object();
    if (!args.has("json")) {
      std::printf("wrote %s: %zu tensors, %s\n", out_path.c_str(), report.tensors,
                  human_bytes(report.data_bytes).c_str());
      for (const auto& [name, kept] : report.tied) {
        std::printf("  tied: %s is %s (one copy; recorded in __metadata__ as %s%s)\n", name.c_str(), kept.c_str(),
                    std::string(torch::kTiedPrefix).c_str(), name.c_str());
      }
    }
  } else {
    torch::ArchiveOptions options;
    options.locations.assign(checkpoint.storages().size(), "");
    ProgressBar bar(args, "converting");
    options.progress = bar.callback();
    const auto report = torch::save_archive(checkpoint, out_path, options);
    head(report.data_bytes);
    w.field("layout", report.layout).field_array("notes", report.notes);
    tail();
    w.field("storages", report.storages).end_object();
    if (!args.has("json")) {
      std::printf("wrote %s: %zu storages, %s (%s)\n", out_path.c_str(), report.storages,
                  human_bytes(report.data_bytes).c_str(), report.layout.c_str());
      for (const auto& note : report.notes) std::printf("note: %s\n", note.c_str());
    }
  }
  if (args.has("json")) {
    out.append('\n');
    out.finish();
  }
  return kExitOk;
}

}  // namespace maploc::cli
