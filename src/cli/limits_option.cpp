// limits_option.cpp - `--limit FIELD=N`: raising a maploc::Limits field from the command line.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "maploc/error.h"

namespace maploc::cli {
namespace {

// Every Limits field by the name its error messages use ("raise Limits::zip_max_entries").
struct Field {
  const char* name;
  std::uint64_t Limits::*member;
};

constexpr Field kFields[] = {
    {"zip_max_entries", &Limits::zip_max_entries},
    {"zip_max_inflated_bytes", &Limits::zip_max_inflated_bytes},
    {"zip_max_compression_ratio", &Limits::zip_max_compression_ratio},
    {"pickle_max_stack_depth", &Limits::pickle_max_stack_depth},
    {"pickle_max_nesting_depth", &Limits::pickle_max_nesting_depth},
    {"pickle_max_memo_entries", &Limits::pickle_max_memo_entries},
    {"pickle_max_string_bytes", &Limits::pickle_max_string_bytes},
    {"pickle_max_container_items", &Limits::pickle_max_container_items},
    {"pickle_max_total_bytes", &Limits::pickle_max_total_bytes},
    {"torch_max_rank", &Limits::torch_max_rank},
    {"torch_max_walk_paths", &Limits::torch_max_walk_paths},
    {"pickle_max_int_digits", &Limits::pickle_max_int_digits},
    {"torch_max_tensors", &Limits::torch_max_tensors},
    {"torch_max_name_bytes", &Limits::torch_max_name_bytes},
    {"torch_max_walk_bytes", &Limits::torch_max_walk_bytes},
    {"torch_max_expanded_bytes", &Limits::torch_max_expanded_bytes},
};

[[noreturn]] void bad(const std::string& why) {
  std::string names;
  for (const auto& f : kFields) names += std::string(names.empty() ? "" : ", ") + f.name;
  throw Error(ErrorCode::kInvalidArgument, Stage::kCli, "--limit " + why + " (fields: " + names + ")");
}

}  // namespace

Limits limits_of(const Args& args) {
  Limits limits;
  for (const auto& [name, value] : args.options) {
    if (name != "limit") continue;
    const auto eq = value.find('=');
    if (eq == std::string::npos) bad("takes FIELD=N, not '" + value + "'");
    std::string field = value.substr(0, eq);
    const std::string number = value.substr(eq + 1);
    if (field.rfind("Limits::", 0) == 0) field.erase(0, 8);  // as the error messages spell it
    char* end = nullptr;
    const unsigned long long n = std::strtoull(number.c_str(), &end, 10);
    if (number.empty() || end == nullptr || *end != '\0' || number[0] == '-') bad("'" + value + "': N must be a decimal count");
    bool found = false;
    for (const auto& f : kFields) {
      if (field == f.name) {
        limits.*f.member = n;
        found = true;
      }
    }
    if (!found) bad("names no limit: '" + field + "'");
  }
  return limits;
}

torch::Options open_options(const Args& args) {
  torch::Options o;
  o.limits = limits_of(args);
  o.strict = args.has("strict");
  o.remote.ca_file = args.get("ca-file");  // empty: the environment's (remote::Options::ca_file)
  o.diagnostics = [](std::string_view m) {
    std::fprintf(stderr, "maploc: warning: %.*s\n", static_cast<int>(m.size()), m.data());
  };
  return o;
}

}  // namespace maploc::cli
