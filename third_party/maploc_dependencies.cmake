# maploc_dependencies.cmake - finds every outside dependency; see third_party/README.md.
find_package(ZLIB 1.2.11 REQUIRED)   # zlib1g-dev: inflate for deflated zip records
find_package(OpenSSL 3.0 REQUIRED COMPONENTS Crypto)   # libssl-dev: SHA-256 (libcrypto's EVP), privately
# libdlpack-dev (header only): DLPack's structs in include/maploc/remap/dlpack.h and maploc_c.h.
find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h)
if(NOT DLPACK_INCLUDE_DIR)
  message(FATAL_ERROR "dlpack/dlpack.h not found: install libdlpack-dev (tools/install-deps.sh)")
endif()
find_package(ISAL 2.30 REQUIRED)     # libisal-dev (third_party/FindISAL.cmake): CRC-32, privately
find_package(ZSTD 1.4 REQUIRED)      # libzstd-dev (third_party/FindZSTD.cmake): DCP stream.zstd items, privately
find_package(CURL 7.75 REQUIRED)     # libcurl4-openssl-dev: http(s) and s3 sources (SigV4), privately; docs/remote.md

if(MAPLOC_BUILD_TESTS)
  # nlohmann-json3-dev (3.11): golden files and manifests in tests only (the CLI writes its JSON
  # with src/cli/json_writer.h).
  find_package(nlohmann_json 3.10 REQUIRED)
endif()

if(MAPLOC_BUILD_TESTS)
  # catch2 (Debian ships 2.13): Catch2::Catch2 and catch_discover_tests.
  find_package(Catch2 2.13 REQUIRED)
  include(Catch)
endif()

# The CUDA adapter (src/remap/cuda_runtime_backend.cpp) needs nothing of the toolkit: it declares
# the runtime API it uses (src/remap/cuda_api.h) and loads libcudart with dlopen. So AUTO and ON
# build it on every machine; OFF leaves it out.
if(MAPLOC_CUDA STREQUAL "OFF")
  set(MAPLOC_HAVE_CUDA OFF)
else()
  set(MAPLOC_HAVE_CUDA ON)
endif()
# The toolkit, where installed, serves two things only: the check of cuda_api.h against the real
# cuda_runtime_api.h (tests/remap) and the physical host-to-device reference (bench/), which links
# libcudart. Found quietly: neither is needed to build or test maploc.
find_package(CUDAToolkit QUIET)
message(STATUS "maploc: CUDA backend ${MAPLOC_HAVE_CUDA}; CUDA toolkit headers: ${CUDAToolkit_FOUND}")
