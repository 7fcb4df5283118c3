// main.cpp - the maploc command-line tool: the command table, option checking, help and error reporting.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "commands.h"
#include "json_writer.h"
#include "maploc/error.h"
#include "maploc/version.h"

namespace maploc::cli {
namespace {

// One subcommand: how it is called, what it does, which options it takes.
struct Command {
  const char* name;
  int (*run)(const Args&);
  const char* synopsis;
  const char* summary;
  const char* details;
  const char* switches;  ///< space-separated options without a value
  const char* values;    ///< space-separated options that take a value
};

constexpr const char* kSpecHelp =
    "SPEC: cpu | cuda | cuda:N | cuda:local | auto | meta | TAG->DEVICE[,...] | name:PATTERN->DEVICE[,...]\n"
    "      globs with *, first match wins (docs/map-location.md)\n";

const Command kCommands[] = {
    {"ls", cmd_ls, "ls FILE [--json [--hash]] [--records]",
     "the tensors and storages of a checkpoint (or its zip records)",
     "  --json      one JSON object: format, byteorder, storages, tensors, unknown_globals\n"
     "              (docs/cli-ls.md)\n"
     "  --hash      with --json: the sha256 of every tensor's values, row-major\n"
     "  --records   the zip records instead: offsets, sizes, alignment, compression\n",
     "json hash records", ""},
    {"dis", cmd_dis, "dis FILE [--record NAME] [--json]", "disassemble a checkpoint's pickle, as pickletools prints it",
     "  --record NAME   a zip record (relative to the archive folder, or the full name);\n"
     "                  default data.pkl. Legacy files print their five pickles; a bare\n"
     "                  pickle file prints itself.\n"
     "  --json          {file, pickles: [{stream, start, end, opcodes: [{offset, byte, name,\n"
     "                  arg, note, depth}]}]}\n",
     "json", "record"},
    {"plan", cmd_plan, "plan FILE [--map-location SPEC] [--devices cuda:0=SIZE,...] [--json]",
     "where each storage would go and the bytes per device, before reading any data",
     "  --map-location SPEC   where storages go (default: their saved tags)\n"
     "  --devices LIST        plan for another machine: CUDA devices and their memory,\n"
     "                        e.g. cuda:0=80GiB,cuda:1=80GiB (says per device if it fits)\n"
     "  --json                storages with their targets, and per-device totals\n"
     "Fails (exit 4/5) when a storage cannot be placed or a device lacks free memory.\n",
     "json", "map-location devices"},
    {"load", cmd_load,
     "load FILE [--map-location SPEC] [--host view|copy|pinned] [--writable] [--populate] [--no-arena] [--hash] [--json]",
     "place every storage on its device; print the time and rate (and hashes)",
     "  --map-location SPEC   where storages go (default: their saved tags)\n"
     "  --host view|copy|pinned\n"
     "                        CPU storages as zero-copy file views (default), aligned\n"
     "                        private copies, or page-locked copies (CUDA builds)\n"
     "  --writable            writable copy-on-write views instead of read-only ones\n"
     "  --populate            with --host view: map every page before returning\n"
     "                        (MADV_POPULATE_READ), so that first use never faults\n"
     "  --no-arena            one device allocation per storage instead of one per GPU\n"
     "  --hash                print every tensor's sha256 from the placed copy\n"
     "  --json                timings, per-device totals and tensors as JSON\n"
     "  --slice RULES         place only this rank's part of each tensor: RULES is\n"
     "                        KIND:GLOB[,...], KIND rows, cols, all or stageN (first match;\n"
     "                        unmatched tensors are replicated); docs/sharded.md\n"
     "  --rank R --world-size W\n"
     "                        this process's rank (default: RANK and WORLD_SIZE from the\n"
     "                        environment, as torchrun sets them)\n",
     "writable populate no-arena hash json", "map-location host slice rank world-size"},
    {"remap", cmd_remap, "remap IN OUT --map-location SPEC [--json]",
     "write a torch archive whose storages carry rewritten location tags",
     "  --map-location SPEC   the new tag of each storage (e.g. 'cuda:*->cpu')\n"
     "  --json                what was written, as JSON\n"
     "  --shard-size SIZE     write OUT as a directory: pytorch_model-NNNNN-of-NNNNN.bin\n"
     "                        shards of at most SIZE (5GB, 500MB, 64MiB) + an index\n"
     "OUT is written to a temporary file and renamed into place; IN is never touched: an OUT\n"
     "that is IN (another spelling, a hard or symbolic link) is refused (exit 2).\n",
     "json", "map-location shard-size"},
    {"convert", cmd_convert, "convert IN OUT [--to safetensors|torch] [--duplicate-tied] [--json]",
     "torch checkpoint <-> safetensors (direction from OUT's extension or --to)",
     "  --to safetensors|torch   the output format when OUT's extension does not say\n"
     "                           (.safetensors; .pt, .pth, .bin, .ckpt for torch; any other\n"
     "                           extension, or none, is refused without --to)\n"
     "  --duplicate-tied         write tensors that share a storage as separate copies\n"
     "                           (default: one copy, the others listed in __metadata__)\n"
     "  --json                   what was written, as JSON\n"
     "  --shard-size SIZE        write OUT as a directory of shards of at most SIZE (5GB,\n"
     "                           500MB, 64MiB) + an index, as huggingface_hub splits\n"
     "OUT is written to a temporary file and renamed into place; IN is never touched: an OUT\n"
     "that is IN (another spelling, a hard or symbolic link) is refused (exit 2).\n",
     "duplicate-tied json", "to shard-size"},
    {"verify", cmd_verify, "verify FILE [--json]",
     "check container, records, CRC-32s, pickle and tensor bounds without loading",
     "  --json   the findings as JSON\n"
     "Exits 0 only when every check holds.\n",
     "json", ""},
};

// "exit codes: 0 ok, 2 usage, ..." from the one table (exit_codes.h).
std::string exit_codes_line() {
  std::string out = "exit codes:";
  for (const auto& row : kExitCodeTable) {
    out += (row.code == kExitOk ? " " : ", ") + std::to_string(row.code) + " " + std::string(row.word);
  }
  return out + " (docs/cli.md)\n";
}

// Options every command takes.
constexpr const char* kGlobalSwitches = "help quiet strict";
constexpr const char* kGlobalValues = "limit ca-file";

bool in_list(std::string_view list, std::string_view word) {
  while (!list.empty()) {
    const auto space = list.find(' ');
    if (list.substr(0, space) == word) return true;
    if (space == std::string_view::npos) break;
    list.remove_prefix(space + 1);
  }
  return false;
}

void print_usage(FILE* out) {
  std::fprintf(out, "usage: maploc <command> [options]    (maploc <command> --help for its options)\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-8s %s\n", c.name, c.summary);
  std::fprintf(out, "\n%s\n%s", kSpecHelp, exit_codes_line().c_str());
}

void print_help(const Command& c) {
  std::printf("usage: maploc %s\n\n%s.\n\n%s  --quiet    no progress output\n"
              "  --strict   a storage no named tensor reaches, or a rebuild function maploc does not know,\n"
              "             is an error (kTorchIncomplete, exit 3) instead of a warning\n"
              "  --limit FIELD=N\n"
              "             raise a safety limit the error message names, e.g. --limit zip_max_entries=10000000\n"
              "             (repeatable; fields and defaults in docs/security.md)\n"
              "  --ca-file PEM\n"
              "             for a URL by https or s3: trust the CA certificates in PEM (a private CA) instead of\n"
              "             $AWS_CA_BUNDLE (s3), $CURL_CA_BUNDLE, $SSL_CERT_FILE or the system's (docs/remote.md)\n\n%s%s",
              c.synopsis, c.summary, c.details,
              std::strstr(c.values, "map-location") != nullptr ? kSpecHelp : "", exit_codes_line().c_str());
}

// Parses argv against the command's options; an unknown option is a usage error.
Args parse(const Command& c, int argc, char** argv) {
  Args args;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      args.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (in_list(c.values, name) || in_list(kGlobalValues, name)) {
      if (eq == std::string::npos) {
        if (i + 1 >= argc) {
          throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "option --" + name + " needs a value");
        }
        value = argv[++i];
      }
    } else if (!in_list(c.switches, name) && !in_list(kGlobalSwitches, name)) {
      throw Error(ErrorCode::kInvalidArgument, Stage::kCli,
                  "unknown option --" + name + " for 'maploc " + c.name + "' (see maploc " + c.name + " --help)");
    }
    args.options.emplace_back(name, value);
  }
  return args;
}

