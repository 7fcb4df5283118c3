// state.cpp - the stand-in's configuration, its one state, the device memory mappings and contexts.
#include "standin_internal.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace maploc::standin {
namespace {

constexpr std::size_t kGuardGap = std::size_t{2} << 20;  // unmapped-for-allocations gap after each device

bool parse_number(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || !std::isfinite(value) || value < 0) return false;
  std::string suffix(end);
  if (suffix == "K" || suffix == "k") value *= 1024.0;
  else if (suffix == "M" || suffix == "m") value *= 1024.0 * 1024.0;
  else if (suffix == "G" || suffix == "g") value *= 1024.0 * 1024.0 * 1024.0;
  else if (!suffix.empty()) return false;
  out = value;
  return true;
}

}  // namespace

bool parse_config(const char* spec, Config& out, std::string& message) {
  Config config;
  std::string text = spec ? spec : "";
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(at, comma - at);
    at = comma + 1;
    if (item.empty()) continue;
    std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      message = "MAPLOC_STANDIN: '" + item + "' is not key=value";
      return false;
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    double number = 0;
    bool numeric = parse_number(value, number);
    auto bad = [&] {
      message = "MAPLOC_STANDIN: bad value '" + value + "' for " + key;
      return false;
    };
    if (key == "mode") {
      if (value == "ok") config.nodevice = false;
      else if (value == "nodevice") config.nodevice = true;
      else return bad();
    } else if (!numeric) {
      if (key == "devices" || key == "memory" || key == "h2d" || key == "d2h" || key == "d2d" || key == "peer" ||
          key == "runtime" || key == "driver" || key == "peer_access" || key == "attributes_bytes")
        return bad();
      message = "MAPLOC_STANDIN: unknown key '" + key + "'";
      return false;
    } else if (key == "devices") {
      if (number < 1 || number > 64 || number != std::floor(number)) return bad();
      config.devices = static_cast<int>(number);
    } else if (key == "memory") {
      if (number < 4096 || number > 1099511627776.0) return bad();
      config.memory = static_cast<u64>(number);
    } else if (key == "h2d" || key == "d2h" || key == "d2d" || key == "peer") {
      if (number <= 0) return bad();
      (key == "h2d" ? config.h2d : key == "d2h" ? config.d2h : key == "d2d" ? config.d2d : config.peer) = number;
    } else if (key == "runtime" || key == "driver") {
      if (number > 1e6 || number != std::floor(number)) return bad();
      (key == "runtime" ? config.runtime : config.driver) = static_cast<int>(number);
    } else if (key == "peer_access") {
      if (number != 0 && number != 1) return bad();
      config.peer_access = number == 1;
    } else if (key == "attributes_bytes") {
      if (number < static_cast<double>(sizeof(cuda::PointerAttributes)) || number > 4096 || number != std::floor(number)) {
        return bad();
      }
      config.attributes_bytes = static_cast<u64>(number);
    } else {
      message = "MAPLOC_STANDIN: unknown key '" + key + "'";
      return false;
    }
  }
  out = config;
  return true;
}

State& state() {
  static State* the_state = new State();  // never destroyed: the exit report still reads it
  return *the_state;
}

ThreadState& thread_state(State& s) {
  thread_local ThreadState t;
  if (t.generation != s.generation) t = ThreadState{s.generation, 0, 0};
  return t;
}

bool sticky_error(Error e) { return e == cuda::kErrorIllegalAddress || e == cuda::kErrorLaunchFailure; }

void ensure_initialised(State& s) {
  if (s.initialised) return;
  s.initialised = true;
  Config config;
  std::string message;
  const char* spec = std::getenv("MAPLOC_STANDIN");
  if (!parse_config(spec, config, message) || !apply_config(s, config, message)) {
    s.init_error = message;
    std::fprintf(stderr, "maploc cudart stand-in: %s\n", message.c_str());
  }
}

