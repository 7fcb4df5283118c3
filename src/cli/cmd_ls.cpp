// cmd_ls.cpp - `maploc ls`: the tensors and storages of a checkpoint, or its zip records.
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/parallel.h"
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
  nlohmann::json out;
  out["file"] = archive.path();
  out["prefix"] = archive.prefix();
  out["base_offset"] = archive.base_offset();
  auto& records = out["records"] = nlohmann::json::array();
  for (const auto& r : archive.records()) {
    records.push_back({{"name", r.name},
                       {"header_offset", r.header_offset},
                       {"data_offset", r.data_offset},
                       {"size", r.size},
                       {"compressed_size", r.compressed_size},
                       {"method", method_name(r.method)},
                       {"alignment", r.alignment()},
                       {"crc32", r.crc32}});
  }
  std::cout << out.dump(2) << "\n";
}

void print_records_table(const zip::Archive& archive) {
  std::uint64_t total = 0;
  for (const auto& r : archive.records()) total += r.size;
  std::printf("%s: zip archive, prefix '%s', %zu records, %llu bytes of data\n", archive.path().c_str(),
              archive.prefix().c_str(), archive.records().size(), static_cast<unsigned long long>(total));
  std::printf("  %12s  %12s  %5s  %-8s  %s\n", "offset", "size", "align", "method", "record");
  for (const auto& r : archive.records()) {
    std::printf("  %12llu  %12llu  %5llu  %-8s  %s\n", static_cast<unsigned long long>(r.data_offset),
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

std::uint64_t tensor_bytes(const torch::Tensor& t) { return t.numel() * torch::element_size(t.dtype); }

void print_json(const torch::Checkpoint& ckpt, bool hash) {
  using nlohmann::json;
  const auto& storages = ckpt.storages();
  json out;
  out["file"] = ckpt.path();
  out["format"] = torch::format_name(ckpt.format());
  out["byteorder"] = torch::byteorder_name(ckpt.byteorder());
  out["pickle_protocol"] = ckpt.pickle_protocol();
  auto& js = out["storages"] = json::array();
  for (const auto& s : storages) {
    json e = {{"key", s.key},
              {"dtype", torch::dtype_name(s.dtype)},
                  {"numel", s.numel},
                  {"nbytes", s.nbytes},
                  {"location", s.location},
                  {"record", s.record},
                  {"offset", s.file_offset}};
    if (s.view_of) {
      e["view_of"] = storages[*s.view_of].key;
      e["view_offset"] = s.view_offset;
    }
    js.push_back(std::move(e));
  }
  auto& jt = out["tensors"] = json::array();
  const auto& tensors = ckpt.tensors();
  std::vector<std::string> sha(hash ? tensors.size() : 0);
  parallel_for(sha.size(), [&](std::size_t i) {
    if (tensors[i].storage) sha[i] = torch::tensor_sha256(ckpt, tensors[i]);
  });
  for (const auto& t : tensors) {
    json e = {{"name", t.name},
              {"dtype", torch::dtype_name(t.dtype)},
              {"shape", t.shape},
              {"stride", t.stride},
              {"storage_offset", t.storage_offset},
              {"storage", t.storage ? json(storages[*t.storage].key) : json(nullptr)},
              {"requires_grad", t.requires_grad},
              {"kind", torch::tensor_kind_name(t.kind)}};
    if (t.storage) e["location"] = storages[*t.storage].location;
    if (!t.device.empty()) e["device"] = t.device;
    if (t.parameter) e["parameter"] = true;
    if (t.conj) e["conj"] = true;
    if (t.neg) e["neg"] = true;
    if (!t.subclass.empty()) e["subclass"] = t.subclass;
    if (t.quantizer) {
      e["quantizer"] = {{"qscheme", t.quantizer->qscheme}, {"scale", t.quantizer->scale},
                        {"zero_point", t.quantizer->zero_point}, {"axis", t.quantizer->axis}};
    }
    if (!t.components.empty()) {
      auto& c = e["components"] = json::object();
      for (const auto& comp : t.components) c[comp.role] = tensors[comp.tensor].name;
    }
    if (hash) e["sha256"] = t.storage ? json(sha[static_cast<std::size_t>(&t - tensors.data())]) : json(nullptr);
    jt.push_back(std::move(e));
  }
  out["unknown_globals"] = ckpt.unknown_globals();
  out["version_hints"] = ckpt.version_hints();
  std::cout << out.dump(2) << "\n";
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
      r.storage = s.key + (users[*t.storage] > 1 ? " (shared by " + std::to_string(users[*t.storage]) + ")" : "");
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
  for (const auto& r : rows) {
    std::printf("%-*s  %-*s  %-*s  %-*s  %*s  %s\n", static_cast<int>(w[0]), r.name.c_str(), static_cast<int>(w[1]),
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
  std::printf("\n%zu tensors, %zu storages, %s (%llu bytes)\n", tensors.size(), storages.size(),
              human_bytes(total).c_str(), static_cast<unsigned long long>(total));
  for (const auto& [loc, n] : per_location) {
    std::printf("  %-12s %s (%llu bytes)\n", loc.c_str(), human_bytes(n).c_str(), static_cast<unsigned long long>(n));
  }
  std::printf("format: %s, byteorder %s%s, pickle protocol %d\n", std::string(torch::format_name(ckpt.format())).c_str(),
              std::string(torch::byteorder_name(ckpt.byteorder())).c_str(),
              ckpt.has_byteorder_record() ? " (record)" : "", ckpt.pickle_protocol());
  for (const auto& h : ckpt.version_hints()) std::printf("  %s\n", h.c_str());
  if (ckpt.unknown_globals().empty()) {
    std::printf("unknown globals: none\n");
  } else {
    std::printf("unknown globals (not on torch's weights_only allowlist):\n");
    for (const auto& g : ckpt.unknown_globals()) std::printf("  %s\n", g.c_str());
  }
}

}  // namespace

int cmd_ls(const Args& args) {
  if (args.positional.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "usage: maploc ls FILE [--json [--hash]] [--records]");
  }
  if (args.has("records")) {
    const auto archive = zip::Archive::open(args.positional[0], limits_of(args));
    if (args.has("json")) {
      print_records_json(archive);
    } else {
      print_records_table(archive);
    }
    return kExitOk;
  }
  const auto ckpt = torch::Checkpoint::open(args.positional[0], {limits_of(args)});
  if (args.has("json")) {
    print_json(ckpt, args.has("hash"));
  } else {
    print_table(ckpt);
  }
  return kExitOk;
}

}  // namespace maploc::cli
