// fuzz_safetensors.cpp - libFuzzer target: .safetensors bytes (seeded from fixtures/safetensors)
// read through torch::Checkpoint's content sniffing, with fuzz_checkpoint's invariants.
// Inputs that no longer look like safetensors (8-byte header length, then '{') are
// skipped, so that every execution exercises the safetensors reader.
#include <cstdint>

#include "checkpoint_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 10 || data[8] != '{') return 0;
  maploc::fuzz::read_and_check(data, size);
  return 0;
}
