#!/usr/bin/env bash
# test.sh - installs what is missing, builds maploc and runs the whole test suite:
# once in the normal build, once under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh test

jobs=$(nproc)
cmake -S . -B build -DMAPLOC_CUDA="${MAPLOC_CUDA:-AUTO}" >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

cmake -S . -B build-asan -DMAPLOC_CUDA=OFF -DMAPLOC_SANITIZE=address,undefined >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
