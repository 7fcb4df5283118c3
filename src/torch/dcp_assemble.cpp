// dcp_assemble.cpp - a DCP tensor made whole from its chunks: each a torch.save zip at a byte range, or a safetensors tensor.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>

#include <zstd.h>

#include "maploc/error.h"
#include "dcp.h"
#include "support/flat_index.h"
#include "support/seeded_hash.h"
#include "json_subset.h"
#include "state.h"

namespace maploc::torch {
namespace {

[[noreturn]] void bad(const std::string& why, const std::string& item) {
  fail(ErrorCode::kTorchBadDcp, "torch.distributed.checkpoint: " + why, item);
}

}  // namespace

struct DcpSafetensors {
  Checkpoint checkpoint;
  detail::FlatIndex tensor_index;               // tensor name -> position in checkpoint.tensors()
  std::vector<std::string> fqns;                 // DCP_SHARDING_INFO's keys
  std::vector<std::vector<std::int64_t>> saved;  // ... and their saved_offsets
  detail::FlatIndex saved_index;                 // fqn -> position in fqns

  const Tensor* tensor(const std::string& fqn) const {
    const auto& ts = checkpoint.tensors();
    const auto at = tensor_index.find(detail::hash_text(fqn), [&](std::uint32_t i) { return ts[i].name == fqn; });
    return at ? &ts[*at] : nullptr;
  }
  const std::vector<std::int64_t>* saved_offsets(const std::string& fqn) const {
    const auto at = saved_index.find(detail::hash_text(fqn), [&](std::uint32_t i) { return fqns[i] == fqn; });
    return at ? &saved[*at] : nullptr;
  }
};

namespace {

// DCP_SHARDING_INFO of a SAFETENSORS-layout file: {fqn: {"saved_offsets": [...], ...}, ...}, read
// once by the pull reader (an entry without usable saved_offsets is left out: its tensor fails).
void read_sharding_info(DcpSafetensors& f, std::string_view text, const std::string& file) {
  try {
    json::Reader r(text, 8);
    r.object([&](std::string fqn) {
      std::optional<std::vector<std::int64_t>> offs;
      if (r.peek() != json::Reader::Type::kObject) return r.skip();
      r.object([&](std::string key) {
        if (key != "saved_offsets" || r.peek() != json::Reader::Type::kArray) return r.skip();
        offs.emplace();
        r.array([&] {
          if (r.peek() != json::Reader::Type::kNumber) {
            offs.reset();
            return r.skip();
          }
          const std::string_view n = r.number();
          std::int64_t v = -1;
          const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
          if (ec != std::errc() || end != n.data() + n.size() || v < 0) offs.reset();
          if (offs) offs->push_back(v);
        });
      });
      if (!offs) return;
      const auto pos = static_cast<std::uint32_t>(f.fqns.size());
      f.fqns.push_back(std::move(fqn));
      if (f.saved_index.insert_unique(detail::hash_text(f.fqns.back()), pos,
                                      [&](std::uint32_t i) { return f.fqns[i] == f.fqns.back(); })) {
        f.fqns.pop_back();  // a key given twice: the first one counts
        return;
      }
      f.saved.push_back(std::move(*offs));
    });
    r.end();
  } catch (const json::Failure& e) {
    bad("the DCP_SHARDING_INFO of '" + file + "' is not valid JSON (" + e.message + " at byte " +
        std::to_string(e.offset) + ")", file);
  }
}

// The file's DcpSafetensors, opened on first use and kept in the layout.
std::shared_ptr<const DcpSafetensors> safetensors_file(const DcpLayout& layout, std::uint32_t file) {
  std::lock_guard<std::mutex> lock(layout.opened_mutex);
  if (layout.opened.size() < layout.files.size()) layout.opened.resize(layout.files.size());
  if (layout.opened[file]) return layout.opened[file];
  Options o;
  o.limits = layout.limits;
  auto f = std::make_shared<DcpSafetensors>(DcpSafetensors{Checkpoint::from_file(layout.files[file], o), {}, {}, {}, {}});
  const auto& ts = f->checkpoint.tensors();
  f->tensor_index.reserve(ts.size());
  for (std::uint32_t i = 0; i < ts.size(); ++i) {
    if (ts[i].is_component || !ts[i].storage) continue;
    f->tensor_index.insert_unique(detail::hash_text(ts[i].name), i, [&](std::uint32_t j) { return ts[j].name == ts[i].name; });
  }
  for (const auto& [key, value] : f->checkpoint.metadata()) {
    if (key == "DCP_SHARDING_INFO") read_sharding_info(*f, value, layout.file_names[file]);
  }
  layout.opened[file] = f;
  return f;
}

constexpr std::string_view kZstd = "stream.zstd/1";

// DCP's stream.zstd/1 transform (ZStandard in torch/distributed/checkpoint/_extension.py): the item's
// bytes are zstd frames, written by a streaming compressor (no content size). Inflated within the
// zip limits, which bound every decompression maploc does.
Bytes unzstd(const Bytes& in, const std::string& fqn, const Limits& limits) {
  std::unique_ptr<ZSTD_DStream, decltype(&ZSTD_freeDStream)> ds(ZSTD_createDStream(), ZSTD_freeDStream);
  if (!ds) throw std::bad_alloc();
  ZSTD_initDStream(ds.get());
  const std::uint64_t ratio = std::max<std::uint64_t>(limits.zip_max_compression_ratio, 1);
  const std::uint64_t by_ratio = in.size() > UINT64_MAX / ratio ? UINT64_MAX : in.size() * ratio;
  const std::uint64_t cap = std::min<std::uint64_t>(limits.zip_max_inflated_bytes, by_ratio);
  std::vector<std::uint8_t> out;
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  const std::size_t step = ZSTD_DStreamOutSize();
  std::size_t pending = 1;  // ZSTD_decompressStream's hint: 0 once a frame is complete
  while (ib.pos < ib.size || pending != 0) {
    if (out.size() > cap) {
      bad("the zstd item of '" + fqn + "' inflates past Limits::zip_max_inflated_bytes or "
          "zip_max_compression_ratio (raise them if the file is trusted)", fqn);
    }
    const std::size_t old = out.size();
    out.resize(old + step);
    ZSTD_outBuffer ob{out.data() + old, step, 0};
    pending = ZSTD_decompressStream(ds.get(), &ob, &ib);
    out.resize(old + ob.pos);
    if (ZSTD_isError(pending)) bad("the zstd item of '" + fqn + "' is damaged: " + ZSTD_getErrorName(pending), fqn);
    if (ib.pos == ib.size && ob.pos < step && pending != 0) bad("the zstd item of '" + fqn + "' ends inside a frame", fqn);
  }
  return Bytes::owned(std::move(out));
}

// The checkpoint holding one chunk of the TORCH_SAVE layout: a torch.save zip at
// [offset, offset+length) of its file.
Checkpoint open_chunk(const DcpLayout& layout, const DcpChunk& chunk, const std::string& fqn) {
  const std::string& name = layout.file_names[chunk.file];
  if (!chunk.transform.empty() && chunk.transform != kZstd) {
    fail(ErrorCode::kTorchUnsupportedFormat,
         "torch.distributed.checkpoint: tensor '" + fqn + "' is stored with the transform '" + chunk.transform +
             "' (DCP's _extensions), which maploc does not decode (it decodes stream.zstd/1 only); save "
             "without it, or consolidate with "
             "torch.distributed.checkpoint.format_utils.dcp_to_torch_save",
         fqn);
  }
  Options o;
  o.limits = layout.limits;
  const MappedFile& file = layout.files[chunk.file];
  if (chunk.offset > file.bytes.size() || chunk.length > file.bytes.size() - chunk.offset) {
    bad("the chunk of '" + fqn + "' lies past the end of '" + name + "'", fqn);
  }
  Bytes slice = file.bytes.slice(static_cast<std::size_t>(chunk.offset), static_cast<std::size_t>(chunk.length));
  if (chunk.transform == kZstd) slice = unzstd(slice, fqn, layout.limits);
  return Checkpoint::from_file(MappedFile::from_bytes(slice, name + "@" + std::to_string(chunk.offset)), o);
}

// Calls f(src_element, dst_element, count) for each innermost run of a chunk: source in the
// chunk tensor's own geometry, destination in the full contiguous tensor.
template <typename F>
void for_each_row(const Tensor& src, const DcpChunk& chunk, const std::vector<std::int64_t>& full_stride, F f) {
  const std::size_t nd = chunk.sizes.size();
  if (nd == 0) return f(src.storage_offset, 0, 1);
  for (const auto s : chunk.sizes) {
    if (s == 0) return;
  }
  std::vector<std::int64_t> idx(nd, 0);
  while (true) {
    std::int64_t s = src.storage_offset, d = 0;
    for (std::size_t k = 0; k < nd; ++k) {
      s += idx[k] * src.stride[k];
      d += (chunk.offsets[k] + idx[k]) * full_stride[k];
    }
    f(s, d, chunk.sizes[nd - 1]);
    std::size_t k = nd - 1;
    while (k-- > 0) {
      if (++idx[k] < chunk.sizes[k]) break;
      idx[k] = 0;
    }
    if (k == static_cast<std::size_t>(-1)) return;
  }
}

}  // namespace

Bytes assemble_dcp(const DcpLayout& layout, const Storage& storage, std::size_t index) {
  const std::string& fqn = storage.key;
  const auto& chunks = layout.chunks[index];
  const auto& shape = layout.shapes[index];
  const std::size_t e = element_size(storage.dtype);
  std::vector<std::int64_t> full_stride(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) full_stride[d - 1] = full_stride[d] * shape[d];
  // Every chunk inside the tensor, and their volumes adding up to it, before a byte is allocated.
  std::uint64_t volume = 0;
  for (const DcpChunk& chunk : chunks) {
    if (chunk.offsets.size() != shape.size() || chunk.sizes.size() != shape.size()) {
      bad("a chunk of '" + fqn + "' has another rank than the tensor", fqn);
    }
    std::uint64_t v = 1;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (chunk.offsets[d] > shape[d] || chunk.sizes[d] > shape[d] - chunk.offsets[d]) {
        bad("a chunk of '" + fqn + "' reaches past the tensor's size", fqn);
      }
      v *= static_cast<std::uint64_t>(chunk.sizes[d]);
    }
    if (v > storage.numel - std::min(volume, storage.numel)) {
      bad("the chunks of '" + fqn + "' hold more elements than the tensor", fqn);
    }
    volume += v;
  }
  if (volume != storage.numel) {
    bad("the chunks of '" + fqn + "' hold " + std::to_string(volume) + " elements, the tensor " +
        std::to_string(storage.numel), fqn);
  }
  // Every chunk opened and checked before the tensor is allocated: its bytes exist (the chunk's own
  // checkpoint checked its record against its tensor), so a metadata size cannot make us allocate
  // what the files do not hold.
  std::vector<Checkpoint> opened;  // the chunks' zips (TORCH_SAVE layout)
  std::vector<std::shared_ptr<const DcpSafetensors>> files;  // or their safetensors files
  std::vector<const Tensor*> parts;
  std::vector<const Checkpoint*> holders;
  opened.reserve(chunks.size());
  for (const DcpChunk& chunk : chunks) {
    const std::string& file = layout.file_names[chunk.file];
    const Tensor* t = nullptr;
    if (layout.safetensors[chunk.file]) {
      files.push_back(safetensors_file(layout, chunk.file));
      holders.push_back(&files.back()->checkpoint);
      t = files.back()->tensor(fqn);
      const auto* saved = files.back()->saved_offsets(fqn);
      if (t != nullptr && saved == nullptr) {
        bad("tensor '" + fqn + "' has no saved_offsets in the DCP_SHARDING_INFO of '" + file + "'", fqn);
      }
      if (t != nullptr && *saved != chunk.offsets) {
        bad("tensor '" + fqn + "' in '" + file + "' was saved at other offsets than the metadata's chunk", fqn);
      }
    } else {
      opened.push_back(open_chunk(layout, chunk, fqn));
      holders.push_back(&opened.back());
      for (const auto& x : opened.back().tensors()) {
        if (!x.is_component && x.storage) {
          t = &x;
          break;
        }
      }
    }
    if (t == nullptr) bad("no tensor for '" + fqn + "' in its chunk in '" + file + "'", fqn);
    const Checkpoint& c = *holders.back();
    if (t->dtype != storage.dtype || t->shape != chunk.sizes || c.byteorder() != ByteOrder::kLittle ||
        t->kind != TensorKind::kDense) {
      bad("the chunk of '" + fqn + "' in '" + file + "' is not a little-endian dense " +
          std::string(dtype_name(storage.dtype)) + " tensor of the chunk's sizes", fqn);
    }
    parts.push_back(t);
  }
  std::vector<std::uint8_t> out(static_cast<std::size_t>(storage.nbytes));
  std::vector<bool> covered(static_cast<std::size_t>(storage.numel), false);
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const Tensor& t = *parts[k];
    const Bytes raw = holders[k]->storage_bytes(*t.storage);  // t lies inside it (validated on open)
    const std::int64_t inner = t.stride.empty() ? 1 : t.stride.back();
    for_each_row(t, chunks[k], full_stride, [&](std::int64_t s, std::int64_t d, std::int64_t n) {
      for (std::int64_t j = 0; j < n; ++j) {
        if (covered[static_cast<std::size_t>(d + j)]) bad("chunks of '" + fqn + "' overlap", fqn);
        covered[static_cast<std::size_t>(d + j)] = true;
      }
      if (inner == 1) {
        std::memcpy(out.data() + d * e, raw.data() + s * e, static_cast<std::size_t>(n) * e);
      } else {
        for (std::int64_t j = 0; j < n; ++j) std::memcpy(out.data() + (d + j) * e, raw.data() + (s + j * inner) * e, e);
      }
    });
  }
  return Bytes::owned(std::move(out));
}

}  // namespace maploc::torch
