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

// Per tensor, the entry of the state_dict it travels with: up from a composite's part to the
// composite, from a tensor held in a tensor's state to its holder, to a tensor that is neither.
std::vector<std::size_t> top_of(const Checkpoint& c) {
  const auto& ts = c.tensors();
  const std::size_t n = ts.size();
  std::vector<std::size_t> up(n);
  std::iota(up.begin(), up.end(), std::size_t{0});
  for (std::size_t i = 0; i < n; ++i) {
    for (const Component& part : ts[i].components) up[part.tensor] = i;
    if (ts[i].held_by) up[i] = *ts[i].held_by;
  }
  constexpr std::size_t kNone = ~std::size_t{0};
  std::vector<std::size_t> top(n, kNone);
  std::vector<std::size_t> path;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t j = i;
    path.clear();
    while (top[j] == kNone && up[j] != j && path.size() <= n) {
      path.push_back(j);
      j = up[j];
    }
    const std::size_t r = top[j] != kNone ? top[j] : j;
    top[j] = r;
    for (const std::size_t p : path) top[p] = r;
  }
  return top;
}

// Shards as lists of state_dict entries (tensor indices whose top is themselves): entries whose
// storages overlap (one storage, views of one root, a wrapper's inner tensors) stay together.
std::vector<std::vector<std::size_t>> split(const Checkpoint& c, const std::vector<std::size_t>& top,
                                            std::uint64_t limit) {
  const auto& ss = c.storages();
  const auto& ts = c.tensors();
  constexpr std::size_t kNone = ~std::size_t{0};
  std::vector<std::size_t> parent(ss.size());
  std::iota(parent.begin(), parent.end(), std::size_t{0});
  for (std::size_t s = 0; s < ss.size(); ++s) {
    if (ss[s].view_of) parent[root_of(parent, s)] = root_of(parent, *ss[s].view_of);
  }
  std::vector<std::size_t> anchor(ts.size(), kNone);  // per entry: a storage of its closure
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].storage) continue;
    const std::size_t r = root_of(parent, *ts[i].storage);
    std::size_t& a = anchor[top[i]];
    if (a == kNone) {
      a = r;
    } else {
      parent[root_of(parent, a)] = r;
    }
  }
  // Groups in order of their first entry; a group's size is its storages' bytes, each once.
  std::vector<std::size_t> group_of_root(ss.size(), kNone);
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (top[i] != i) continue;
    std::size_t g = groups.size();
    if (anchor[i] != kNone) {
      std::size_t& slot = group_of_root[root_of(parent, anchor[i])];
      if (slot == kNone) slot = groups.size();
      g = slot;
    }
    if (g == groups.size()) groups.emplace_back();
    groups[g].push_back(i);
  }
  std::vector<std::uint64_t> sizes(groups.size(), 0);
  std::vector<char> counted(ss.size(), 0);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].storage || counted[*ts[i].storage]) continue;
    counted[*ts[i].storage] = 1;
    const std::size_t g = group_of_root[root_of(parent, *ts[i].storage)];
    if (g != kNone && !ss[*ts[i].storage].view_of) sizes[g] += ss[*ts[i].storage].nbytes;
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
  const auto top = top_of(checkpoint);
  const auto shards = split(checkpoint, top, options.max_shard_bytes);
  const std::string stem = options.safetensors ? "model" : "pytorch_model";
  const std::string ext = options.safetensors ? ".safetensors" : ".bin";
  SetWriteReport report;
  std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> file
  for (std::size_t k = 0; k < shards.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "-%05zu-of-%05zu", k + 1, shards.size());
    const std::string file = stem + name + ext;
    // An entry goes with everything that travels with it (inner tensors, parts).
    std::vector<char> entry(checkpoint.tensors().size(), 0);
    for (const std::size_t t : shards[k]) entry[t] = 1;
    std::vector<char> in(checkpoint.tensors().size(), 0);
    for (std::size_t t = 0; t < in.size(); ++t) in[t] = entry[top[t]];
    const auto include = [&in](std::size_t t) { return in[t] != 0; };
    std::vector<std::size_t> written;  // the tensors the shard holds by name: the index's weight_map
    if (options.safetensors) {
      SafetensorsOptions so = options.st;
      so.include = include;
      auto r = save_safetensors(checkpoint, dir / file, so);
      report.data_bytes += r.data_bytes;
      for (const auto& t : r.tied) report.tied.push_back(t);
      written = std::move(r.written);
    } else {
      ArchiveOptions ao = options.archive;
      ao.include = include;
      auto r = save_archive(checkpoint, dir / file, ao);
      report.data_bytes += r.data_bytes;
      written = std::move(r.keys);
    }
    for (const std::size_t t : written) weight_map.emplace_back(checkpoint.tensors()[t].name, file);
    const std::size_t count = written.size();
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
