// safetensors_format.cpp - reading .safetensors into a Checkpoint: header checks, one cpu storage per tensor.
#include <algorithm>
#include <cstdio>
#include <string_view>

#include "maploc/torch/safetensors.h"
#include "support/flat_index.h"
#include "json_subset.h"
#include "state.h"

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

// Index of the first byte of `text` that does not begin a well-formed UTF-8 sequence (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or npos: what Rust's
// str::from_utf8 accepts, which the safetensors package runs on the whole header.
std::size_t invalid_utf8_at(std::string_view text) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c == 0xED) len = 3, hi = 0x9F;  // U+D800-U+DFFF: surrogates
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return i;
    if (n - i < len || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// A decoded name or metadata string: the header's bytes were UTF-8, but a \u escape of a lone
// surrogate (\udc80) decodes to bytes that are not (serde_json refuses it, and it would name the
// same tensor as the raw bytes ED B2 80).
void require_utf8(const Checkpoint::State& st, std::string_view what, const std::string& text) {
  const std::size_t at = invalid_utf8_at(text);
  if (at == std::string_view::npos) return;
  std::string shown;
  for (unsigned char c : text.substr(0, std::min<std::size_t>(text.size(), 64))) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      shown.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      shown += buf;
    }
  }
  bad(st, std::string(what) + " '" + shown + "' is not valid UTF-8 at its byte " + std::to_string(at) +
              " (an escaped lone surrogate); the safetensors package refuses it");
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin, end;
};

// One header member as read, before its checks: what a tensor entry's check
// needs and nothing else, so the header's memory is bounded by its entries
// (each at least ~50 bytes of JSON), not by its tokens.
struct Raw {
  std::string name;
  bool metadata = false;
  bool object = false;
  // a tensor: the first dtype, shape and data_offsets members
  enum class Field : std::uint8_t { kAbsent, kGood, kBad };
  Field dtype = Field::kAbsent, shape = Field::kAbsent, offsets = Field::kAbsent;
  std::string dtype_text;
  std::vector<std::optional<std::uint64_t>> dims;     ///< at most torch_max_rank + 1 kept
  std::size_t rank = 0;
  std::vector<std::optional<std::uint64_t>> offs;     ///< at most 3 kept
  // __metadata__: its string entries, and the key of its first non-string value
  std::vector<std::pair<std::string, std::string>> meta;
  std::optional<std::string> bad_meta;
};

// Numbers as json::as_u64 reads them; anything else is not one.
std::optional<std::uint64_t> u64_item(json::Reader& r) {
  if (r.peek() != json::Reader::Type::kNumber) {
    r.skip();
    return std::nullopt;
  }
  return json::as_u64(r.number());
}

void read_tensor_fields(json::Reader& r, Raw& raw, std::uint64_t max_rank) {
  using T = json::Reader::Type;
  if (r.peek() != T::kObject) {
    r.skip();
    return;
  }
  raw.object = true;
  r.object([&](std::string&& key) {
    if (key == "dtype" && raw.dtype == Raw::Field::kAbsent) {
      if (r.peek() == T::kString) {
        raw.dtype_text = r.string();
        raw.dtype = Raw::Field::kGood;
      } else {
        r.skip();
        raw.dtype = Raw::Field::kBad;
      }
    } else if (key == "shape" && raw.shape == Raw::Field::kAbsent) {
      if (r.peek() == T::kArray) {
        raw.shape = Raw::Field::kGood;
        r.array([&] {
          const auto n = u64_item(r);
          if (raw.rank++ <= max_rank) raw.dims.push_back(n);
        });
      } else {
        r.skip();
        raw.shape = Raw::Field::kBad;
      }
    } else if (key == "data_offsets" && raw.offsets == Raw::Field::kAbsent) {
      if (r.peek() == T::kArray) {
        raw.offsets = Raw::Field::kGood;
        r.array([&] {
          const auto n = u64_item(r);
          if (raw.offs.size() < 3) raw.offs.push_back(n);
        });
      } else {
        r.skip();
        raw.offsets = Raw::Field::kBad;
      }
    } else {
      r.skip();
    }
  });
}

void read_metadata(json::Reader& r, Raw& raw, std::size_t& entries, const Checkpoint::State& st) {
  using T = json::Reader::Type;
  if (r.peek() != T::kObject) {
    r.skip();
    return;
  }
  raw.object = true;
  r.object([&](std::string&& key) {
    if (r.peek() != T::kString) {
      if (!raw.bad_meta) raw.bad_meta = key;
      r.skip();
      return;
    }
    if (++entries > st.options.limits.torch_max_tensors) {
      fail(ErrorCode::kTorchLimitTensors, "safetensors: __metadata__ has more than Limits::torch_max_tensors (" +
                                              std::to_string(st.options.limits.torch_max_tensors) + ") entries",
           st.path);
    }
    raw.meta.emplace_back(std::move(key), r.string());
  });
}

