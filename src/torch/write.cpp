// write.cpp - torch.save archives out of any checkpoint: data.pkl re-emitted with new tags, storages streamed.
#include "maploc/torch/write.h"

#include <algorithm>
#include <unordered_map>

#include "maploc/error.h"
#include "maploc/pickle/machine.h"
#include "pickle/writer.h"
#include "support/atomic_file.h"
#include "storage_table.h"
#include "zip/writer.h"

namespace maploc::torch {
namespace {

using pickle::Emitter;
using pickle::Kind;
using pickle::Value;

constexpr std::size_t kChunk = std::size_t{1} << 20;

std::span<const std::uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::string tag_of(const Checkpoint& c, const ArchiveOptions& o, std::size_t storage) {
  if (storage < o.locations.size() && !o.locations[storage].empty()) return o.locations[storage];
  return c.storages()[storage].location;
}

// Bytes of every storage: the total against which writing reports progress.
std::uint64_t storage_total(const Checkpoint& c) {
  std::uint64_t total = 0;
  for (const Storage& s : c.storages()) total += s.nbytes;
  return total;
}

void write_storage(zip::Writer& zw, const std::string& name, const Checkpoint& c, std::size_t index,
                   const ArchiveOptions& o, std::uint64_t total, ArchiveReport& report) {
  const Bytes bytes = c.storage_bytes(index);
  zw.begin(name, bytes.size());
  copy_storage_little_endian(bytes, c.storages()[index].dtype, c.byteorder(),
                             [&zw](std::span<const std::uint8_t> b) { zw.write(b); });
  zw.end();
  ++report.storages;
  report.data_bytes += bytes.size();
  if (o.progress) o.progress(std::min(report.data_bytes, total), total);
}

// The persistent ids of a zip or legacy pickle, re-emitted with the new tag.
class PidRewriter {
 public:
  PidRewriter(const Checkpoint& c, const ArchiveOptions& o, std::string stream)
      : c_(c), o_(o), stream_(std::move(stream)) {
    for (std::size_t i = 0; i < c.storages().size(); ++i) {
      const Storage& s = c.storages()[i];
      // zip: only data/ storages belong to data.pkl (TorchScript's constants/ never reach here).
      if (c.format() == Format::kZip && s.record.find("/data/") == std::string::npos) continue;
      by_key_.emplace(s.key, i);
    }
  }

  void operator()(const Value& node, Emitter& out) const {
    if (!node.is(Kind::kPersistent)) bad("a resolved storage handle where a persistent id was expected");
    const Value& pid = node.persistent_id();
    if (!pid.is(Kind::kTuple) || pid.size() < 2) bad("a persistent id that is not a tuple");
    const auto type = text_of(pid[0]);
    if (type == "module") {  // legacy whole-module pickles: _legacy_load returns the class (§2.2)
      out.value(pid[1]);
      return;
    }
    if (type != "storage" || pid.size() < 5) bad("a persistent id that is not ('storage', ...)");
    const bool view = pid.size() >= 6 && pid[5].is(Kind::kTuple) && pid[5].size() == 3;
    const auto key = text_of(view ? pid[5][0] : pid[2]);
    auto it = key ? by_key_.find(*key) : by_key_.end();
    if (it == by_key_.end()) bad("storage key '" + key.value_or("?") + "' is not one of the checkpoint's");
    // Nodes are re-emitted as they are (memoized strings stay shared); only
    // Python 2 byte strings become str, as torch's _maybe_decode_ascii reads them.
    auto text = [&out](const Value& v, const std::string& s) {
      if (v.is(Kind::kStr)) {
        out.value(v);
      } else {
        out.str(s);
      }
    };
    out.mark();
    text(pid[0], "storage");
    out.value(pid[1]);
    text(view ? pid[5][0] : pid[2], *key);
    out.str(tag_of(c_, o_, it->second));
    out.value(view ? pid[5][2] : pid[4]);  // a view's numel is its own size (§2.2)
    out.tuple_from_mark();
    out.persid();
  }

