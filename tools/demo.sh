#!/usr/bin/env bash
# demo.sh - the main job: builds the maploc CLI, inspects a checkpoint that torch saved
# with storages tagged cuda:0 and cuda:1, shows where each storage will go, and loads
# it onto the CPU (or onto the GPU with MAP=auto on a machine that has one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh build   # build dependencies only: the main job installs no Python and no torch
cmake -S . -B build-demo -DMAPLOC_CUDA="${MAPLOC_CUDA:-AUTO}" -DMAPLOC_BUILD_TESTS=OFF -DMAPLOC_BUILD_BENCH=OFF >/dev/null
cmake --build build-demo -j"$(nproc)" --target maploc >/dev/null
checkpoint=${1:-fixtures/checkpoints/gpu_tagged.t113.pt}
map=${MAP:-cuda:*->cpu}
set -x
./build-demo/src/cli/maploc ls "$checkpoint"
./build-demo/src/cli/maploc plan "$checkpoint" --map-location "$map"
./build-demo/src/cli/maploc load "$checkpoint" --map-location "$map" --hash
