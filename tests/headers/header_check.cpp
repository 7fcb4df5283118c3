// header_check.cpp - compiles the umbrella header with nothing but include/ on the path.
#include <maploc/maploc.h>

// nlohmann/json and the CUDA runtime may be installed system-wide, so the
// include path alone does not prove the public headers avoid them: their
// include guards would be defined if any public header pulled them in.
#if defined(NLOHMANN_JSON_VERSION_MAJOR) || defined(INCLUDE_NLOHMANN_JSON_HPP_)
#error "a public header includes nlohmann/json; keep it in src/ and tests/"
#endif
#if defined(__CUDA_RUNTIME_H__) || defined(__CUDA_RUNTIME_API_H__)
#error "a public header includes the CUDA runtime; keep it in src/remap/*_cuda.cpp"
#endif
