// safetensors_write.cpp - a checkpoint's dense tensors as a safetensors file, tied weights written once.
#include <algorithm>
#include <map>
#include <tuple>

#include "support/atomic_file.h"
#include "support/json_string.h"
#include "maploc/torch/hash.h"
#include "maploc/torch/safetensors.h"
#include "json_subset.h"
#include "state.h"

namespace maploc::torch {
namespace {

struct Item {
  const Tensor* tensor;
  std::string_view st_dtype;
  std::uint64_t nbytes;
};

// `file` (the input) is the error's item: the message names the tensor, the item the file.
void check_convertible(const Tensor& t, const std::string& file) {
  auto refuse = [&](const std::string& why) {
    fail(ErrorCode::kTorchNotConvertible, "tensor '" + t.name + "' cannot go into a safetensors file: " + why, file);
  };
  if ((t.kind != TensorKind::kDense && t.kind != TensorKind::kStorage) || !t.storage) {
    refuse(std::string("it is ") + std::string(tensor_kind_name(t.kind)) + "; safetensors holds dense tensors only");
  }
  if (t.conj || t.neg) refuse("it carries a lazy conj/neg bit");
  if (!safetensors_dtype(t.dtype)) refuse("safetensors has no dtype for " + std::string(dtype_name(t.dtype)));
  // The header is UTF-8 JSON (the safetensors package rejects anything else), and a name
  // escaped into something else would not be the tensor's name: refused, never rewritten.
  if (const auto at = maploc::detail::invalid_utf8_at(t.name); at != std::string::npos) {
    fail(ErrorCode::kTorchNotConvertible,
         "tensor " + maploc::detail::json_string(t.name) + " cannot go into a safetensors file: its name is not valid UTF-8 " +
             "(byte 0x" + "0123456789abcdef"[static_cast<unsigned char>(t.name[at]) >> 4] +
             "0123456789abcdef"[static_cast<unsigned char>(t.name[at]) & 15] + " at offset " + std::to_string(at) +
             ", shown as \\xNN), and safetensors headers are UTF-8 JSON; rename the tensor",
         file);
  }
}

std::string metadata_json(const std::vector<std::pair<std::string, std::string>>& md) {
  std::string out = "{";
  for (std::size_t i = 0; i < md.size(); ++i) {
    if (i) out += ",";
    // Metadata is maploc's own notes (a source path may hold any bytes): escaped, never copied raw.
    maploc::detail::append_json_string(out, md[i].first);
    out += ':';
    maploc::detail::append_json_string(out, md[i].second);
  }
  return out + "}";
}

// `"attributes":{name: json, ...}`: a tensor's tensor-free state, as TensorAttribute renders it.
std::string& append_attributes(std::string& out, const Tensor& t) {
  out += "\"attributes\":{";
  for (std::size_t i = 0; i < t.attributes.size(); ++i) {
    if (i) out += ",";
    maploc::detail::append_json_string(out, t.attributes[i].name);
    out += ":" + t.attributes[i].json;
  }
  return out += "}";
}

// A wrapper subclass has no bytes of its own (its data are its inner tensors, written under their
// names): its class, dtype, shape and tensor-free attributes go into the metadata, never dropped.
std::string wrapper_json(const Tensor& t) {
  std::string out = "{\"subclass\":";
  maploc::detail::append_json_string(out, t.subclass);
  out += ",\"dtype\":\"" + std::string(dtype_name(t.dtype)) + "\",\"shape\":[";
  for (std::size_t d = 0; d < t.shape.size(); ++d) out += (d ? "," : "") + std::to_string(t.shape[d]);
  out += "],";
  return append_attributes(out, t) + "}";
}

// A jagged nested tensor has no dense shape: its parts (values, offsets, lengths) are written as
// tensors under their names, the tensor itself as metadata naming them, with its attributes.
std::string nested_jagged_json(const Checkpoint& c, const Tensor& t) {
  std::string out = "{\"dtype\":\"" + std::string(dtype_name(t.dtype)) + "\",\"requires_grad\":";
  out += t.requires_grad ? "true" : "false";
  out += ",\"components\":{";
  for (std::size_t i = 0; i < t.components.size(); ++i) {
    if (i) out += ",";
    maploc::detail::append_json_string(out, t.components[i].role);
    out += ":";
    maploc::detail::append_json_string(out, c.tensors()[t.components[i].tensor].name);
  }
  out += "},";
  return append_attributes(out, t) + "}";
}

}  // namespace

SafetensorsReport write_safetensors(const Checkpoint& c, const ByteSink& sink, const SafetensorsOptions& options) {
  SafetensorsReport report;
  std::vector<Item> items;
  // A tensor identical in storage and geometry to an earlier one is a tie.
  using Geometry = std::tuple<std::size_t, std::int64_t, std::vector<std::int64_t>, std::vector<std::int64_t>, DType>;
  std::map<Geometry, std::string> seen;
  std::vector<std::pair<std::string, std::string>> md = {{"format", "pt"},
                                                         {"maploc.source_format", std::string(format_name(c.format()))}};
  // The parts of jagged nested tensors are dense tensors of their own here.
  std::vector<char> jagged_part(c.tensors().size(), 0);
  for (const Tensor& t : c.tensors()) {
    if (t.kind != TensorKind::kNestedJagged) continue;
    for (const Component& part : t.components) jagged_part[part.tensor] = 1;
  }
  for (const Tensor& t : c.tensors()) {
    const auto index = static_cast<std::size_t>(&t - c.tensors().data());
    if ((t.is_component && !jagged_part[index]) || (options.include && !options.include(index))) continue;
    if (t.kind == TensorKind::kWrapperSubclass) {
      md.emplace_back(std::string(kWrapperSubclassPrefix) + t.name, wrapper_json(t));
      continue;
    }
    if (t.kind == TensorKind::kNestedJagged) {
      md.emplace_back(std::string(kNestedJaggedPrefix) + t.name, nested_jagged_json(c, t));
      continue;
    }
    check_convertible(t, c.path());
    if (t.name == "__metadata__") {
      fail(ErrorCode::kTorchNotConvertible,
           "a tensor named '__metadata__' clashes with the safetensors header key; rename it", c.path());
    }
    const Geometry g{*t.storage, t.storage_offset, t.shape, t.stride, t.dtype};
    if (!options.duplicate_tied) {
      auto [it, fresh] = seen.emplace(g, t.name);
      if (!fresh) {
        report.tied.emplace_back(t.name, it->second);
        md.emplace_back(std::string(kTiedPrefix) + t.name, it->second);
        continue;
      }
    }
    items.push_back({&t, *safetensors_dtype(t.dtype), t.numel() * element_size(t.dtype)});
    report.written.push_back(index);
  }
  md.insert(md.end(), options.metadata.begin(), options.metadata.end());
  // Largest elements first keeps every tensor aligned to its element size.
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return element_size(a.tensor->dtype) > element_size(b.tensor->dtype);
  });
  std::string header = "{\"__metadata__\":" + metadata_json(md);
  std::uint64_t offset = 0;
  for (const Item& it : items) {
    header += ',';
    maploc::detail::append_json_string(header, it.tensor->name);
    header += ":{\"dtype\":\"" + std::string(it.st_dtype) + "\",\"shape\":[";
    for (std::size_t d = 0; d < it.tensor->shape.size(); ++d) {
      header += (d ? "," : "") + std::to_string(it.tensor->shape[d]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + it.nbytes) + "]}";
    offset += it.nbytes;
  }
  header += "}";
  // Spaces (the format allows trailing whitespace in the header) so the data section starts at a
  // multiple of 64 in the file; tensors are contiguous there (the format allows no gaps), ordered
  // by element size, so each starts at a multiple of its element size (safetensors#607).
  header.append((64 - (8 + header.size()) % 64) % 64, ' ');
  std::uint8_t size_le[8];
  for (int i = 0; i < 8; ++i) size_le[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  sink(size_le);
  sink({reinterpret_cast<const std::uint8_t*>(header.data()), header.size()});
  for (const Item& it : items) {
    const Bytes raw = c.storage_bytes(*it.tensor->storage);
    for_each_value_chunk(*it.tensor, raw, c.byteorder(), sink);
    ++report.tensors;
    report.data_bytes += it.nbytes;
    if (options.progress) options.progress(report.data_bytes, offset);
  }
  return report;
}

SafetensorsReport save_safetensors(const Checkpoint& c, const std::filesystem::path& out,
                                   const SafetensorsOptions& options) {
  AtomicFile file = AtomicFile::create(out);
  SafetensorsReport report = write_safetensors(c, [&file](std::span<const std::uint8_t> b) { file.write(b); }, options);
  file.commit();
  return report;
}

}  // namespace maploc::torch
