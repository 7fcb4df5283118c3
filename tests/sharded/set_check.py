#!/usr/bin/env python3
"""set_check.py MAPLOC FIXTURES WORK - torch and the safetensors package read the sets maploc writes.

For each fixture set: `maploc convert SET OUT --to safetensors --shard-size 1KB` and
`maploc remap SET OUT --map-location cpu --shard-size 1KB`; every shard is read by
safetensors.torch.load_file / torch.load(weights_only=True), the values hashed against the set's
torch-made manifest, the index's weight_map checked against the shards, and (safetensors) the data
section found to start at a multiple of 64 with each tensor at a multiple of its element size.
Exits 77 (skipped) when torch or safetensors is not importable, 1 instead when
MAPLOC_SAFETENSORS_REQUIRED=1 (tools/test.sh installs them).
"""
import ctypes
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import torch
    from safetensors.torch import load_file
except ImportError as e:
    if os.environ.get("MAPLOC_SAFETENSORS_REQUIRED") == "1":
        print(f"FAILED: {e} ({sys.executable}) although MAPLOC_SAFETENSORS_REQUIRED=1")
        sys.exit(1)
    print(f"skipped: {e}")
    sys.exit(77)


def sha(t):
    c = t.contiguous()
    return hashlib.sha256(ctypes.string_at(c.data_ptr(), c.numel() * c.element_size())).hexdigest()


def main():
    maploc, fixtures, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for name in ("st_set", "bin_set", "mixed_set", "dcp_two"):
        src = os.path.join(fixtures, "sharded", name)
        manifest = json.load(open(os.path.join(src, "manifest.json")))
        for kind in ("safetensors", "torch"):
            out = os.path.join(work, f"{name}_{kind}")
            cmd = ([maploc, "convert", src, out, "--to", "safetensors", "--duplicate-tied"] if kind == "safetensors"
                   else [maploc, "remap", src, out, "--map-location", "cpu"])
            subprocess.run(cmd + ["--shard-size", "1KB", "--quiet"], check=True, stdout=subprocess.DEVNULL)
            index = [f for f in os.listdir(out) if f.endswith(".index.json")]
            assert len(index) == 1, index
            weight_map = json.load(open(os.path.join(out, index[0])))["weight_map"]
            got = {}
            for f in sorted(set(weight_map.values())):
                path = os.path.join(out, f)
                part = load_file(path) if kind == "safetensors" else torch.load(path, weights_only=True)
                assert {k for k, v in weight_map.items() if v == f} == set(part), (name, f)
                got.update(part)
                if kind == "safetensors":
                    n = struct.unpack("<Q", open(path, "rb").read(8))[0]
                    assert (8 + n) % 64 == 0, (path, n)
                    header = json.loads(open(path, "rb").read(8 + n)[8:])
                    for k, v in header.items():
                        if k != "__metadata__":
                            assert v["data_offsets"][0] % part[k].element_size() == 0, (path, k)
            for e in manifest["tensors"]:
                assert sha(got[e["name"]]) == e["sha256"], (name, kind, e["name"])
            print(f"ok {name} -> {kind}: {len(set(weight_map.values()))} shards, {len(got)} tensors")


if __name__ == "__main__":
    main()