// Colour only for people: stderr is a terminal and NO_COLOR is unset.
bool colour_stderr() { return ::isatty(STDERR_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr; }

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

namespace {

void report(const std::string& command, const Error& e) {
  const bool colour = colour_stderr();
  std::fprintf(stderr, "maploc%s%s: %serror%s [%s]: %s\n", command.empty() ? "" : " ", command.c_str(),
               colour ? "\033[1;31m" : "", colour ? "\033[0m" : "", std::string(error_code_name(e.code())).c_str(),
               e.what());
}

bool stdout_reported = false;

int run_command(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return kExitUsage;
  }
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    if (argc > 2) {
      for (const auto& c : kCommands) {
        if (c.name == std::string_view(argv[2])) {
          print_help(c);
          return kExitOk;
        }
      }
    }
    print_usage(stdout);
    return kExitOk;
  }
  if (first == "--version" || first == "version") {
    std::printf("maploc %s\n", maploc::kVersion);
    return kExitOk;
  }
  const Command* command = nullptr;
  for (const auto& c : kCommands) {
    if (c.name == first) command = &c;
  }
  if (command == nullptr) {
    std::fprintf(stderr, "maploc: unknown command '%s'\n\n", first.c_str());
    print_usage(stderr);
    return kExitUsage;
  }
  try {
    const Args args = parse(*command, argc, argv);
    if (args.has("help")) {
      print_help(*command);
      return kExitOk;
    }
    return command->run(args);
  } catch (const Error& e) {
    report(first, e);
    if (e.message().rfind("cannot write standard output", 0) == 0) stdout_reported = true;
    return exit_code_for(e);
  } catch (const std::bad_alloc&) {
    // The library turns allocation failure into kLimitMemory at its entry points;
    // this is the net for what the CLI itself allocates (printing a huge listing).
    std::fprintf(stderr, "maploc %s: error [kLimitMemory]: out of memory (the process's memory or address-space limit); "
                 "lower a Limits field with --limit FIELD=N or give the process more memory\n", first.c_str());
    return kExitBadFile;
  }
}

}  // namespace

// A command succeeds only when what it printed reached stdout: the last flush and every
// earlier write are checked, and a failure is an error (exit 6) naming standard output.
int run(int argc, char** argv) {
  const int code = run_command(argc, argv);
  int err = stdout_write_error();
  errno = 0;
  if (std::fflush(stdout) != 0 && err == 0) err = errno != 0 ? errno : EIO;
  if (err == 0 && std::ferror(stdout)) err = EIO;
  if (err == 0 || stdout_reported) return code;
  report(argc >= 2 ? argv[1] : "", stdout_write_failure(err));
  return code == kExitOk ? kExitOutput : code;
}

}  // namespace maploc::cli

int main(int argc, char** argv) { return maploc::cli::run(argc, argv); }
