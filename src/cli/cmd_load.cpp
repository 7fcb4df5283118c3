// cmd_load.cpp - `maploc load`: place every storage where the SPEC says (views, populated views, copies),
// report time and rate, optionally hash.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <map>

#include "commands.h"
#include "progress.h"
#include "format.h"
#include "json_writer.h"
#include "remote_json.h"
#include "parallel.h"
#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::cli {
namespace {

remap::HostMemory host_memory_of(const Args& args) {
  const std::string host = args.get("host", "view");
  if (host == "view") return remap::HostMemory::kMappedView;
  if (host == "copy") return remap::HostMemory::kOwnedCopy;
  if (host == "pinned") return remap::HostMemory::kPinned;
  throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "--host takes view, copy or pinned, not '" + host + "'");
}

int count_of(const Args& args, const std::string& name) {
  const std::string v = args.get(name);
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 0 || n > 1 << 20) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "--" + name + " takes a count, not '" + v + "'");
  }
  return static_cast<int>(n);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int cmd_load(const Args& args) {
  if (args.positional.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                "usage: maploc load FILE [--map-location SPEC] [--host view|copy|pinned] [--writable] [--populate] "
                "[--no-arena] [--hash] [--json]");
  }
  remap::LoadOptions options;
  options.map = map_location_of(args);
  options.host = host_memory_of(args);
  options.writable = args.has("writable");
  options.populate = args.has("populate");
  if (options.populate && options.host != remap::HostMemory::kMappedView) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                "--populate maps the pages of file views: it needs --host view (copies are resident already)");
  }
  options.cuda.arena = !args.has("no-arena");
  remap::SliceReport slice_report;
  if (args.has("slice")) {
    auto spec = as_usage([&] { return remap::SliceSpec::parse(args.get("slice")); });
    if (args.has("rank") || args.has("world-size")) {
      const int rank = count_of(args, "rank"), world_size = count_of(args, "world-size");
      if (world_size < 1 || rank >= world_size) {
        throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                    "--rank " + std::to_string(rank) + " is not below --world-size " + std::to_string(world_size));
      }
      options.slice = remap::RankSlice{rank, world_size, std::move(spec)};
    } else {
      options.slice = as_usage([&] { return remap::RankSlice::from_environment(std::move(spec)); });
    }
    options.slice_report = &slice_report;
  } else if (args.has("rank") || args.has("world-size")) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "--rank and --world-size go with --slice RULES");
  }

  const auto t0 = std::chrono::steady_clock::now();
  const auto checkpoint = torch::Checkpoint::open(args.positional[0], open_options(args));
  const double open_s = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  ProgressBar bar(args, "loading");
  options.progress = bar.callback();
  const auto loaded = remap::load(checkpoint, options);
  const double load_s = seconds_since(t1);

  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> per_device;  // storages, bytes
  std::uint64_t total = 0;
  for (const auto& s : loaded.storages()) {
    auto& row = per_device[s.device.str()];
    row.first += 1;
    row.second += s.nbytes;
    if (s.device.kind != remap::Device::Kind::kMeta) total += s.nbytes;
  }
  const bool hash = args.has("hash");
  // Every hashed tensor's sha256, computed over the host threads.
  std::vector<std::string> sha(hash ? loaded.tensors().size() : 0);
  const auto hashed = [&](std::size_t i) {
    return loaded.tensors()[i].storage && loaded.device_of(i).kind != remap::Device::Kind::kMeta;
  };
  parallel_for(sha.size(), [&](std::size_t i) {
    if (hashed(i)) sha[i] = loaded.tensor_sha256(i);
  });
  if (args.has("json")) {
    OutBuffer out(OutBuffer::Mode::kWhole);
    JsonWriter w(out.text());
    w.begin_object().field("bytes", total).key("devices").begin_array();
    for (const auto& [device, row] : per_device) {
      w.begin_object().field("bytes", row.second).field("device", device).field("storages", row.first).end_object();
    }
    w.end_array().field("file", checkpoint.path()).field("load_seconds", load_s).field("open_seconds", open_s);
    write_remote_json(w, checkpoint);
    if (options.slice) {
      w.key("slice")
          .begin_object()
          .field("bytes_from_files", slice_report.bytes_from_files)
          .field("bytes_from_memory", slice_report.bytes_from_memory)
          .field("rank", options.slice->rank)
          .field("tensors_skipped", slice_report.tensors_skipped)
          .field("tensors_sliced", slice_report.tensors_sliced)
          .field("tensors_whole", slice_report.tensors_whole)
          .field("world_size", options.slice->world_size)
          .end_object();
    }
    w.key("tensors").begin_array();
    for (std::size_t i = 0; i < loaded.tensors().size(); ++i) {
      w.begin_object().field("device", loaded.device_of(i).str()).field("name", loaded.tensors()[i].name);
      if (hash && hashed(i)) w.field("sha256", sha[i]);
      w.end_object();
    }
    w.end_array();
    std::vector<std::string> unreferenced;
    for (std::size_t s : checkpoint.unreferenced_storages()) unreferenced.push_back(checkpoint.storages()[s].key);
    w.field_array("unreferenced_storages", unreferenced).end_object();
    out.append('\n');
    out.finish();
    return kExitOk;
  }
  OutBuffer out(OutBuffer::Mode::kStream);
  out.printf("%s: opened in %.2f ms, %zu tensors, %zu storages\n", checkpoint.path().c_str(), open_s * 1e3,
              loaded.tensors().size(), loaded.storages().size());
  if (const auto& u = checkpoint.unreferenced_storages(); !u.empty()) {
    out.printf("%zu storage(s) placed but reached by no tensor maploc names (warned above; --strict refuses):", u.size());
    for (std::size_t s : u) out.printf(" %s", checkpoint.storages()[s].key.c_str());
    out.printf("\n");
  }
  // Read-only views of the mapping copy nothing: a rate would mean nothing,
  // unless every page was populated. (copies are writable; read-only CPU
  // storages are views of the mapping)
  const bool views_only = std::all_of(loaded.storages().begin(), loaded.storages().end(), [](const auto& s) {
    return s.device.kind == remap::Device::Kind::kMeta || (s.device.kind == remap::Device::Kind::kCpu && !s.writable);
  });
  if (options.populate) {
    out.printf("placed %s as file views, every page populated, in %.2f ms (%s)\n", human_bytes(total).c_str(),
                load_s * 1e3, human_rate(total, load_s).c_str());
  } else if (views_only) {
    out.printf("placed %s as zero-copy views of the file in %.2f ms\n", human_bytes(total).c_str(), load_s * 1e3);
  } else {
    out.printf("placed %s in %.2f ms (%s)\n", human_bytes(total).c_str(), load_s * 1e3,
                human_rate(total, load_s).c_str());
  }
  if (options.slice) {
    out.printf("rank %d of %d: %zu tensors sliced, %zu whole, %zu left to other ranks; read %llu bytes of the files"
               " (%llu more from memory)\n",
               options.slice->rank, options.slice->world_size, slice_report.tensors_sliced, slice_report.tensors_whole,
               slice_report.tensors_skipped, static_cast<unsigned long long>(slice_report.bytes_from_files),
               static_cast<unsigned long long>(slice_report.bytes_from_memory));
  }
  for (const auto& [device, row] : per_device) {
    out.printf("  %-8s %6llu storages  %10s\n", device.c_str(), static_cast<unsigned long long>(row.first),
                human_bytes(row.second).c_str());
  }
  if (hash) {
    for (std::size_t i = 0; i < loaded.tensors().size(); ++i) {
      if (hashed(i)) out.printf("%s  %s\n", sha[i].c_str(), loaded.tensors()[i].name.c_str());
    }
  }
  return kExitOk;
}

}  // namespace maploc::cli
