// manifest_view.h - a Checkpoint described in the shape of the fixture manifests (fixtures/README.md).
#pragma once

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/sha256.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"

namespace maploc::test {

struct ManifestView {
  nlohmann::json tensors = nlohmann::json::array();
  nlohmann::json storages = nlohmann::json::array();
  nlohmann::json sparse = nlohmann::json::array();
};

/// Storage bytes as the values torch loads: byte-swapped for big-endian files.
inline std::string storage_native_sha256(const torch::Checkpoint& c, std::size_t i) {
  const auto& s = c.storages()[i];
  const Bytes raw = c.storage_bytes(i);
  std::vector<std::uint8_t> b(raw.data(), raw.data() + raw.size());
  const std::size_t unit = c.byteorder() == torch::ByteOrder::kBig ? torch::swap_unit(s.dtype) : 1;
  if (unit > 1) {
    for (std::size_t k = 0; k + unit <= b.size(); k += unit) std::reverse(b.begin() + k, b.begin() + k + unit);
  }
  return Sha256::hex(b);
}

inline bool is_sparse(torch::TensorKind k) {
  using torch::TensorKind;
  return k == TensorKind::kSparseCoo || k == TensorKind::kSparseCsr || k == TensorKind::kSparseCsc ||
         k == TensorKind::kSparseBsr || k == TensorKind::kSparseBsc;
}

inline ManifestView manifest_view(const torch::Checkpoint& c) {
  using nlohmann::json;
  ManifestView v;
  const auto& ts = c.tensors();
  const auto& ss = c.storages();
  std::vector<bool> quant_part(ts.size(), false);
  for (const auto& t : ts) {
    if (t.kind == torch::TensorKind::kQuantized) {
      for (const auto& comp : t.components) quant_part[comp.tensor] = true;
    }
  }
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    if (is_sparse(t.kind)) {
      json comps = json::array();
      for (const auto& comp : t.components) comps.push_back(ts[comp.tensor].name);
      v.sparse.push_back({{"name", t.name}, {"layout", torch::tensor_kind_name(t.kind)},
                          {"dtype", torch::dtype_name(t.dtype)}, {"shape", t.shape},
                          {"requires_grad", t.requires_grad}, {"components", comps}});
      continue;
    }
    if (!t.storage || t.kind == torch::TensorKind::kStorage || quant_part[i]) continue;
    json e = {{"name", t.name},
              {"dtype", torch::dtype_name(t.dtype)},
              {"shape", t.shape},
              {"stride", t.stride},
              {"storage_offset", t.storage_offset},
              {"storage_key", ss[*t.storage].key},
              {"location", ss[*t.storage].location},
              {"requires_grad", t.requires_grad},
              {"sha256", torch::tensor_sha256(c, t)}};
    if (t.quantizer) {
      e["qscheme"] = t.quantizer->qscheme;
      if (t.quantizer->axis >= 0) {
        e["axis"] = t.quantizer->axis;
      } else {
        e["scale"] = t.quantizer->scale;
        e["zero_point"] = t.quantizer->zero_point;
      }
    }
    v.tensors.push_back(std::move(e));
  }
  for (std::size_t i = 0; i < ss.size(); ++i) {
    const auto& s = ss[i];
    json e = {{"key", s.key},          {"dtype", torch::dtype_name(s.dtype)}, {"numel", s.numel},
              {"nbytes", s.nbytes},    {"location", s.location},             {"sha256", storage_native_sha256(c, i)}};
    if (s.view_of) {
      e["view_of"] = ss[*s.view_of].key;
      e["view_offset"] = s.view_offset;
    }
    v.storages.push_back(std::move(e));
  }
  return v;
}

/// sha256 of the entries' compact, key-sorted JSON lines joined by '\n' (the summary digests).
inline std::string entries_digest(const nlohmann::json& entries) {
  std::string all;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i) all += '\n';
    all += entries[i].dump(-1, ' ', true);
  }
  return Sha256::hex({reinterpret_cast<const std::uint8_t*>(all.data()), all.size()});
}

}  // namespace maploc::test
