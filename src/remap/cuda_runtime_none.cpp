// cuda_runtime_none.cpp - a build without CUDA: no runtime to load, and a message that says why.
#include "device_backend.h"

namespace maploc::remap::detail {
namespace {

const char kNotBuilt[] =
    "maploc was built without CUDA (configure with -DMAPLOC_CUDA=ON on a machine with the CUDA toolkit)";

}  // namespace

std::shared_ptr<DeviceBackend> load_cuda_runtime(const std::string&, std::string* why) {
  *why = kNotBuilt;
  return nullptr;
}

std::shared_ptr<DeviceBackend> cuda_runtime(std::string* why) {
  if (why != nullptr) *why = kNotBuilt;
  return nullptr;
}

}  // namespace maploc::remap::detail
