// cuda_backend_none.cpp - the CUDA backend of a build without CUDA: no device, and a clear refusal.
#include "maploc/error.h"
#include "remap/cuda_backend.h"

namespace maploc::remap::detail {
namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw Error(ErrorCode::kRemapCudaNotBuilt, Stage::kRemap,
              what + " needs CUDA, but this maploc was built without it (configure with -DMAPLOC_CUDA=ON on a "
                     "machine with the CUDA toolkit, or map to cpu)");
}

}  // namespace

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
std::uint64_t cuda_free_bytes(int) { refuse("querying device memory"); }

std::shared_ptr<void> cuda_allocate(int device, std::uint64_t, void**, const std::string& who) {
  refuse("placing " + who + " on cuda:" + std::to_string(device));
}

std::shared_ptr<void> cuda_allocate_pinned(std::uint64_t, void**, const std::string& who) {
  refuse("pinned host memory for " + who);
}

void cuda_upload(std::span<const UploadJob>, const CudaOptions&, maploc::detail::ProgressMeter*) { refuse("uploading to a CUDA device"); }

void cuda_download(int, const void*, void*, std::uint64_t, const std::string& who) {
  refuse("copying " + who + " back from a CUDA device");
}

}  // namespace maploc::remap::detail
