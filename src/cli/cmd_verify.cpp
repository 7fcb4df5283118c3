// cmd_verify.cpp - `maploc verify FILE`: is this checkpoint whole and consistent? Exit 0 only if so.

#include "commands.h"
#include "json_writer.h"
#include "maploc/error.h"
#include "maploc/torch/verify.h"

namespace maploc::cli {

int cmd_verify(const Args& args) {
  if (args.positional.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "usage: maploc verify FILE [--json]");
  }
  const auto r = torch::verify(args.positional[0], open_options(args));  // the remote options of every command
  if (args.has("json")) {
    OutBuffer out(OutBuffer::Mode::kWhole);
    JsonWriter(out.text())
        .begin_object()
        .field_array("checks", r.checks)
        .field("file", r.path)
        .field("format", r.format)
        .field("ok", r.ok())
        .field_array("problems", r.problems)
        .field_array("warnings", r.warnings)
        .end_object();
    out.append('\n');
    out.finish();
  } else {
    OutBuffer out(OutBuffer::Mode::kStream);
    out.printf("%s: %s (%s)\n", r.path.c_str(), r.ok() ? "OK" : "BROKEN", r.format.c_str());
    for (const auto& c : r.checks) out.printf("  ok       %s\n", c.c_str());
    for (const auto& w : r.warnings) out.printf("  warning  %s\n", w.c_str());
    for (const auto& p : r.problems) out.printf("  problem  %s\n", p.c_str());
  }
  return r.ok() ? kExitOk : kExitBadFile;
}

}  // namespace maploc::cli
