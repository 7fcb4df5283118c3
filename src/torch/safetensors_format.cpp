// safetensors_format.cpp - reading .safetensors into a Checkpoint: header checks, one cpu storage per tensor.
#include <algorithm>

#include "maploc/torch/safetensors.h"
#include "torch/json_subset.h"
#include "torch/state.h"

namespace maploc::torch {
namespace {

struct Row {
  std::string_view st;
  DType dtype;
};

// safetensors' Dtype names (safetensors/src/tensor.rs) for the dtypes torch shares.
constexpr Row kRows[] = {
    {"F64", DType::kFloat64},          {"F32", DType::kFloat32},          {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16},        {"I64", DType::kInt64},            {"I32", DType::kInt32},
    {"I16", DType::kInt16},            {"I8", DType::kInt8},              {"U8", DType::kUInt8},
    {"BOOL", DType::kBool},            {"U16", DType::kUInt16},           {"U32", DType::kUInt32},
    {"U64", DType::kUInt64},           {"F8_E5M2", DType::kFloat8_e5m2},  {"F8_E4M3", DType::kFloat8_e4m3fn},
    {"F8_E5M2FNUZ", DType::kFloat8_e5m2fnuz}, {"F8_E4M3FNUZ", DType::kFloat8_e4m3fnuz},
    {"C64", DType::kComplex64},
};

[[noreturn]] void bad(const Checkpoint::State& st, const std::string& why, std::optional<std::uint64_t> off = {}) {
  fail(ErrorCode::kTorchBadSafetensors, "safetensors: " + why, st.path, off);
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin, end;
};

Entry parse_entry(const Checkpoint::State& st, const std::string& name, const json::Value& v) {
  using T = json::Value::Type;
  if (v.type != T::kObject) bad(st, "tensor '" + name + "' is not a JSON object");
  const json::Value* dt = v.find("dtype");
  const json::Value* shape = v.find("shape");
  const json::Value* offs = v.find("data_offsets");
  if (!dt || dt->type != T::kString || !shape || shape->type != T::kArray || !offs || offs->type != T::kArray ||
      offs->items.size() != 2) {
    bad(st, "tensor '" + name + "' lacks dtype, shape or a two-element data_offsets");
  }
  const auto dtype = dtype_from_safetensors(dt->text);
  if (!dtype) fail(ErrorCode::kTorchUnknownDType, "safetensors: tensor '" + name + "' has dtype '" + dt->text +
                   "', which maploc does not know", st.path);
  Entry e{name, *dtype, {}, 0, 0};
  if (shape->items.size() > st.options.limits.torch_max_rank) {
    bad(st, "tensor '" + name + "' has " + std::to_string(shape->items.size()) +
                " dimensions, above Limits::torch_max_rank");
  }
  std::uint64_t numel = 1;
  for (const auto& d : shape->items) {
    const auto n = d.as_u64();
    if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) bad(st, "tensor '" + name + "' has a bad dimension");
    if (*n != 0 && numel > UINT64_MAX / *n) bad(st, "tensor '" + name + "': element count overflows");
    numel *= *n;
    e.shape.push_back(static_cast<std::int64_t>(*n));
  }
  const auto b = offs->items[0].as_u64(), en = offs->items[1].as_u64();
  if (!b || !en || *b > *en) bad(st, "tensor '" + name + "' has data_offsets that are not 0 <= begin <= end");
  e.begin = *b;
  e.end = *en;
  const std::uint64_t es = element_size(e.dtype);
  if (numel > UINT64_MAX / es || numel * es != e.end - e.begin) {
    bad(st, "tensor '" + name + "' spans " + std::to_string(e.end - e.begin) + " bytes but its shape needs " +
                std::to_string(numel) + " x " + std::to_string(es));
  }
  return e;
}

std::vector<std::int64_t> contiguous_stride(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> stride(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) stride[i - 1] = stride[i] * std::max<std::int64_t>(shape[i], 1);
  return stride;
}

}  // namespace

