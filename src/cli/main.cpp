// main.cpp - the maploc command-line tool: argument dispatch and error reporting.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "maploc/error.h"
#include "maploc/version.h"

namespace maploc::cli {
namespace {

constexpr const char* kUsage =
    "usage: maploc <command> [options]\n"
    "\n"
    "commands:\n"
    "  ls FILE [--json [--hash]] [--records]\n"
    "                       the tensors and storages of a checkpoint (or its zip records)\n"
    "  dis FILE [--record NAME]\n"
    "                       disassemble a checkpoint's pickle (data.pkl, any record, the\n"
    "                       legacy format's five pickles, or a bare pickle file)\n"
    "  plan FILE [--map-location SPEC] [--json]\n"
    "                       where each storage would go, and the bytes per device\n"
    "  load FILE [--map-location SPEC] [--host view|copy|pinned] [--writable] [--arena]\n"
    "       [--hash] [--json]\n"
    "                       place every storage, print the time and rate (and hashes)\n"
    "  remap IN OUT --map-location SPEC [--json]\n"
    "                       write a torch archive whose storages carry rewritten location tags\n"
    "  convert IN OUT [--to safetensors|torch] [--duplicate-tied] [--json]\n"
    "                       torch checkpoint <-> safetensors (by OUT's extension)\n"
    "  verify FILE [--json] check container, records, CRC-32s, pickle and tensor bounds\n"
    "\n"
    "SPEC: cpu | cuda | cuda:N | auto | meta | TAG->DEVICE[,...] | name:PATTERN->DEVICE\n"
    "      (globs with *, first match wins; see docs/map-location.md)\n"
    "\n"
    "exit codes: 0 ok, 2 usage, 3 bad or unreadable file, 4 mapping error, 5 device error\n";

// Flags that never take a value; every other --flag may be followed by one.
bool is_switch(const std::string& name) {
  for (const char* s : {"json", "help", "quiet", "hash", "writable", "arena", "records", "duplicate-tied"}) {
    if (name == s) return true;
  }
  return false;
}

Args parse(int argc, char** argv, int first) {
  Args args;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      args.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (!is_switch(name) && i + 1 < argc) {
      value = argv[++i];
    }
    args.options.emplace_back(name, value);
  }
  return args;
}

int exit_code_for(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kRemapDevice:
    case ErrorCode::kRemapCudaNotBuilt:
    case ErrorCode::kRemapOutOfMemory: return kExitDevice;
    default: break;
  }
  switch (e.stage()) {
    case Stage::kRemap: return kExitMapping;
    case Stage::kCli: return kExitUsage;
    default: return kExitBadFile;
  }
}

}  // namespace

bool Args::has(const std::string& name) const {
  for (const auto& [k, v] : options) {
    if (k == name) return true;
  }
  return false;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  for (const auto& [k, v] : options) {
    if (k == name) return v;
  }
  return fallback;
}

int run(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string command = argv[1];
  if (command == "--version") {
    std::printf("maploc %s\n", maploc::kVersion);
    return kExitOk;
  }
  const Args args = parse(argc, argv, 2);
  try {
    if (command == "ls") return cmd_ls(args);
    if (command == "dis") return cmd_dis(args);
    if (command == "plan") return cmd_plan(args);
    if (command == "load") return cmd_load(args);
    if (command == "remap") return cmd_remap(args);
    if (command == "convert") return cmd_convert(args);
    if (command == "verify") return cmd_verify(args);
  } catch (const Error& e) {
    std::fprintf(stderr, "maploc %s: error [%s]: %s\n", command.c_str(),
                 std::string(error_code_name(e.code())).c_str(), e.what());
    return exit_code_for(e);
  }
  std::fprintf(stderr, "maploc: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return kExitUsage;
}

}  // namespace maploc::cli

int main(int argc, char** argv) { return maploc::cli::run(argc, argv); }
