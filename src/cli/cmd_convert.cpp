// cmd_convert.cpp - `maploc convert IN OUT`: torch checkpoints to safetensors and back.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "commands.h"
#include "progress.h"
#include "format.h"
#include "json_writer.h"
#include "maploc/error.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/safetensors.h"
#include "maploc/torch/write.h"
#include "maploc/torch/write_set.h"

namespace maploc::cli {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What OUT's extension says: "safetensors", "torch", or "" for an extension convert does not write.
constexpr std::pair<std::string_view, std::string_view> kExtensions[] = {
    {".safetensors", "safetensors"}, {".pt", "torch"}, {".pth", "torch"}, {".bin", "torch"}, {".ckpt", "torch"}};
constexpr const char* kExtensionList = ".safetensors (safetensors), .pt, .pth, .bin, .ckpt (torch)";

std::string format_of_extension(const std::string& out) {
  const std::string ext = std::filesystem::path(out).extension().string();
  for (const auto& [e, format] : kExtensions) {
    if (ext == e) return std::string(format);
  }
  return "";
}

// The output format: --to, else OUT's extension. An extension convert does not write
// (.onnx, .txt, none) is refused rather than guessed; so is --to contradicting it.
std::string target_of(const Args& args) {
  const std::string& out = args.positional[1];
  const std::string by_extension = format_of_extension(out);
  const std::string to = args.get("to");
  if (args.has("to")) {
    if (to != "safetensors" && to != "torch") {
      throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "--to takes safetensors or torch, not '" + to + "'");
    }
    if (!by_extension.empty() && by_extension != to) {
      throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                  "--to " + to + " but OUT '" + out + "' has the extension of " + by_extension + " files");
    }
    return to;
  }
  if (by_extension.empty()) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                "convert writes safetensors or torch files and cannot tell which from OUT '" + out +
                    "': give OUT one of the extensions " + kExtensionList + ", or say --to safetensors|torch");
  }
  return by_extension;
}

// "5GB", "500MB", "64MiB", "1000": bytes (decimal units as huggingface_hub reads them).
std::uint64_t size_of(const std::string& text) {
  static constexpr std::pair<std::string_view, std::uint64_t> kUnits[] = {
      {"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10}, {"GB", 1'000'000'000},
      {"MB", 1'000'000},   {"KB", 1'000},       {"B", 1},           {"", 1}};
  for (const auto& [unit, scale] : kUnits) {
    if (!ends_with(text, unit)) continue;
    const std::string digits = text.substr(0, text.size() - unit.size());
    char* end = nullptr;
    const unsigned long long n = std::strtoull(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || digits[0] == '-' || n == 0 || n > UINT64_MAX / scale) break;
    return n * scale;
  }
  throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
              "--shard-size takes a size such as 5GB, 500MB or 64MiB, not '" + text + "'");
}

}  // namespace

void refuse_out_is_in(const torch::Checkpoint& checkpoint, const std::string& in, const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(out, ec) || ec) return;  // nothing there that writing OUT could replace
  // A sharded set: OUT may not be one of its files either (its directory is IN itself).
  std::vector<std::string> inputs{in, checkpoint.path()};
  for (const auto& m : checkpoint.members()) inputs.push_back(m.path);
  std::error_code ignored;
  for (const auto& input : inputs) {
    if (fs::equivalent(input, out, ignored)) {
      throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                  "OUT '" + out + "' is the input '" + input +
                      "' itself (the same file by another name or a link): IN is never overwritten; write OUT "
                      "elsewhere, then rename it over IN if that is what you want");
    }
  }
}

int write_set_command(const Args& args, const torch::Checkpoint& checkpoint, const std::string& out_dir,
                      bool safetensors, std::vector<std::string> locations) {
  torch::SetWriteOptions options;
  options.safetensors = safetensors;
  options.max_shard_bytes = size_of(args.get("shard-size"));
  options.archive.locations = std::move(locations);
  options.st.duplicate_tied = args.has("duplicate-tied");
  options.st.metadata.emplace_back("maploc.source", checkpoint.path());
  const auto report = writing_out([&] { return torch::save_set(checkpoint, out_dir, options); });
  if (args.has("json")) {
    OutBuffer out(OutBuffer::Mode::kWhole);
    JsonWriter w(out.text());
    w.begin_object().field("data_bytes", report.data_bytes).key("files").begin_array();
    for (const auto& [file, n] : report.files) w.begin_object().field("file", file).field("tensors", n).end_object();
    w.end_array().field("index", report.index).field("input", checkpoint.path());
    w.field("input_format", torch::format_name(checkpoint.format())).field("output", out_dir);
    w.field("output_format", safetensors ? "safetensors" : "torch").end_object();
    out.append('\n');
    out.finish();
    return kExitOk;
  }
  std::printf("wrote %s: %zu shards, %s, index %s\n", out_dir.c_str(), report.files.size(),
              human_bytes(report.data_bytes).c_str(), report.index.c_str());
  for (const auto& [file, n] : report.files) std::printf("  %s  %zu tensors\n", file.c_str(), n);
  for (const auto& [name, kept] : report.tied) std::printf("  tied: %s is %s (one copy)\n", name.c_str(), kept.c_str());
  return kExitOk;
}

int cmd_convert(const Args& args) {
  if (args.positional.size() != 2) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                "usage: maploc convert IN OUT [--to safetensors|torch] [--duplicate-tied] [--json]");
  }
  const std::string& out_path = args.positional[1];
  const std::string target = target_of(args);
  const auto checkpoint = torch::Checkpoint::open(args.positional[0], open_options(args));
  refuse_out_is_in(checkpoint, args.positional[0], out_path);
  checkpoint.prefetch();  // a URL source: every storage in one go, several requests in flight
  if (args.has("shard-size")) {
    return write_set_command(args, checkpoint, out_path, target == "safetensors",
                             std::vector<std::string>(checkpoint.storages().size()));
  }
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
    const auto report = writing_out([&] { return torch::save_safetensors(checkpoint, out_path, options); });
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
    const auto report = writing_out([&] { return torch::save_archive(checkpoint, out_path, options); });
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