std::optional<std::string_view> safetensors_dtype(DType dtype) noexcept {
  for (const Row& r : kRows) {
    if (r.dtype == dtype) return r.st;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) noexcept {
  for (const Row& r : kRows) {
    if (r.st == name) return r.dtype;
  }
  return std::nullopt;
}

void read_safetensors(Checkpoint::State& st) {
  st.format = Format::kSafetensors;
  st.byteorder = ByteOrder::kLittle;  // the format is little-endian by definition
  const Bytes& file = st.file.bytes;
  if (file.size() < 8) bad(st, "the file is shorter than the 8-byte header size");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file.data()[i];
  if (n > kSafetensorsMaxHeader) {
    bad(st, "header size " + std::to_string(n) + " exceeds the format's cap of " +
                std::to_string(kSafetensorsMaxHeader) + " bytes", 0);
  }
  if (n > file.size() - 8) {
    bad(st, "header size " + std::to_string(n) + " runs past the end of the file (" + std::to_string(file.size()) +
                " bytes): truncated", 0);
  }
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, n);
  auto [root, err] = json::parse(text);
  if (!root) bad(st, "header JSON: " + err.message, 8 + err.offset);
  if (root->type != json::Value::Type::kObject) bad(st, "the header is not a JSON object", 8);
  const std::uint64_t data_start = 8 + n;
  const std::uint64_t data_size = file.size() - data_start;
  std::vector<Entry> entries;
  for (const auto& [name, v] : root->members) {
    if (name == "__metadata__") {
      if (v.type != json::Value::Type::kObject) bad(st, "__metadata__ is not an object");
      for (const auto& [k, m] : v.members) {
        if (m.type != json::Value::Type::kString) bad(st, "__metadata__ value of '" + k + "' is not a string");
        st.metadata.emplace_back(k, m.text);
      }
      continue;
    }
    for (const Entry& e : entries) {
      if (e.name == name) bad(st, "tensor '" + name + "' appears twice in the header");
    }
    entries.push_back(parse_entry(st, name, v));
  }
  // The format's rule: tensors tile the data buffer exactly, no gaps, no overlaps.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t expect = 0;
  for (const Entry* e : by_offset) {
    if (e->begin != expect) {
      bad(st, "tensor '" + e->name + "' starts at data byte " + std::to_string(e->begin) + ", expected " +
                  std::to_string(expect) + (e->begin < expect ? " (overlapping ranges)" : " (a gap)"));
    }
    expect = e->end;
  }
  if (expect != data_size) {
    bad(st, expect > data_size ? "tensor data needs " + std::to_string(expect) + " bytes but only " +
                                     std::to_string(data_size) + " follow the header: truncated"
                               : std::to_string(data_size - expect) + " bytes follow the last tensor");
  }
  for (const Entry& e : entries) {
    Storage s;
    s.key = e.name;
    s.dtype = e.dtype;
    s.nbytes = e.end - e.begin;
    s.numel = s.nbytes / element_size(e.dtype);
    s.location = "cpu";
    s.record = e.name;
    s.file_offset = data_start + e.begin;
    st.storages.push_back(s);
    st.present_bytes.push_back(s.nbytes);
    st.stream_bytes.push_back(file.slice(data_start + e.begin, s.nbytes));
    Tensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.stride = contiguous_stride(e.shape);
    t.storage = st.storages.size() - 1;
    st.tensors.push_back(std::move(t));
  }
  // Tied tensors maploc wrote once come back as names sharing the kept tensor's storage.
  for (const auto& meta : st.metadata) {
    const std::string& k = meta.first;
    const std::string& kept = meta.second;  // not a structured binding: clang 14 cannot capture those
    if (k.rfind(kTiedPrefix, 0) != 0) continue;
    const std::string alias = k.substr(kTiedPrefix.size());
    auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == kept; });
    if (it == entries.end()) {
      st.diagnose("metadata ties '" + alias + "' to '" + kept + "', which is not in the file");
      continue;
    }
    Tensor t = st.tensors[static_cast<std::size_t>(it - entries.begin())];
    t.name = alias;
    st.tensors.push_back(std::move(t));
  }
  st.hints.push_back("safetensors, header " + std::to_string(n) + " bytes, " + std::to_string(entries.size()) +
                     " tensors");
}

}  // namespace maploc::torch
