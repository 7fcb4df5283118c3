// security_util.cpp - the malicious corpus's manifest, a reader per entry, and forked runs.
#include "security/security_util.h"

#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "maploc/error.h"
#include "maploc/limits.h"
#include "maploc/mapped_file.h"
#include "maploc/pickle/disassemble.h"
#include "maploc/pickle/machine.h"
#include "maploc/remap/loaded.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/zip/archive.h"

namespace maploc::security {
namespace {

nlohmann::json load_json() {
  std::ifstream in(malicious_dir() + "/manifest.json");
  if (!in) throw std::runtime_error("cannot read " + malicious_dir() + "/manifest.json");
  return nlohmann::json::parse(in);
}

const nlohmann::json& json() {
  static const nlohmann::json j = load_json();
  return j;
}

Limits limits_of(const Entry& e) {
  Limits l;
  for (const auto& [name, value] : e.limits) {
    if (name == "zip_max_entries") l.zip_max_entries = value;
    else if (name == "zip_max_inflated_bytes") l.zip_max_inflated_bytes = value;
    else if (name == "zip_max_compression_ratio") l.zip_max_compression_ratio = value;
    else if (name == "pickle_max_stack_depth") l.pickle_max_stack_depth = value;
    else if (name == "pickle_max_nesting_depth") l.pickle_max_nesting_depth = value;
    else if (name == "pickle_max_memo_entries") l.pickle_max_memo_entries = value;
    else if (name == "pickle_max_string_bytes") l.pickle_max_string_bytes = value;
    else if (name == "pickle_max_container_items") l.pickle_max_container_items = value;
    else if (name == "pickle_max_total_bytes") l.pickle_max_total_bytes = value;
    else if (name == "torch_max_rank") l.torch_max_rank = value;
    else if (name == "torch_max_walk_paths") l.torch_max_walk_paths = value;
    else if (name == "pickle_max_int_digits") l.pickle_max_int_digits = value;
    else if (name == "torch_max_tensors") l.torch_max_tensors = value;
    else if (name == "torch_max_name_bytes") l.torch_max_name_bytes = value;
    else if (name == "torch_max_walk_bytes") l.torch_max_walk_bytes = value;
    else if (name == "torch_max_expanded_bytes") l.torch_max_expanded_bytes = value;
    else throw std::runtime_error("manifest names an unknown limit " + name);
  }
  return l;
}

// Files of the complexity corpus are built at test time and named by absolute path.
std::string path_of(const Entry& e) { return e.file.rfind('/', 0) == 0 ? e.file : malicious_dir() + "/" + e.file; }

std::string missing_global(const std::vector<std::string>& want, const std::vector<std::string>& have) {
  for (const auto& g : want) {
    if (std::find(have.begin(), have.end(), g) == have.end()) return "invariant: global " + g + " not listed";
  }
  return "ok";
}

std::string run_checkpoint(const Entry& e, bool load) {
  torch::Options options;
  options.limits = limits_of(e);
  options.diagnostics = [](std::string_view) {};
  auto ckpt = torch::Checkpoint::open(path_of(e), options);
  for (std::size_t i = 0; i < ckpt.storages().size(); ++i) (void)ckpt.storage_bytes(i);
  if (load) {
    static const remap::DeviceInventory kNoGpu{};
    remap::LoadOptions lo;
    lo.map = remap::MapLocation::all_to("cpu");
    lo.inventory = &kNoGpu;
    auto loaded = remap::load(ckpt, lo);
    for (std::size_t i = 0; i < loaded.tensors().size(); ++i) {
      if (loaded.tensors()[i].storage) (void)loaded.tensor_sha256(i);
    }
  }
  return missing_global(e.globals, ckpt.unknown_globals());
}

}  // namespace

std::string malicious_dir() { return std::string(MAPLOC_FIXTURES_DIR) + "/malicious"; }

std::string canary_path() { return json().at("canary").get<std::string>(); }

const std::vector<Entry>& manifest() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> out;
    for (const auto& j : json().at("entries")) {
      Entry e;
      e.file = j.at("file");
      e.reader = j.at("reader");
      e.expect = j.at("expect");
      e.why = j.value("why", "");
      if (j.contains("globals")) e.globals = j.at("globals").get<std::vector<std::string>>();
      if (j.contains("limits")) {
        for (const auto& [k, v] : j.at("limits").items()) e.limits[k] = v.get<std::uint64_t>();
      }
      out.push_back(std::move(e));
    }
    return out;
  }();
  return entries;
}

std::string run_entry(const Entry& e) {
  try {
    const std::string path = path_of(e);
    if (e.reader == "pickle" || e.reader == "dis") {
      auto file = MappedFile::open(path);
      if (e.reader == "dis") {
        (void)pickle::disassemble(file.bytes.span());
        return "ok";
      }
      pickle::Options po;
      po.limits = limits_of(e);
      auto result = pickle::run(file.bytes, po);
      std::vector<std::string> names;
      for (const auto& g : result.globals()) {
        names.push_back(std::string(g.global_module()) + "." + std::string(g.global_name()));
      }
      return missing_global(e.globals, names);
    }
    if (e.reader == "zip") {
      auto archive = zip::Archive::open(path, limits_of(e));
      for (const auto& r : archive.records()) (void)archive.read(r);
      return "ok";
    }
    if (e.reader == "checkpoint") return run_checkpoint(e, false);
    if (e.reader == "load") return run_checkpoint(e, true);
    return "invariant: unknown reader " + e.reader;
  } catch (const Error& err) {
    return std::string(error_code_name(err.code()));
  }
}

Measured run_forked(const Entry& entry) { return run_forked(entry, ForkLimits{}); }

Measured run_forked(const Entry& entry, const ForkLimits& limits) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    close(fds[0]);
    alarm(60);  // a hang becomes SIGALRM, reported as "killed"
    if (limits.address_space_bytes != 0) {
      const struct rlimit as{limits.address_space_bytes, limits.address_space_bytes};
      if (setrlimit(RLIMIT_AS, &as) != 0) _exit(2);
    }
    const std::string out = run_entry(entry);
    const ssize_t n = write(fds[1], out.data(), out.size());
    _exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  Measured m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.peak_rss_kb = static_cast<std::uint64_t>(usage.ru_maxrss);
  m.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  if (WIFSIGNALED(status)) m.outcome = WTERMSIG(status) == SIGALRM ? "killed" : "crashed";
  else if (WEXITSTATUS(status) != 0) m.outcome = "crashed";
  else m.outcome = out;
  return m;
}

}  // namespace maploc::security
