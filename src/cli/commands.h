// commands.h - the subcommands of the maploc CLI and their shared plumbing (internal).
#pragma once

#include <string>
#include <vector>

#include "exit_codes.h"
#include "maploc/error.h"
#include "maploc/limits.h"
#include "maploc/remap/map_location.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::cli {


/// Parsed command line of one subcommand: positional arguments and --flags.
struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  ///< --name=value or --name value
  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback = "") const;
};

/// `maploc ls FILE [--json]`: what is in a checkpoint.
int cmd_ls(const Args& args);

/// `maploc dis FILE [--record NAME]`: pickletools-style disassembly.
int cmd_dis(const Args& args);

/// `maploc plan FILE [--map-location SPEC] [--json]`: where each storage would go.
int cmd_plan(const Args& args);

/// `maploc load FILE [--map-location SPEC] [...]`: place every storage, report, hash.
int cmd_load(const Args& args);

/// `maploc remap IN OUT --map-location SPEC`: a new archive with rewritten location tags.
int cmd_remap(const Args& args);

/// `maploc convert IN OUT`: to and from safetensors.
int cmd_convert(const Args& args);

/// `maploc verify FILE`: check a checkpoint without loading it.
int cmd_verify(const Args& args);

/// Limits with every `--limit FIELD=N` applied (FIELD as in Limits::FIELD);
/// raises kInvalidArgument for an unknown field or a bad number.
Limits limits_of(const Args& args);

/// convert/remap with --shard-size SIZE: write `checkpoint` into directory `out` as a sharded
/// set with an index (torch::save_set); `locations` are the tags for torch shards.
int write_set_command(const Args& args, const torch::Checkpoint& checkpoint, const std::string& out, bool safetensors,
                      std::vector<std::string> locations);

/// How the subcommands open checkpoints: limits_of(args), and non-fatal
/// oddities (a tensor a set's index does not name, ...) printed to stderr.
torch::Options open_options(const Args& args);

/// The --map-location option (none when absent); a SPEC that does not parse is a usage error.
remap::MapLocation map_location_of(const Args& args);

/// Runs f(); a maploc::Error it throws comes back as the same error of Stage::kCli (a usage
/// error, exit 2): for parsing what the command line says (SPEC, --slice, RANK from the environment).
template <class F>
auto as_usage(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(e.code(), Stage::kCli, e.message(), e.offset(), e.item());
  }
}

/// Runs f(), which writes OUT: a file it cannot create (kIoOpen: no such folder, no
/// permission) is reported as kIoWrite, so that every failure to write OUT exits 6.
template <class F>
auto writing_out(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kIoOpen) throw;
    throw Error(ErrorCode::kIoWrite, e.stage(), e.message(), e.offset(), e.item());
  }
}

/// remap/convert: refuses (usage error) an OUT that is IN itself, by another spelling, a hard
/// link or a symbolic link (same device and inode), or a sharded set's member or directory.
void refuse_out_is_in(const torch::Checkpoint& checkpoint, const std::string& in, const std::string& out);

}  // namespace maploc::cli