static void unmap(State& s) {
  if (s.reservation) ::munmap(s.reservation, s.total);
  if (s.shadow) ::munmap(s.shadow, s.total);
  if (s.memfd >= 0) ::close(s.memfd);
  s.reservation = s.shadow = nullptr;
  s.memfd = -1;
  s.total = 0;
}

bool apply_config(State& s, const Config& config, std::string& message) {
  unmap(s);
  s.config = config;
  s.devices.assign(static_cast<std::size_t>(config.devices), Device{});
  s.allocations.clear();
  s.streams.clear();
  s.events.clear();
  s.ops.clear();
  s.protected_ranges.clear();
  s.calls.clear();
  s.injections.clear();
  s.now = 0;
  s.spinning_waits = 0;
  s.driver_initialised = false;
  s.init_error.clear();
  ++s.generation;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::size_t total = 0;
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    Device& device = s.devices[d];
    device.capacity = config.memory;
    device.region = (static_cast<std::size_t>(config.memory) + page - 1) / page * page + kGuardGap;
    total += device.region;
    device.peer_enabled.assign(s.devices.size(), false);
    device.legacy_stream = 0x10 + d * 0x10;  // never handed out: 0 and 0x1 name it
    StreamRec legacy;
    legacy.device = static_cast<int>(d);
    legacy.legacy = true;
    s.streams[device.legacy_stream] = legacy;
  }
  s.memfd = ::memfd_create("maploc_cudart_standin", MFD_CLOEXEC);
  if (s.memfd < 0 || ::ftruncate(s.memfd, static_cast<off_t>(total)) != 0) {
    message = std::string("memfd for device memory: ") + std::strerror(errno);
    unmap(s);
    return false;
  }
  void* none = ::mmap(nullptr, total, PROT_NONE, MAP_SHARED | MAP_NORESERVE, s.memfd, 0);
  void* rw = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, s.memfd, 0);
  s.total = total;
  s.reservation = none == MAP_FAILED ? nullptr : static_cast<unsigned char*>(none);
  s.shadow = rw == MAP_FAILED ? nullptr : static_cast<unsigned char*>(rw);
  if (!s.reservation || !s.shadow) {
    message = std::string("mmap of device memory: ") + std::strerror(errno);
    unmap(s);
    return false;
  }
  uptr at = reinterpret_cast<uptr>(s.reservation);
  for (Device& device : s.devices) {
    device.base = at;
    at += device.region;
  }
  return true;
}

void create_context(State& s, int device) {
  Device& d = s.devices[static_cast<std::size_t>(device)];
  if (d.active) return;
  d.active = true;
  ++d.contexts_created;
  s.driver_initialised = true;  // the runtime initialises the driver on its first context
}

}  // namespace maploc::standin

namespace maploc::standin {

Call::Call(const char* name) : s(state()), lock(s.mu) {
  ensure_initialised(s);
  t = &thread_state(s);
  const u64 n = ++s.calls[name];
  auto found = s.injections.find(name);
  if (found != s.injections.end()) {
    auto it = found->second.find(n);
    if (it != found->second.end()) {
      injected = it->second;
      found->second.erase(it);
    }
  }
}

Error Call::begin(unsigned flags) {
  if (!s.init_error.empty()) return ret(cuda::kErrorInitializationError);
  if (!(flags & kVersionQuery)) {
    if (s.config.driver < s.config.runtime) return ret(cuda::kErrorInsufficientDriver);
    if (s.config.nodevice) return ret(cuda::kErrorNoDevice);
  }
  if (injected && !(flags & kDeferInjection)) {
    if (sticky_error(injected) && !(flags & kVersionQuery)) {
      create_context(s, device());
      Device& d = s.devices[static_cast<std::size_t>(device())];
      if (!d.sticky) d.sticky = injected;
    }
    return ret(injected);
  }
  if (flags & kNeedsContext) {
    create_context(s, device());
    if (Error sticky = s.devices[static_cast<std::size_t>(device())].sticky) return sticky;
  }
  return 0;
}

Error Call::ret(Error e) {
  if (e && !sticky_error(e)) t->last = e;
  return e;
}

}  // namespace maploc::standin
