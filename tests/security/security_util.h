// security_util.h - the malicious corpus's manifest, a reader per entry, and a forked,
// measured run of it (exit, peak RSS, wall time) for the security tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace maploc::security {

/// One file of fixtures/malicious/manifest.json.
struct Entry {
  std::string file;      ///< relative to fixtures/malicious
  std::string reader;    ///< pickle | dis | zip | checkpoint | load
  std::string expect;    ///< an ErrorCode name, or "ok"
  std::string why;
  std::vector<std::string> globals;              ///< must be listed as unknown/dangerous globals
  std::map<std::string, std::uint64_t> limits;   ///< Limits fields lowered for this file
};

/// fixtures/malicious
std::string malicious_dir();
/// The canary path a successful payload would create.
std::string canary_path();
/// Every entry of the manifest.
const std::vector<Entry>& manifest();

/// Runs the entry's reader in this process: "ok", an ErrorCode name, or
/// "invariant: ..." when an "ok" file did not list its globals.
std::string run_entry(const Entry& entry);

/// What a child process did.
struct Measured {
  std::string outcome;        ///< what run_entry returned, or "crashed"/"killed"
  std::uint64_t peak_rss_kb = 0;
  double seconds = 0;
  double cpu_seconds = 0;  ///< user + system time of the child
};

/// Bounds set on the child before it reads.
struct ForkLimits {
  std::uint64_t address_space_bytes = 0;  ///< RLIMIT_AS; 0: none
};

/// Forks, runs run_entry in the child and measures it (getrusage of the child).
Measured run_forked(const Entry& entry);
Measured run_forked(const Entry& entry, const ForkLimits& limits);

}  // namespace maploc::security
