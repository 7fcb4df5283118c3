// fuzz_checkpoint.cpp - libFuzzer target: any bytes as a torch checkpoint, then a CPU load.
// Invariants (checkpoint_checks.h): every tensor lies inside its storage, every zip storage
// names its record, and remap::load places exactly storage.nbytes bytes per storage.
#include <cstdint>

#include "checkpoint_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  maploc::fuzz::read_and_check(data, size);
  return 0;
}
