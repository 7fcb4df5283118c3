// write.cpp - the C API's file rewrites: location tags (`maploc remap`) and format conversion (`maploc convert`).
#include <string>

#include "handles.h"
#include "maploc/torch/safetensors.h"
#include "maploc/torch/write.h"

using namespace maploc;
using capi::guarded;

extern "C" {

int maploc_remap(const char* in, const char* out, const char* map_location) {
  return guarded([&] {
    capi::require(in, "the input path");
    capi::require(out, "the output path");
    capi::require(map_location, "the map_location");
    const auto checkpoint = torch::Checkpoint::open(in);
    torch::ArchiveOptions options;
    options.locations = remap::rewritten_tags(checkpoint, remap::MapLocation::parse(map_location));
    torch::save_archive(checkpoint, out, options);
  });
}

int maploc_convert(const char* in, const char* out, const char* to) {
  return guarded([&] {
    capi::require(in, "the input path");
    capi::require(out, "the output path");
    capi::require(to, "the target format");
    const std::string target = to;
    if (target != "safetensors" && target != "torch") {
      capi::invalid("the target format is safetensors or torch, not '" + target + "'");
    }
    const auto checkpoint = torch::Checkpoint::open(in);
    if (target == "safetensors") {
      torch::SafetensorsOptions options;
      options.metadata.emplace_back("maploc.source", checkpoint.path());  // as `maploc convert` writes it
      torch::save_safetensors(checkpoint, out, options);
    } else {
      torch::save_archive(checkpoint, out);
    }
  });
}

}  // extern "C"
