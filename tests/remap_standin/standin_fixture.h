// standin_fixture.h - maploc's real CUDA adapter over the CUDA runtime stand-in, for one test:
// the stand-in configured afresh, a backend of its own (load_cuda_runtime of the stand-in's path)
// and an inventory over it. Everything the test made is gone when it ends, so the next one can
// reconfigure; violations are reported (and fail the test) unless the test expects them.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "cudart_standin/standin.h"
#include "device_backend.h"
#include "maploc/remap/device.h"

namespace maploc::test {

struct OnStandin {
  standin::Control& sc = standin::Control::get();
  remap::DeviceInventory inventory;

  explicit OnStandin(const std::string& spec) {
    INFO(spec);
    REQUIRE(sc.configure(spec.c_str()) == 0);
    std::string why;
    inventory.backend = remap::detail::load_cuda_runtime(standin::Control::path(), &why);
    INFO(why);
    REQUIRE(inventory.backend);
    inventory.cuda_built = true;
    inventory.cuda_device_count = inventory.backend->device_count();
  }
  ~OnStandin() {
    if (inventory.backend) inventory.backend->release_staging();
    inventory.backend.reset();
  }
  OnStandin(const OnStandin&) = delete;
  OnStandin& operator=(const OnStandin&) = delete;

  remap::DeviceBackend& backend() { return *inventory.backend; }

  /// Every violation the stand-in recorded, one per line (empty: none), then forgotten.
  std::string violations() {
    std::string out;
    for (std::size_t i = 0; i < sc.violations(); ++i) out += std::string(sc.violation_text(i)) + "\n";
    sc.acknowledge_violations();
    return out;
  }
};

}  // namespace maploc::test