 private:
  [[noreturn]] void bad(const std::string& why) const { fail(ErrorCode::kTorchBadPersistentId, why, stream_); }
  const Checkpoint& c_;
  const ArchiveOptions& o_;
  std::string stream_;
  std::unordered_map<std::string, std::size_t> by_key_;
};

std::vector<std::uint8_t> rewrite_object_pickle(const Checkpoint& c, const ArchiveOptions& o) {
  const Checkpoint::PickleSpan span = c.object_pickle();
  pickle::Options po;
  po.stream_name = span.name;
  po.start_offset = span.start;
  po.allow_trailing = c.format() == Format::kLegacy;
  const pickle::Result tree = pickle::run(span.stream, po);
  pickle::WriteOptions wo;
  wo.protocol = std::clamp<int>(tree.protocol(), 2, 5);
  wo.persistent = PidRewriter(c, o, span.name);
  return pickle::write(tree.root(), wo);
}

void write_zip_layout(const Checkpoint& c, const ArchiveOptions& o, zip::Writer& zw, ArchiveReport& report) {
  const std::uint64_t total = storage_total(c);
  const zip::Archive& ar = *c.archive();
  const std::string prefix = o.archive_name.empty() ? ar.prefix() : o.archive_name;
  std::unordered_map<std::string, std::size_t> storage_of_record;
  for (std::size_t i = 0; i < c.storages().size(); ++i) storage_of_record.emplace(c.storages()[i].record, i);
  const auto pkl = rewrite_object_pickle(c, o);
  const bool has_byteorder = ar.find_in_prefix("byteorder") != nullptr;
  for (const zip::Record& rec : ar.records()) {
    const std::string rel = rec.name.substr(ar.prefix().size() + 1);
    const std::string name = prefix + "/" + rel;
    if (rel == "data.pkl") {
      zw.add(name, pkl);
      if (!has_byteorder) zw.add(prefix + "/byteorder", as_bytes("little"));
    } else if (rel == "byteorder") {
      zw.add(name, as_bytes("little"));
    } else if (auto it = storage_of_record.find(rec.name); it != storage_of_record.end()) {
      write_storage(zw, name, c, it->second, o, total, report);
    } else {
      zw.add(name, ar.read(rec).span());
    }
  }
  report.layout = "records kept, data.pkl rewritten";
  if (c.byteorder() == ByteOrder::kBig) report.notes.push_back("big-endian storages byte-swapped to little-endian");
}

void write_legacy_layout(const Checkpoint& c, const ArchiveOptions& o, zip::Writer& zw, ArchiveReport& report) {
  const std::uint64_t total = storage_total(c);
  const std::string prefix = o.archive_name.empty() ? "archive" : o.archive_name;
  zw.add(prefix + "/data.pkl", rewrite_object_pickle(c, o));
  zw.add(prefix + "/byteorder", as_bytes("little"));
  bool views = false;
  for (std::size_t i = 0; i < c.storages().size(); ++i) {
    views = views || c.storages()[i].view_of.has_value();
    write_storage(zw, prefix + "/data/" + c.storages()[i].key, c, i, o, total, report);
  }
  zw.add(prefix + "/version", as_bytes("3\n"));
  report.layout = "legacy stream converted to the zip format, object pickle rewritten";
  if (views) report.notes.push_back("legacy storage views written as storages of their own (values equal, no aliasing)");
}

// A persistent id ('storage', torch.<Type>Storage or UntypedStorage, key, tag, numel) + BINPERSID.
void emit_pid(Emitter& e, DType dtype, const std::string& key, const std::string& tag, std::uint64_t nbytes) {
  const std::string_view typed = python_storage_name(dtype);
  e.mark();
  e.str("storage");
  if (typed.empty()) {
    e.global("torch.storage", "UntypedStorage");
  } else {
    e.global("torch", typed);
  }
  e.str(key);
  e.str(tag);
  e.integer(static_cast<std::int64_t>(typed.empty() ? nbytes : nbytes / element_size(dtype)));
  e.tuple_from_mark();
  e.persid();
}

// The dict layout: {name: _rebuild_tensor_v2/_v3(pid, offset, size, stride, requires_grad, OrderedDict())}
// for tensors no pickle node rebuilds (safetensors, DCP, tar, sets); the others are their node.
void emit_tensor(Emitter& e, const Tensor& t, const std::string& key, const std::string& tag, std::uint64_t nbytes) {
  const bool v3 = python_storage_name(t.dtype).empty();
  e.global("torch._utils", v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
  e.mark();
  emit_pid(e, t.dtype, key, tag, nbytes);
  e.integer(t.storage_offset);
  e.mark();
  for (auto d : t.shape) e.integer(d);
  e.tuple_from_mark();
  e.mark();
  for (auto d : t.stride) e.integer(d);
  e.tuple_from_mark();
  e.boolean(t.requires_grad);
  e.global("collections", "OrderedDict");
  e.mark();
  e.tuple_from_mark();
  e.reduce();
  if (v3) e.global("torch", dtype_name(t.dtype));
  e.tuple_from_mark();
  e.reduce();
}

// Whether tensor i is written inside the node of a tensor holding it (a wrapper subclass's inner
// tensor, a tensor attribute) or of its composite (a jagged tensor's values): then not on its own.
bool inside_a_node(const Checkpoint& c, std::size_t i, const std::vector<std::size_t>& composite_of) {
  for (std::size_t steps = 0; steps <= c.tensors().size(); ++steps) {
    const Tensor& t = c.tensors()[i];
    std::optional<std::size_t> up = t.held_by;
    if (!up && t.is_component && composite_of[i] != i) up = composite_of[i];
    if (!up) return false;
    if (c.tensor_node(*up)) return true;
    i = *up;
  }
  return false;
}

void write_dict_layout(const Checkpoint& c, const ArchiveOptions& o, zip::Writer& zw, ArchiveReport& report) {
  const std::uint64_t total = storage_total(c);
  const std::string prefix = o.archive_name.empty() ? "archive" : o.archive_name;
  const std::size_t n = c.tensors().size();
  std::vector<std::size_t> composite_of(n);
  for (std::size_t i = 0; i < n; ++i) composite_of[i] = i;
  for (std::size_t i = 0; i < n; ++i) {
    for (const Component& part : c.tensors()[i].components) composite_of[part.tensor] = i;
  }
  std::vector<std::string> key_of(c.storages().size());
  std::vector<std::size_t> order;  // storages in order of first reference
  auto key_for = [&](std::size_t s) -> const std::string& {
    if (key_of[s].empty()) {
      key_of[s] = std::to_string(order.size());
      order.push_back(s);
    }
    return key_of[s];
  };
  // A node's storages (Value::external handles) become persistent ids of this archive's storages.
  pickle::WriteOptions wo;
  wo.persistent = [&](const Value& node, Emitter& out) {
    const auto s = node.is(Kind::kExternal) ? c.storage_of_handle(node.external_handle()) : std::nullopt;
    if (!s) {
      fail(ErrorCode::kTorchNotConvertible,
           "a tensor's pickle refers to something that is not one of the checkpoint's storages; write it "
           "without --shard-size",
           c.path());
    }
    const Storage& st = c.storages()[*s];
    emit_pid(out, st.dtype, key_for(*s), tag_of(c, o, *s), st.nbytes);
  };
  pickle::Stream ps(wo);
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < n; ++i) {
    if ((o.include && !o.include(i)) || inside_a_node(c, i, composite_of)) continue;
    chosen.push_back(i);
    if (const pickle::Value* node = c.tensor_node(i)) ps.count(*node);  // ties and cycles kept
  }
  Emitter& e = ps.emitter();
  e.empty_dict();
  std::size_t batch = 0;
  for (const std::size_t i : chosen) {
    const Tensor& t = c.tensors()[i];
    const pickle::Value* node = c.tensor_node(i);
    if (!node && t.is_component) continue;  // its composite is refused below, or written with its node
    if (!node && ((t.kind != TensorKind::kDense && t.kind != TensorKind::kStorage) || !t.storage)) {
      fail(ErrorCode::kTorchNotConvertible,
           "tensor '" + t.name + "' is " + std::string(tensor_kind_name(t.kind)) + "; the dict layout written for " +
               std::string(format_name(c.format())) + " inputs holds dense tensors only",
           c.path());
    }
    if (!node && c.storages()[*t.storage].nbytes % element_size(t.dtype) != 0) {
      fail(ErrorCode::kTorchNotConvertible,
           "tensor '" + t.name + "' views a storage of " + std::to_string(c.storages()[*t.storage].nbytes) +
               " bytes as " + std::string(dtype_name(t.dtype)),
           c.path());
    }
    if (batch == 0) e.mark();
    report.keys.push_back(i);
    e.str(t.name);
    if (node) {
      e.value(*node);  // the call torch wrote: subclass, state, inner tensors and all
    } else {
      emit_tensor(e, t, key_for(*t.storage), tag_of(c, o, *t.storage), c.storages()[*t.storage].nbytes);
    }
    if (++batch == 1000) {
      e.setitems();
      batch = 0;
    }
  }
  if (batch) e.setitems();
  zw.add(prefix + "/data.pkl", ps.finish());
  zw.add(prefix + "/byteorder", as_bytes("little"));
  for (std::size_t s : order) write_storage(zw, prefix + "/data/" + key_of[s], c, s, o, total, report);
  zw.add(prefix + "/version", as_bytes("3\n"));
  report.layout = "tensors as a dict name -> tensor";
  if (c.format() == Format::kTorchScript) {
    report.notes.push_back("TorchScript code, constants.pkl and non-tensor attributes are not carried over: "
                           "torch.load returns a dict of the module's tensors, not a ScriptModule");
  }
}

}  // namespace

void copy_storage_little_endian(const Bytes& bytes, DType dtype, ByteOrder order, const ByteSink& sink) {
  const std::size_t unit = order == ByteOrder::kBig ? swap_unit(dtype) : 1;
  if (unit <= 1) {
    for (std::size_t off = 0; off < bytes.size(); off += kChunk) {
      sink(bytes.span().subspan(off, std::min(kChunk, bytes.size() - off)));
    }
    return;
  }
  std::vector<std::uint8_t> buf;
  const std::size_t chunk = kChunk - kChunk % unit;
  for (std::size_t off = 0; off < bytes.size(); off += chunk) {
    const auto part = bytes.span().subspan(off, std::min(chunk, bytes.size() - off));
    buf.assign(part.begin(), part.end());
    for (std::size_t k = 0; k + unit <= buf.size(); k += unit) std::reverse(buf.begin() + k, buf.begin() + k + unit);
    sink(buf);
  }
}

ArchiveReport write_archive(const Checkpoint& checkpoint, const ByteSink& sink, const ArchiveOptions& options) {
  zip::WriterOptions zo;
  zo.alignment = options.alignment;
  zip::Writer zw(sink, zo);
  ArchiveReport report;
  switch (options.include ? Format::kSet : checkpoint.format()) {
    case Format::kZip: write_zip_layout(checkpoint, options, zw, report); break;
    case Format::kLegacy: write_legacy_layout(checkpoint, options, zw, report); break;
    case Format::kTorchScript:
    case Format::kTar:
    case Format::kSafetensors:
    case Format::kSet:
    case Format::kDcp: write_dict_layout(checkpoint, options, zw, report); break;
  }
  zw.finish();
  return report;
}

ArchiveReport save_archive(const Checkpoint& checkpoint, const std::filesystem::path& out,
                           const ArchiveOptions& options) {
  AtomicFile file = AtomicFile::create(out);
  ArchiveReport report = write_archive(
      checkpoint, [&file](std::span<const std::uint8_t> b) { file.write(b); }, options);
  file.commit();
  return report;
}

}  // namespace maploc::torch