// The header's members in file order, read in one pass.
std::vector<Raw> read_header(const Checkpoint::State& st, std::string_view text) {
  std::vector<Raw> out;
  std::size_t meta_entries = 0;
  try {
    json::Reader r(text);
    if (r.peek() != json::Reader::Type::kObject) {
      r.skip();
      r.end();
      bad(st, "the header is not a JSON object", 8);
    }
    r.object([&](std::string&& name) {
      Raw raw;
      raw.metadata = name == "__metadata__";
      raw.name = std::move(name);
      if (raw.metadata) {
        read_metadata(r, raw, meta_entries, st);
      } else {
        if (out.size() >= st.options.limits.torch_max_tensors) {
          fail(ErrorCode::kTorchLimitTensors, "safetensors: the header declares more than Limits::torch_max_tensors (" +
                                                  std::to_string(st.options.limits.torch_max_tensors) + ") tensors",
               st.path, 8 + r.offset());
        }
        read_tensor_fields(r, raw, st.options.limits.torch_max_rank);
      }
      out.push_back(std::move(raw));
    });
    r.end();
  } catch (const json::Failure& f) {
    bad(st, "header JSON: " + f.message, 8 + f.offset);
  }
  return out;
}

Entry parse_entry(const Checkpoint::State& st, const Raw& raw) {
  const std::string& name = raw.name;
  if (!raw.object) bad(st, "tensor '" + name + "' is not a JSON object");
  if (raw.dtype != Raw::Field::kGood || raw.shape != Raw::Field::kGood || raw.offsets != Raw::Field::kGood ||
      raw.offs.size() != 2) {
    bad(st, "tensor '" + name + "' lacks dtype, shape or a two-element data_offsets");
  }
  const auto dtype = dtype_from_safetensors(raw.dtype_text);
  if (!dtype) fail(ErrorCode::kTorchUnknownDType, "safetensors: tensor '" + name + "' has dtype '" + raw.dtype_text +
                   "', which maploc does not know", st.path);
  Entry e{name, *dtype, {}, 0, 0};
  if (raw.rank > st.options.limits.torch_max_rank) {
    bad(st, "tensor '" + name + "' has " + std::to_string(raw.rank) + " dimensions, above Limits::torch_max_rank");
  }
  std::uint64_t numel = 1;
  for (const auto& n : raw.dims) {
    if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) bad(st, "tensor '" + name + "' has a bad dimension");
    if (*n != 0 && numel > UINT64_MAX / *n) bad(st, "tensor '" + name + "': element count overflows");
    numel *= *n;
    e.shape.push_back(static_cast<std::int64_t>(*n));
  }
  const auto b = raw.offs[0], en = raw.offs[1];
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
  if (const std::size_t at = invalid_utf8_at(text); at != std::string_view::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[at]));
    bad(st, "the header is not valid UTF-8 at file byte " + std::to_string(8 + at) + " (" + byte +
                "); the safetensors package refuses such a header, and names that are not UTF-8 have no one text",
        8 + at);
  }
  std::vector<Raw> members = read_header(st, text);
  const std::uint64_t data_start = 8 + n;
  const std::uint64_t data_size = file.size() - data_start;
  std::vector<Entry> entries;
  maploc::detail::FlatIndex by_name(members.size());  // seeded: names cannot be chosen to collide
  auto same_name = [&](const std::string& name) { return [&](std::uint32_t i) { return entries[i].name == name; }; };
  for (Raw& raw : members) {
    if (raw.metadata) {
      if (!raw.object) bad(st, "__metadata__ is not an object");
      if (raw.bad_meta) bad(st, "__metadata__ value of '" + *raw.bad_meta + "' is not a string");
      for (const auto& [key, value] : raw.meta) {
        require_utf8(st, "__metadata__ key", key);
        require_utf8(st, "the __metadata__ value of '" + key + "'", value);
      }
      for (auto& kv : raw.meta) st.metadata.push_back(std::move(kv));
      continue;
    }
    require_utf8(st, "tensor name", raw.name);
    const std::uint64_t h = maploc::detail::hash_text(raw.name);
    if (by_name.find(h, same_name(raw.name))) bad(st, "tensor '" + raw.name + "' appears twice in the header");
    entries.push_back(parse_entry(st, raw));
    by_name.insert(h, static_cast<std::uint32_t>(entries.size() - 1));
  }
  members = {};
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
    const auto at = by_name.find(maploc::detail::hash_text(kept), same_name(kept));
    if (!at) {
      st.diagnose("metadata ties '" + alias + "' to '" + kept + "', which is not in the file");
      continue;
    }
    if (st.tensors.size() >= st.options.limits.torch_max_tensors) {
      fail(ErrorCode::kTorchLimitTensors, "safetensors: tensors and tied aliases exceed Limits::torch_max_tensors (" +
                                              std::to_string(st.options.limits.torch_max_tensors) + ")",
           st.path);
    }
    Tensor t = st.tensors[*at];
    t.name = alias;
    st.tensors.push_back(std::move(t));
  }
  st.hints.push_back("safetensors, header " + std::to_string(n) + " bytes, " + std::to_string(entries.size()) +
                     " tensors");
  st.source = safetensors_source(st.file, st.storages);
}

}  // namespace maploc::torch
