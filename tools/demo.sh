#!/usr/bin/env bash
# demo.sh - the main job: builds the maploc CLI and inspects a checkpoint saved
# with storages tagged cuda:0 and cuda:1 (fixtures/checkpoints/gpu_tagged.t113.pt).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake -S . -B build -DMAPLOC_CUDA="${MAPLOC_CUDA:-AUTO}" >/dev/null
cmake --build build -j"$(nproc)" --target maploc >/dev/null
checkpoint=${1:-fixtures/checkpoints/gpu_tagged.t113.pt}
./build/src/cli/maploc ls "$checkpoint"
