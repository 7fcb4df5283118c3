// cmd_ls.cpp - `maploc ls`: what a checkpoint archive contains.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "maploc/error.h"
#include "maploc/zip/archive.h"

namespace maploc::cli {
namespace {

std::string method_name(std::uint16_t method) {
  return method == zip::kMethodStored ? "stored" : method == zip::kMethodDeflated ? "deflated" : "?";
}

void print_json(const zip::Archive& archive) {
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

void print_table(const zip::Archive& archive) {
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

}  // namespace

int cmd_ls(const Args& args) {
  if (args.positional.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "usage: maploc ls FILE [--json]");
  }
  const auto archive = zip::Archive::open(args.positional[0]);
  if (args.has("json")) {
    print_json(archive);
  } else {
    print_table(archive);
  }
  return kExitOk;
}

}  // namespace maploc::cli
