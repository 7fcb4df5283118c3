// storage_names.h - which tensors view each storage, for decisions and messages (internal).
#pragma once

#include <string>
#include <vector>

#include "maploc/torch/checkpoint.h"

namespace maploc::remap::detail {

/// names[i]: the tensors viewing storage i, in checkpoint order.
std::vector<std::vector<std::string>> storage_tensor_names(const torch::Checkpoint& checkpoint);

/// "storage '3' of tensor 'fc.weight'" (or just "storage '3'").
std::string describe_storage(const torch::Storage& storage, const std::vector<std::string>& names);

}  // namespace maploc::remap::detail
