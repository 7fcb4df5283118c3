// cmd_ls.cpp - `maploc ls`: the tensors and storages of a checkpoint, or its zip records.
#include <cstdio>
#include <iostream>
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"
#include "json_writer.h"
#include "remote_json.h"
#include "parallel.h"
#include "maploc/error.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "maploc/zip/archive.h"

namespace maploc::cli {
namespace {

// ---- --records: the zip layer's view -------------------------------------------------

std::string method_name(std::uint16_t method) {
  return method == zip::kMethodStored ? "stored" : method == zip::kMethodDeflated ? "deflated" : "?";
}

void print_records_json(const zip::Archive& archive) {
  OutBuffer out(OutBuffer::Mode::kWhole);
  JsonWriter w(out.text());
  w.begin_object().field("base_offset", archive.base_offset()).field("file", archive.path());
  w.field("prefix", archive.prefix()).key("records").begin_array();
  for (const auto& r : archive.records()) {
    w.begin_object()
        .field("alignment", r.alignment())
        .field("compressed_size", r.compressed_size)
        .field("crc32", r.crc32)
        .field("data_offset", r.data_offset)
        .field("header_offset", r.header_offset)
        .field("method", method_name(r.method))
        .field("name", r.name)
        .field("size", r.size)
        .end_object();
  }
  w.end_array().end_object();
  out.append('\n');
  out.finish();
}

void print_records_table(const zip::Archive& archive) {
  std::uint64_t total = 0;
  for (const auto& r : archive.records()) total += r.size;
  OutBuffer out(OutBuffer::Mode::kStream);
  out.printf("%s: zip archive, prefix '%s', %zu records, %llu bytes of data\n", archive.path().c_str(),
             archive.prefix().c_str(), archive.records().size(), static_cast<unsigned long long>(total));
  out.printf("  %12s  %12s  %5s  %-8s  %s\n", "offset", "size", "align", "method", "record");
  for (const auto& r : archive.records()) {
    out.printf("  %12llu  %12llu  %5llu  %-8s  %s\n", static_cast<unsigned long long>(r.data_offset),
               static_cast<unsigned long long>(r.size), static_cast<unsigned long long>(r.alignment()),
               method_name(r.method).c_str(), r.name.c_str());
  }
}

// ---- the checkpoint's view -------------------------------------------------------------

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The alignment of storage i's first byte in its file: the largest power of two (up to 4096)
// dividing its offset; 0 when the bytes are not a plain range of a file (deflated, DCP).
std::uint64_t alignment_of(const torch::Checkpoint& ckpt, std::size_t i) {
  const auto range = ckpt.storage_file_range(i);
  if (!range) return 0;
  std::uint64_t a = 1;
  while (a < 4096 && range->offset % (a * 2) == 0) a *= 2;
  return a;
}

std::uint64_t tensor_bytes(const torch::Tensor& t) { return t.numel() * torch::element_size(t.dtype); }

void print_json(const torch::Checkpoint& ckpt, bool hash) {
  const auto& storages = ckpt.storages();
  const auto& tensors = ckpt.tensors();
  std::vector<std::string> sha(hash ? tensors.size() : 0);
  if (hash) ckpt.prefetch();  // a URL source: every storage in one go, several requests in flight
  parallel_for(sha.size(), [&](std::size_t i) {
    if (tensors[i].storage) sha[i] = torch::tensor_sha256(ckpt, tensors[i]);
  });
  OutBuffer out(OutBuffer::Mode::kWhole);
  // About 250 bytes for each tensor and each storage (W1: 15 MB for 30,000 of each).
  out.reserve(320 * (tensors.size() + storages.size()) + (hash ? 80 * tensors.size() : 0));
  JsonWriter w(out.text());
  // Keys in byte order, as the JSON has always listed them.
  const bool set = ckpt.format() == torch::Format::kSet;
  w.begin_object();
  if (!ckpt.byte_items().empty()) {  // DCP's BYTE_IO items, listed, never unpickled
    w.key("byte_items").begin_array();
    for (const auto& b : ckpt.byte_items()) {
      w.begin_object().field("file", b.file).field("length", b.length).field("name", b.name).field("offset", b.offset);
      if (!b.transform.empty()) w.field("transform", b.transform);
      w.end_object();
    }
    w.end_array();
  }
  w.field("byteorder", torch::byteorder_name(ckpt.byteorder())).field("file", ckpt.path());
  if (set) {  // docs/cli-ls.md: a sharded set's files and index metadata
    w.key("files").begin_array();
    for (const auto& m : ckpt.members()) {
      w.begin_object()
          .field("bytes", m.file_bytes)
          .field("format", torch::format_name(m.format))
          .field("path", m.path)
          .field("storages", m.storage_count)
          .field("tensors", m.tensor_count)
          .end_object();
    }
    w.end_array();
  }
  w.field("format", torch::format_name(ckpt.format()));
  if (set) {
    w.key("metadata").begin_object();
    for (const auto& [k, v] : ckpt.metadata()) w.field(k, v);
    w.end_object();
  }
  w.field("pickle_protocol", ckpt.pickle_protocol());
  write_remote_json(w, ckpt);
  w.key("storages").begin_array();
  for (const auto& s : storages) {
    w.begin_object();
    if (const auto a = alignment_of(ckpt, static_cast<std::size_t>(&s - storages.data()))) w.field("alignment", a);
    w.field("dtype", torch::dtype_name(s.dtype));
    if (set) w.field("file", ckpt.members()[ckpt.member_of_storage(static_cast<std::size_t>(&s - storages.data()))].path);
    w.field("key", s.key)
        .field("location", s.location)
        .field("nbytes", s.nbytes)
        .field("numel", s.numel)
        .field("offset", s.file_offset)
        .field("record", s.record);
    if (s.view_of) w.field("view_of", storages[*s.view_of].key).field("view_offset", s.view_offset);
    w.end_object();
  }
  w.end_array().key("tensors").begin_array();
  std::vector<std::pair<std::string_view, std::size_t>> roles;
  std::vector<std::pair<std::string_view, std::string_view>> attrs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    w.begin_object();
    if (!t.attributes.empty()) {
      // Tensor-free values of its state, by name (docs/cli.md); a name given twice keeps its last value.
      attrs.clear();
      for (const auto& a : t.attributes) attrs.emplace_back(a.name, a.json);
      std::stable_sort(attrs.begin(), attrs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      w.key("attributes").begin_object();
      for (std::size_t k = 0; k < attrs.size(); ++k) {
        if (k + 1 < attrs.size() && attrs[k + 1].first == attrs[k].first) continue;
        w.key(attrs[k].first).raw_value(attrs[k].second);
      }
      w.end_object();
    }
    if (!t.components.empty()) {
      // By role; a role listed twice keeps its last tensor.
      roles.clear();
      for (const auto& comp : t.components) roles.emplace_back(comp.role, comp.tensor);
      std::stable_sort(roles.begin(), roles.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      w.key("components").begin_object();
      for (std::size_t r = 0; r < roles.size(); ++r) {
        if (r + 1 < roles.size() && roles[r + 1].first == roles[r].first) continue;
        w.field(roles[r].first, tensors[roles[r].second].name);
      }
      w.end_object();
    }
    if (t.conj) w.field("conj", true);
    if (!t.device.empty()) w.field("device", t.device);
    w.field("dtype", torch::dtype_name(t.dtype)).field("kind", torch::tensor_kind_name(t.kind));
    if (t.storage) w.field("location", storages[*t.storage].location);
    w.field("name", t.name);
    if (t.neg) w.field("neg", true);
    if (t.parameter) w.field("parameter", true);
    if (t.quantizer) {
      w.key("quantizer")
          .begin_object()
          .field("axis", t.quantizer->axis)
          .field("qscheme", t.quantizer->qscheme)
          .field("scale", t.quantizer->scale)
          .field("zero_point", t.quantizer->zero_point)
          .end_object();
    }
    w.field("requires_grad", t.requires_grad);
    if (hash) {
      w.key("sha256");
      if (t.storage) w.value(sha[i]); else w.null();
    }
    w.field_array("shape", t.shape);
    w.key("storage");
    if (t.storage) w.value(storages[*t.storage].key); else w.null();
    w.field("storage_offset", t.storage_offset).field_array("stride", t.stride);
    if (!t.subclass.empty()) w.field("subclass", t.subclass);
    w.end_object();
  }
  w.end_array();
  std::vector<std::string> unreferenced;
  for (std::size_t s : ckpt.unreferenced_storages()) unreferenced.push_back(storages[s].key);
  w.field_array("unknown_globals", ckpt.unknown_globals()).field_array("unknown_rebuilds", ckpt.unknown_rebuilds());
  w.field_array("unreferenced_storages", unreferenced).field_array("version_hints", ckpt.version_hints());
  w.end_object();
  out.append('\n');
  out.finish();
}

void print_table(const torch::Checkpoint& ckpt) {
  const auto& storages = ckpt.storages();
  const auto& tensors = ckpt.tensors();
  std::vector<std::size_t> users(storages.size(), 0);
  for (const auto& t : tensors) {
    if (t.storage) ++users[*t.storage];
  }
  struct Row {
    std::string name, dtype, shape, location, bytes, storage;
  };
  std::vector<Row> rows;
  rows.push_back({"NAME", "DTYPE", "SHAPE", "LOCATION", "BYTES", "STORAGE"});
  for (const auto& t : tensors) {
    Row r{t.name.empty() ? "(root)" : t.name, std::string(torch::dtype_name(t.dtype)), shape_text(t.shape), "", "", ""};
    if (t.storage) {
      const auto& s = storages[*t.storage];
      r.location = s.location;
      r.bytes = std::to_string(tensor_bytes(t));
      const std::string file =
          ckpt.format() == torch::Format::kSet ? std::to_string(ckpt.member_of_storage(*t.storage) + 1) + ":" : "";
      r.storage = file + s.key + (users[*t.storage] > 1 ? " (shared by " + std::to_string(users[*t.storage]) + ")" : "");
    } else {
      r.location = t.device.empty() ? "-" : t.device;
      r.bytes = "-";
      r.storage = std::string(torch::tensor_kind_name(t.kind));
    }
    if (t.kind != torch::TensorKind::kDense && t.storage) r.storage += " " + std::string(torch::tensor_kind_name(t.kind));
    rows.push_back(std::move(r));
  }
  std::size_t w[5] = {0, 0, 0, 0, 0};
  for (const auto& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.dtype.size());
    w[2] = std::max(w[2], r.shape.size());
    w[3] = std::max(w[3], r.location.size());
    w[4] = std::max(w[4], r.bytes.size());
  }
  OutBuffer out(OutBuffer::Mode::kStream);
  for (const auto& r : rows) {
    out.printf("%-*s  %-*s  %-*s  %-*s  %*s  %s\n", static_cast<int>(w[0]), r.name.c_str(), static_cast<int>(w[1]),
                r.dtype.c_str(), static_cast<int>(w[2]), r.shape.c_str(), static_cast<int>(w[3]), r.location.c_str(),
                static_cast<int>(w[4]), r.bytes.c_str(), r.storage.c_str());
  }
  std::map<std::string, std::uint64_t> per_location;
  std::uint64_t total = 0;
  for (const auto& s : storages) {
    if (s.view_of) continue;  // a view's bytes are its root's
    per_location[s.location] += s.nbytes;
    total += s.nbytes;
  }
  out.printf("\n%zu tensors, %zu storages, %s (%llu bytes)\n", tensors.size(), storages.size(),
              human_bytes(total).c_str(), static_cast<unsigned long long>(total));
  for (const auto& [loc, n] : per_location) {
    out.printf("  %-12s %s (%llu bytes)\n", loc.c_str(), human_bytes(n).c_str(), static_cast<unsigned long long>(n));
  }
  out.printf("format: %s, byteorder %s%s, pickle protocol %d\n", std::string(torch::format_name(ckpt.format())).c_str(),
              std::string(torch::byteorder_name(ckpt.byteorder())).c_str(),
              ckpt.has_byteorder_record() ? " (record)" : "", ckpt.pickle_protocol());
  for (const auto& h : ckpt.version_hints()) out.printf("  %s\n", h.c_str());
  for (std::size_t m = 0; m < ckpt.members().size(); ++m) {  // STORAGE says FILE:KEY for sets
    const auto& f = ckpt.members()[m];
    out.printf("  file %zu: %s (%s, %zu tensors)\n", m + 1, f.path.c_str(),
                std::string(torch::format_name(f.format)).c_str(), f.tensor_count);
  }
  for (const auto& [k, v] : ckpt.metadata()) {
    if (ckpt.format() == torch::Format::kSet) out.printf("  index metadata %s: %s (not trusted)\n", k.c_str(), v.c_str());
  }
  std::size_t at64 = 0, at_element = 0, below = 0;
  for (std::size_t i = 0; i < storages.size(); ++i) {
    const auto a = alignment_of(ckpt, i);
    if (a == 0) continue;
    if (a >= 64) ++at64;
    else if (a >= torch::element_size(storages[i].dtype)) ++at_element;
    else ++below;
  }
  if (at64 + at_element + below > 0) {
    out.printf("alignment in the file: %zu storages at 64 bytes or more, %zu at their element size only, "
               "%zu below it\n", at64, at_element, below);
  }
  for (const auto& b : ckpt.byte_items()) {
    out.printf("  BYTE_IO item %s: %llu bytes at %llu in %s%s\n", b.name.c_str(), static_cast<unsigned long long>(b.length),
               static_cast<unsigned long long>(b.offset), b.file.c_str(), b.transform.empty() ? "" : (" (" + b.transform + ")").c_str());
  }
  if (!ckpt.unreferenced_storages().empty()) {
    out.printf("unreferenced storages (no tensor maploc names reaches them; --strict refuses the file):\n");
    for (std::size_t s : ckpt.unreferenced_storages()) {
      const auto& st = ckpt.storages()[s];
      out.printf("  %s  %s  %llu bytes  %s\n", st.key.c_str(), st.record.c_str(),
                 static_cast<unsigned long long>(st.nbytes), st.location.c_str());
    }
  }
  for (const auto& r : ckpt.unknown_rebuilds()) out.printf("unknown rebuild function: %s (what it builds is not listed)\n", r.c_str());
  if (ckpt.unknown_globals().empty()) {
    out.printf("unknown globals: none\n");
  } else {
    out.printf("unknown globals (not on torch's weights_only allowlist):\n");
    for (const auto& g : ckpt.unknown_globals()) out.printf("  %s\n", g.c_str());
  }
}

}  // namespace

int cmd_ls(const Args& args) {
  if (args.positional.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "usage: maploc ls FILE [--json [--hash]] [--records]");
  }
  if (args.has("records")) {
    // A URL: the zip structure comes with opening the checkpoint (docs/remote.md).
    std::optional<torch::Checkpoint> remote;
    if (remote::is_url(args.positional[0])) remote.emplace(torch::Checkpoint::open(args.positional[0], open_options(args)));
    if (remote && remote->archive() == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "--records: '" + remote->path() + "' is not a zip archive");
    }
    const auto archive = remote ? *remote->archive() : zip::Archive::open(args.positional[0], limits_of(args));
    if (args.has("json")) {
      print_records_json(archive);
    } else {
      print_records_table(archive);
    }
    return kExitOk;
  }
  const auto ckpt = torch::Checkpoint::open(args.positional[0], open_options(args));
  if (args.has("json")) {
    print_json(ckpt, args.has("hash"));
  } else {
    print_table(ckpt);
  }
  return kExitOk;
}

}  // namespace maploc::cli
