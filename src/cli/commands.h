// commands.h - the subcommands of the maploc CLI and their shared plumbing (internal).
#pragma once

#include <string>
#include <vector>

#include "maploc/limits.h"
#include "maploc/remap/map_location.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::cli {

/// Process exit codes, documented in `maploc --help`.
enum Exit : int {
  kExitOk = 0,
  kExitUsage = 2,       ///< bad command line
  kExitBadFile = 3,     ///< the file is unreadable, malformed or not a checkpoint
  kExitMapping = 4,     ///< a storage cannot be mapped to a device
  kExitDevice = 5,      ///< device allocation or copy failed
};

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

/// The --map-location option (none when absent).
remap::MapLocation map_location_of(const Args& args);

}  // namespace maploc::cli
