// cmd_verify.cpp - `maploc verify FILE`: is this checkpoint whole and consistent? Exit 0 only if so.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "maploc/error.h"
#include "maploc/torch/verify.h"

namespace maploc::cli {

int cmd_verify(const Args& args) {
  if (args.positional.size() != 1) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "usage: maploc verify FILE [--json]");
  }
  const auto r = torch::verify(args.positional[0], limits_of(args));
  if (args.has("json")) {
    nlohmann::json out = {{"file", r.path}, {"format", r.format}, {"ok", r.ok()}, {"checks", r.checks},
                          {"problems", r.problems}, {"warnings", r.warnings}};
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("%s: %s (%s)\n", r.path.c_str(), r.ok() ? "OK" : "BROKEN", r.format.c_str());
    for (const auto& c : r.checks) std::printf("  ok       %s\n", c.c_str());
    for (const auto& w : r.warnings) std::printf("  warning  %s\n", w.c_str());
    for (const auto& p : r.problems) std::printf("  problem  %s\n", p.c_str());
  }
  return r.ok() ? kExitOk : kExitBadFile;
}

}  // namespace maploc::cli
