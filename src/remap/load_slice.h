// load_slice.h - remap::load's path for LoadOptions::slice (internal).
#pragma once

#include <memory>
#include <vector>

#include "maploc/remap/loaded.h"

namespace maploc::remap {

/// load() with options.slice set: plans the parent storages, then reads and
/// places only the slices this rank owns (load_slice.cpp).
Loaded load_sliced(const torch::Checkpoint& checkpoint, const LoadOptions& options);

}  // namespace maploc::remap
