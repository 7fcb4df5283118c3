// cuda_main.cpp - runs the CUDA tests only where a device answers; otherwise exits 77 (ctest: skipped).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "maploc/remap/device.h"

int main(int argc, char** argv) {
  const auto& inventory = maploc::remap::DeviceInventory::probe();
  if (inventory.cuda_device_count == 0) {
    std::printf("no CUDA device answers here (built with CUDA: %s): skipped\n", inventory.cuda_built ? "yes" : "no");
    return 77;
  }
  std::printf("%d CUDA device(s)\n", inventory.cuda_device_count);
  return Catch::Session().run(argc, argv);
}
