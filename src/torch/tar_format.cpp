// tar_format.cpp - torch 0.1.x checkpoints: a tar of 'storages', 'tensors' and 'pickle' (§2.6).
#include "torch/state.h"

namespace maploc::torch {

void read_tar(Checkpoint::State& st) {
  fail(ErrorCode::kTorchUnsupportedFormat, "the torch 0.1.x tar format is not read yet", st.path);
}

}  // namespace maploc::torch
