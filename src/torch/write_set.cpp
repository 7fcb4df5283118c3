// write_set.cpp - a checkpoint as shards + an index, split the way huggingface_hub splits a state_dict.
#include "maploc/torch/write_set.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "support/atomic_file.h"
#include "support/json_string.h"
#include "maploc/error.h"
#include "json_subset.h"

namespace maploc::torch {
namespace fs = std::filesystem;
namespace {

// Union-find over storages: tensors viewing one storage (or one root) stay together.
std::size_t root_of(std::vector<std::size_t>& parent, std::size_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

// Shards as lists of tensor indices.
std::vector<std::vector<std::size_t>> split(const Checkpoint& c, std::uint64_t limit) {
  const auto& ss = c.storages();
  const auto& ts = c.tensors();
  std::vector<std::size_t> parent(ss.size());
  std::iota(parent.begin(), parent.end(), std::size_t{0});
  for (std::size_t s = 0; s < ss.size(); ++s) {
    if (ss[s].view_of) parent[root_of(parent, s)] = root_of(parent, *ss[s].view_of);
  }
  // Groups in order of their first tensor; a group's size is its storages' bytes, each once.
  std::vector<std::size_t> group_of_root(ss.size(), ~std::size_t{0});
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::uint64_t> sizes;
  std::vector<char> counted(ss.size(), 0);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].is_component) continue;
    std::size_t g = groups.size();
    if (ts[i].storage) {
      const std::size_t r = root_of(parent, *ts[i].storage);
      if (group_of_root[r] == ~std::size_t{0}) group_of_root[r] = groups.size();
      g = group_of_root[r];
    }
    if (g == groups.size()) {
      groups.emplace_back();
      sizes.push_back(0);
    }
    groups[g].push_back(i);
    if (ts[i].storage && !counted[*ts[i].storage]) {
      counted[*ts[i].storage] = 1;
      sizes[g] += ss[*ts[i].storage].view_of ? 0 : ss[*ts[i].storage].nbytes;
    }
  }
  std::vector<std::vector<std::size_t>> shards;
  std::uint64_t cur = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (shards.empty() || (cur > 0 && cur + sizes[g] > limit)) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().insert(shards.back().end(), groups[g].begin(), groups[g].end());
    cur += sizes[g];
  }
  return shards;
}

}  // namespace

SetWriteReport save_set(const Checkpoint& checkpoint, const fs::path& dir, const SetWriteOptions& options) {
  if (options.max_shard_bytes == 0) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kTorch, "save_set: max_shard_bytes must be above 0");
  }
  fs::create_directories(dir);
  const auto shards = split(checkpoint, options.max_shard_bytes);
  const std::string stem = options.safetensors ? "model" : "pytorch_model";
  const std::string ext = options.safetensors ? ".safetensors" : ".bin";
  SetWriteReport report;
  std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> file
  for (std::size_t k = 0; k < shards.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "-%05zu-of-%05zu", k + 1, shards.size());
    const std::string file = stem + name + ext;
    std::vector<char> in(checkpoint.tensors().size(), 0);
    for (const std::size_t t : shards[k]) in[t] = 1;
    const auto include = [&in](std::size_t t) { return in[t] != 0; };
    std::vector<std::string> tied_names;
    if (options.safetensors) {
      SafetensorsOptions so = options.st;
      so.include = include;
      const auto r = save_safetensors(checkpoint, dir / file, so);
      report.data_bytes += r.data_bytes;
      for (const auto& t : r.tied) {
        report.tied.push_back(t);
        tied_names.push_back(t.first);
      }
    } else {
      ArchiveOptions ao = options.archive;
      ao.include = include;
      report.data_bytes += save_archive(checkpoint, dir / file, ao).data_bytes;
    }
    std::sort(tied_names.begin(), tied_names.end());
    std::size_t count = 0;
    for (const std::size_t t : shards[k]) {
      const std::string& n = checkpoint.tensors()[t].name;
      if (std::binary_search(tied_names.begin(), tied_names.end(), n)) continue;  // in __metadata__, not a tensor
      // A wrapper subclass has no bytes: its inner tensors are listed, it is in the shard's __metadata__.
      if (options.safetensors && checkpoint.tensors()[t].kind == TensorKind::kWrapperSubclass) continue;
      weight_map.emplace_back(n, file);
      ++count;
    }
    report.files.emplace_back(file, count);
  }
  std::sort(weight_map.begin(), weight_map.end());
  std::string index = "{\n  \"metadata\": {\n    \"total_size\": " + std::to_string(report.data_bytes) +
                      "\n  },\n  \"weight_map\": {";
  for (std::size_t i = 0; i < weight_map.size(); ++i) {
    index += (i ? ",\n    " : "\n    ") + maploc::detail::json_string(weight_map[i].first) + ": " +
             maploc::detail::json_string(weight_map[i].second);
  }
  index += "\n  }\n}\n";
  const fs::path index_path = dir / (stem + ext + ".index.json");
  AtomicFile f = AtomicFile::create(index_path);
  f.write({reinterpret_cast<const std::uint8_t*>(index.data()), index.size()});
  f.commit();
  report.index = index_path.string();
  return report;
}

}  // namespace maploc::torch
