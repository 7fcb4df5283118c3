// exit_codes.h - the one table of the maploc CLI's exit codes and which errors give which (internal).
// docs/cli.md's table is checked against kExitCodeTable by tests/cli ("the exit-code table ...").
#pragma once

#include <string_view>

#include "maploc/error.h"

namespace maploc::cli {

/// Process exit codes. Every command returns one of these and nothing else.
enum Exit : int {
  kExitOk = 0,
  kExitUsage = 2,    ///< bad command line: unknown option, missing argument, bad SPEC/--slice/--to/size, OUT = IN
  kExitBadFile = 3,  ///< the file is unreadable, malformed or not a checkpoint (or verify found a problem)
  kExitMapping = 4,  ///< a storage cannot be placed or sliced as asked
  kExitDevice = 5,   ///< device allocation or copy failed, not enough device memory, CUDA not built
  kExitOutput = 6,   ///< stdout or OUT could not be written (disk full, I/O error, closed pipe)
};

struct ExitCodeRow {
  Exit code;
  std::string_view word;     ///< one or two words, for `maploc --help`
  std::string_view meaning;  ///< as docs/cli.md's table says it
};

/// The table `maploc --help` prints and docs/cli.md shows (a test compares the two).
inline constexpr ExitCodeRow kExitCodeTable[] = {
    {kExitOk, "ok", "ok (for `verify`: every check holds)"},
    {kExitUsage, "usage",
     "usage: unknown command or option, missing or extra argument, malformed value (SPEC, `--slice`, `--to`, "
     "`--rank`, sizes, `--limit`), OUT naming IN, an OUT extension `convert` does not write"},
    {kExitBadFile, "bad or unreadable file",
     "the file is unreadable, malformed or not a checkpoint (zip, pickle, torch errors); `verify` found a problem"},
    {kExitMapping, "mapping error",
     "mapping: a storage cannot be placed or sliced as asked (`kRemap*` decisions: no such device, unknown tag, "
     "conflicting rules, `meta` as a tag)"},
    {kExitDevice, "device error",
     "device: CUDA allocation or copy failed, not enough device memory, CUDA not built"},
    {kExitOutput, "output not written",
     "output: standard output or OUT could not be written (disk full, I/O error, a closed pipe); the message "
     "names which"},
};

/// The exit code an error gives: the one place that decides it.
inline Exit exit_code_for(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kIoWrite:
    case ErrorCode::kIoNoSpace: return kExitOutput;
    case ErrorCode::kRemapBadSpec: return kExitUsage;  // a SPEC that does not parse is a command-line error
    case ErrorCode::kRemapDevice:
    case ErrorCode::kRemapCudaNotBuilt:
    case ErrorCode::kRemapOutOfMemory: return kExitDevice;
    default: break;
  }
  switch (e.stage()) {
    case Stage::kCli: return kExitUsage;
    case Stage::kRemap: return kExitMapping;
    default: return kExitBadFile;
  }
}

}  // namespace maploc::cli
