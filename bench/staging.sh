#!/usr/bin/env bash
# staging.sh - the host half of a CUDA load on this machine (no GPU needed): reader threads
# pread a file into the pinned-style staging ring, against plain pread of the same file in the
# same run, for several ring shapes. Prints the markdown table docs/cuda.md records.
# Usage: bash bench/staging.sh [SIZE_GB (default 2)] [extra maploc_bench_staging options]
#   MAPLOC_BENCH_DIR    where the test file goes (default /tmp/maploc-bench; never committed)
#   MAPLOC_BENCH_BUILD  build folder (default build-bench)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MAPLOC_BENCH_BUILD:-$root/build-bench}
work=${MAPLOC_BENCH_DIR:-/tmp/maploc-bench}
gb=${1:-2}
shift || true
# A fresh folder is configured Release; an existing one is used as it is (its build type is printed).
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMAPLOC_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target maploc_bench_staging >/dev/null
mkdir -p "$work"
file="$work/staging-${gb}g.bin"
if [ ! -f "$file" ]; then  # incompressible bytes, so no file system shortcut flatters the reads
  head -c "$((gb * 1000 * 1000 * 1000))" /dev/urandom > "$file.tmp" && mv "$file.tmp" "$file"
fi
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2 / 1e6}' /proc/meminfo) RAM," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)," \
     "build type $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")"
"$build/bench/maploc_bench_staging" "$file" "$@"
