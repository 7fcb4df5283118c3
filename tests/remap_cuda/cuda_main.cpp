// cuda_main.cpp - runs the CUDA tests where a device answers. Where none does it says why (each
// runtime library tried and what it said) and exits 77 (ctest: skipped), unless
// MAPLOC_CUDA_REQUIRED=1 (tools/gpu-check.sh, the stand-in runs): then it fails.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "device_backend.h"
#include "maploc/remap/device.h"

int main(int argc, char** argv) {
  const auto& inventory = maploc::remap::DeviceInventory::probe();
  const char* required = std::getenv("MAPLOC_CUDA_REQUIRED");
  if (inventory.cuda_device_count == 0) {
    const bool must = required != nullptr && std::string(required) == "1";
    std::printf("no CUDA device answers here (built with CUDA: %s): %s\n%s\n", inventory.cuda_built ? "yes" : "no",
                must ? "FAILED (MAPLOC_CUDA_REQUIRED=1)" : "skipped", inventory.cuda_note.c_str());
    return must ? 1 : 77;
  }
  std::printf("%d CUDA device(s) through %s\n", inventory.cuda_device_count, inventory.backend->name().c_str());
  if (!inventory.cuda_note.empty()) std::printf("%s\n", inventory.cuda_note.c_str());
  // Catch2 v2 returns the number of failed assertions (capped at 255): 77 of them must not
  // read as ctest's skip code, so every failure is exit 1.
  return Catch::Session().run(argc, argv) == 0 ? 0 : 1;
}
