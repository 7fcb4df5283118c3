#!/usr/bin/env bash
# coverage-cuda.sh - how much of the real CUDA adapter (src/remap/cuda_runtime_backend.cpp) and the
# device half of remap the CI tests execute against the CUDA runtime stand-in: builds with gcov
# instrumentation in build-coverage, runs the stand-in tests (ctest '^remap_standin:'), and prints
# line and function coverage of each file with gcov. The figure in docs/cuda.md comes from here.
# Usage: bash tools/coverage-cuda.sh [BUILD_DIR]   (default build-coverage; needs gcc's gcov)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-coverage}
command -v gcov >/dev/null || { echo "coverage-cuda: gcov not found (it comes with gcc)" >&2; exit 1; }
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DMAPLOC_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS=--coverage -DCMAKE_C_FLAGS=--coverage -DCMAKE_EXE_LINKER_FLAGS=--coverage \
  -DCMAKE_SHARED_LINKER_FLAGS=--coverage >/dev/null
cmake --build "$dir" -j"$(nproc)" --target maploc_remap_standin_tests maploc_remap_cuda_tests maploc \
  maploc_cudart_standin >/dev/null
find "$dir" -name '*.gcda' -delete
ctest --test-dir "$dir" -R '^remap_standin:' --output-on-failure >"$dir/coverage-ctest.log" 2>&1 || {
  tail -30 "$dir/coverage-ctest.log"; echo "coverage-cuda: the stand-in tests failed" >&2; exit 1; }
grep -E "tests passed|tests failed" "$dir/coverage-ctest.log"
objects="$dir/src/remap/CMakeFiles/maploc_remap_objects.dir"
echo "file | lines executed | functions executed"
for f in cuda_runtime_backend upload device_memory; do
  out=$(cd "$objects" && gcov -n -f "$f.cpp.gcda" 2>/dev/null)
  # gcov -f prints one block per function, then the file's own summary (the last 'Lines' line).
  lines=$(printf '%s\n' "$out" | awk -v f="$f.cpp" '$0 ~ "^File .*"f"\x27" {found=1} found && /^Lines executed/ {print; exit}')
  funcs=$(printf '%s\n' "$out" | awk '/^Function/ {n++; getline; if ($0 !~ /:0.00%/) e++} END {printf "%d of %d", e, n}')
  echo "src/remap/$f.cpp | ${lines#Lines executed:} | $funcs"
done
echo
echo "Functions of cuda_runtime_backend.cpp never executed:"
(cd "$objects" && gcov -n -f cuda_runtime_backend.cpp.gcda 2>/dev/null) |
  awk '/^Function/ {name=$2; getline; if ($0 ~ /:0.00%/) print "  " name}' | c++filt
