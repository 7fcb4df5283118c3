#!/usr/bin/env bash
# run.sh - the one benchmark command: Release build, workloads made by real torch, every runner, docs/performance.md.
# Usage: bash bench/run.sh [--quick] [--runs N] [--regen]
#   MAPLOC_BENCH_DIR  where workloads and results.json go (default /tmp/maploc-bench; never committed)
#   MAPLOC_BENCH_BUILD  build folder (default build-bench)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MAPLOC_BENCH_BUILD:-$root/build-bench}
work=${MAPLOC_BENCH_DIR:-/tmp/maploc-bench}
venv=$root/.venv/bin/python  # made by tools/make-venv.sh
regen=0
args=()
for a in "$@"; do
  if [ "$a" = --regen ]; then regen=1; else args+=("$a"); fi
done

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMAPLOC_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target maploc maploc_bench_load maploc_bench_physical >/dev/null

# LibTorch's C++ reader as a peer, when Debian's libtorch-dev is installed (apt-get install libtorch-dev).
if [ -f /usr/include/torch/csrc/jit/serialization/pickle.h ] &&
   [ ! "$build/maploc_bench_libtorch" -nt "$root/bench/libtorch_peer.cpp" ]; then
  g++ -O2 -std=c++17 "$root/bench/libtorch_peer.cpp" -o "$build/maploc_bench_libtorch" \
    -I/usr/include/torch/csrc/api/include -ltorch -ltorch_cpu -lc10 2>/dev/null ||
    echo "run.sh: LibTorch peer did not build; it is left out" >&2
fi

"$venv" -c "import safetensors" 2>/dev/null || "$venv" -m pip install -q safetensors

# W4 is sized to the machine: about 17% of RAM, at most 12 GB (its twin and a materialised copy must fit too).
ram_gb=$(awk '/MemTotal/ {print $2 / 1e6}' /proc/meminfo)
w4_gb=$(python3 -c "print(round(min(12.0, max(1.0, $ram_gb * 0.17)), 1))")
if [ $regen = 1 ] || [ ! -f "$work/manifest.json" ] || ! grep -q '"W4"' "$work/manifest.json"; then
  "$venv" "$root/bench/workloads.py" "$work" --maploc "$build/src/cli/maploc" --w4-gb "$w4_gb"
fi
if pgrep -f fuzz_ >/dev/null; then echo "run.sh: a fuzzer is running; figures will say so" >&2; fi
python3 "$root/bench/run.py" --build "$build" --work "$work" "${args[@]}"
echo "run.sh: tables written to docs/performance.md; raw results in $work/results.json" >&2
