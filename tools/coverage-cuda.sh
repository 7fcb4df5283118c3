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
out="$dir/coverage-gcov"
rm -rf "$out" && mkdir -p "$out"
echo "file | lines executed"
for f in cuda_runtime_backend upload device_memory; do
  summary=$(cd "$out" && gcov "$OLDPWD/$objects/$f.cpp.gcda" 2>/dev/null |
            awk -v f="$f.cpp" '$0 ~ "^File .*"f"\x27" {found=1} found && !done && /^Lines executed/ {print; done=1}')
  echo "src/remap/$f.cpp | ${summary#Lines executed:}"
done
echo
echo "Lines of cuda_runtime_backend.cpp never executed:"
# A line listed once per template instantiation or destructor variant counts as executed when any
# of its listings ran.
awk -F: '$1 ~ /[0-9#]/ { n = $2 + 0; c = $1; gsub(/ /, "", c); text[n] = substr($0, index($0, $3));
                         if (c != "#####" && c != "=====") ran[n] = 1; else seen[n] = 1 }
         END { for (n in seen) if (!(n in ran)) printf "  %d:%s\n", n, text[n] }' \
  "$out/cuda_runtime_backend.cpp.gcov" | sort -t: -k1,1n
