// verify.h - checking a checkpoint file without loading it anywhere.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "maploc/limits.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::torch {

/// The outcome of verify(): what was checked and, in a user's words, what is wrong.
struct VerifyReport {
  std::string path;
  std::string format;              ///< format_name(), or what the content looks like when unreadable
  std::vector<std::string> checks; ///< what held ("12 records inside the file, none overlapping", ...)
  std::vector<std::string> problems; ///< what does not ("truncated download: 812 MB of 1.4 GB present", ...)
  std::vector<std::string> warnings; ///< oddities that do not make the file unusable
  bool ok() const noexcept { return problems.empty(); }
};

/// Checks `path` as torch.load and maploc would read it: the zip container
/// (every record inside the file, none overlapping, sizes as declared,
/// CRC-32 of every record whose writer stored one, deflated records
/// inflating to their size), the pickle (runs to STOP), every storage's
/// record size, every tensor inside its storage, the byteorder record;
/// the same for legacy, tar and safetensors files. A zip that lost its end
/// (a cut download) is measured against the storages its data.pkl declares.
/// A directory or an index file is checked as a sharded set: each file the
/// index names, then the weight_map against the files (docs/sharded.md).
/// Never throws for a bad file (problems say it); raises kIoOpen/kIoRead
/// only when the file cannot be read at all. strict (Options::strict, the CLI's --strict): a storage
/// no named tensor reaches, or an unknown rebuild function, is a problem, not a warning.
VerifyReport verify(const std::filesystem::path& path, const Limits& limits = {}, bool strict = false);

/// The same with the caller's open options: Options::limits and strict as above, and for a URL (and
/// each shard of a set's index by URL) Options::remote, as Checkpoint::open honours it (retries,
/// requests in flight, request sizes; docs/remote.md). What Options::diagnostics would be told is
/// in the report's warnings instead.
VerifyReport verify(const std::filesystem::path& path, const Options& options);

}  // namespace maploc::torch
