// physical_reference_nocuda.cpp - the GPU references in a build without CUDA: none.
#include "physical_reference.h"

namespace bench {

void gpu_references(int, std::size_t, unsigned, std::size_t, int, Report&) {}

}  // namespace bench
