// consumer.cpp - the smallest real use of maploc: open a checkpoint, load it on the CPU, print a hash.
#include <maploc/maploc.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer CHECKPOINT TENSOR\n");
    return 2;
  }
  try {
    const auto checkpoint = maploc::torch::Checkpoint::open(argv[1]);
    maploc::remap::LoadOptions options;
    options.map = maploc::remap::MapLocation::parse("cuda:*->cpu");
    const auto loaded = maploc::remap::load(checkpoint, options);
    const auto index = loaded.find(argv[2]);
    if (!index) {
      std::fprintf(stderr, "no tensor '%s'\n", argv[2]);
      return 1;
    }
    std::printf("maploc %s: %s %s\n", maploc::kVersion, argv[2], loaded.tensor_sha256(*index).c_str());
  } catch (const maploc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
