// parts.cpp - the storages one load places as segments of the checkpoint's: whole, or a rank's rows and columns.
#include "parts.h"

#include <algorithm>
#include <cstring>

#include "maploc/error.h"

namespace maploc::remap::detail {
namespace {

[[noreturn]] void bad(const std::string& why, const std::string& tensor) {
  throw Error(ErrorCode::kInvalidArgument, Stage::kRemap, why, std::nullopt, tensor);
}

const SliceRule* rule_for(const SliceSpec& spec, const std::string& name) {
  for (const auto& r : spec.rules) {
    if (glob_match(r.pattern, name)) return &r;
  }
  return nullptr;
}

bool contiguous(const torch::Tensor& t) {
  std::int64_t expect = 1;
  for (std::size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != expect) return false;
    expect *= std::max<std::int64_t>(t.shape[d], 1);
  }
  return true;
}

Part whole(const torch::Checkpoint& checkpoint, std::size_t storage) {
  const std::uint64_t n = checkpoint.storages()[storage].nbytes;
  return {storage, n, {}, true};
}

// The part of dim `dim` (0: rows, 1: columns) of contiguous tensor t that [b, e) of it selects.
Part split(const torch::Tensor& t, std::size_t dim, std::int64_t b, std::int64_t e) {
  const std::uint64_t size = torch::element_size(t.dtype);
  Part p{*t.storage, 0, {}, false};
  if (dim == 0) {
    p.nbytes = static_cast<std::uint64_t>(e - b) * static_cast<std::uint64_t>(t.stride[0]) * size;
    if (p.nbytes) p.segments.push_back({static_cast<std::uint64_t>(t.storage_offset + b * t.stride[0]) * size, 0, p.nbytes});
    return p;
  }
  const std::uint64_t run = static_cast<std::uint64_t>(e - b) * static_cast<std::uint64_t>(t.stride[1]) * size;
  for (std::int64_t r = 0; run != 0 && r < t.shape[0]; ++r) {
    p.segments.push_back(
        {static_cast<std::uint64_t>(t.storage_offset + r * t.stride[0] + b * t.stride[1]) * size, p.nbytes, run});
    p.nbytes += run;
  }
  return p;
}

}  // namespace

Parts whole_parts(const torch::Checkpoint& checkpoint) {
  Parts out{checkpoint.shared_tensors(), {}};
  out.parts.reserve(checkpoint.storages().size());
  for (std::size_t i = 0; i < checkpoint.storages().size(); ++i) out.parts.push_back(whole(checkpoint, i));
  return out;
}

Parts slice_parts(const torch::Checkpoint& checkpoint, const RankSlice& rs, SliceReport& report) {
  if (rs.world_size < 1 || rs.rank < 0 || rs.rank >= rs.world_size) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kRemap,
                "rank " + std::to_string(rs.rank) + " is not in a world of " + std::to_string(rs.world_size));
  }
  auto tensors = std::make_shared<std::vector<torch::Tensor>>();
  std::vector<Part> parts;
  std::vector<std::size_t> whole_of(checkpoint.storages().size(), ~std::size_t{0});  // replicated storages, placed once
  for (const torch::Tensor& t : checkpoint.tensors()) {
    if (t.is_component) continue;
    const SliceRule* rule = rule_for(rs.spec, t.name);
    const SliceKind kind = rule ? rule->kind : SliceKind::kReplicate;
    if (kind == SliceKind::kStage) {
      if (rule->stage >= rs.world_size) {
        bad("slice rule stage" + std::to_string(rule->stage) + ":" + rule->pattern + " names a rank outside a world of " +
                std::to_string(rs.world_size), t.name);
      }
      if (rule->stage != rs.rank) {
        ++report.tensors_skipped;
        continue;
      }
    }
    if (t.kind != torch::TensorKind::kDense || !t.storage) {
      bad("rank slicing places dense tensors; '" + t.name + "' is " + std::string(torch::tensor_kind_name(t.kind)) +
              " (load it without a slice)", t.name);
    }
    torch::Tensor out = t;
    if (kind == SliceKind::kReplicate || kind == SliceKind::kStage) {
      if (whole_of[*t.storage] == ~std::size_t{0}) {
        whole_of[*t.storage] = parts.size();
        parts.push_back(whole(checkpoint, *t.storage));
      }
      out.storage = whole_of[*t.storage];
      ++report.tensors_whole;
      tensors->push_back(std::move(out));
      continue;
    }
    const std::size_t dim = kind == SliceKind::kRows ? 0 : 1;
    if (t.shape.size() <= dim || !contiguous(t)) {
      bad("tensor '" + t.name + "' (" + std::to_string(t.shape.size()) + "-d" + (contiguous(t) ? "" : ", not contiguous") +
              ") cannot be split by " + (dim == 0 ? "rows" : "columns") + "; change the slice rule that matches it",
          t.name);
    }
    const auto [b, e] = slice_bounds(t.shape[dim], rs.rank, rs.world_size);
    out.shape[dim] = e - b;
    out.storage_offset = 0;
    out.stride.assign(out.shape.size(), 1);
    for (std::size_t d = out.shape.size(); d-- > 1;) out.stride[d - 1] = out.stride[d] * std::max<std::int64_t>(out.shape[d], 1);
    out.storage = parts.size();
    parts.push_back(split(t, dim, b, e));
    ++report.tensors_sliced;
    tensors->push_back(std::move(out));
  }
  return {std::move(tensors), std::move(parts)};
}

void gather(const Part& part, std::uint64_t offset, std::uint64_t n, std::uint8_t* out, const StorageReader& parent) {
  if (part.whole) return parent(offset, n, out);
  auto g = std::partition_point(part.segments.begin(), part.segments.end(),
                                [&](const Segment& x) { return x.dst + x.len <= offset; });
  for (; g != part.segments.end() && g->dst < offset + n; ++g) {
    const std::uint64_t from = std::max(offset, g->dst), to = std::min(offset + n, g->dst + g->len);
    parent(g->src + (from - g->dst), to - from, out + (from - offset));
  }
}

}  // namespace maploc::remap::detail
