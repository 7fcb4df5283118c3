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

set(MAPLOC_HAVE_CUDA OFF)
if(NOT MAPLOC_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(MAPLOC_HAVE_CUDA ON)
  elseif(MAPLOC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MAPLOC_CUDA=ON but no CUDA compiler was found (install the CUDA toolkit or set MAPLOC_CUDA=OFF)")
  endif()
endif()
message(STATUS "maploc: CUDA backend ${MAPLOC_HAVE_CUDA}")
