"""cuda_compare.py - maploc.torch.load(f, map_location="cuda:0") against torch.load(f, map_location="cuda:0",
weights_only=True) on every fixture both read: the comparison of torch_compare.py (structure, values, dtypes,
Parameters, identity, storage sharing) on a GPU, where maploc places storages with its own pipeline and
hands them to torch by DLPack. Not a ctest (CI has no GPU): run on a GPU machine with torch built for CUDA.
Usage: python3 cuda_compare.py FIXTURES_DIR. Exit 77 without CUDA."""
import collections
import json
import os
import sys

import torch

import maploc
import maploc.torch
import torch_compare

if not torch.cuda.is_available():
    print("SKIP: no CUDA device")
    sys.exit(77)

fixtures = sys.argv[1]
with open(os.path.join(fixtures, "checkpoints", "index.json")) as f:
    index = json.load(f)
equal, skipped, failed, tensors = 0, [], [], 0
for entry in index:
    path = os.path.join(fixtures, "checkpoints", entry["file"])
    try:
        want = torch.load(path, map_location="cuda:0", weights_only=True)
    except Exception as e:
        skipped.append((entry["file"], f"torch: {type(e).__name__}"))
        continue
    try:
        got = maploc.torch.load(path, map_location="cuda:0")
    except maploc.Error as e:
        (skipped if e.code == 313 else failed).append((entry["file"], f"maploc {e.code_name}: {str(e)[:120]}"))
        continue
    c = torch_compare.Comparer(True)
    try:
        c.same(want, got, "")
        equal += 1
        tensors += c.tensors
    except torch_compare.Differ as e:
        failed.append((entry["file"], str(e)))
print(f"cuda:0 ({torch.cuda.get_device_name(0)}, torch {torch.__version__}): {equal} files equal, {tensors} tensors, "
      f"{len(skipped)} skipped, {len(failed)} differ")
for name, why in skipped:
    print("  SKIP", name, why)
for name, why in failed:
    print("  FAIL", name, why)
sys.exit(1 if failed else 0)
