#!/usr/bin/env python3
"""bench_write.py - the benchmark's checkpoint: bf16 tensors of 64-256 MiB, about SIZE in all.

    python3 tools/gpu/bench_write.py torch OUT.pt --mib SIZE [--safetensors OUT.safetensors] [--hashes H.json]
    python3 tools/gpu/bench_write.py stdlib OUT.safetensors --mib SIZE [--hashes H.json]

torch: a state_dict {"layers.N.weight": bf16 [rows, 4096]} saved by torch.save (and, with
--safetensors, by safetensors.torch.save_file), random values made on cuda:0 when torch has a
device (fast), else on the CPU. stdlib: the same shapes written as a safetensors file by hand
from random bytes, no torch (the dry run converts it with `maploc convert`). --hashes: each
tensor's sha256 (its bytes, row-major: fixtures/generate.py's definition) as {name: sha256}.
Tensor sizes cycle 256, 128, 64 MiB (16, 8, 4 MiB below 1 GiB); the last one takes what is left.
"""
import argparse
import hashlib
import json
import os
import struct

COLS = 4096  # bf16 columns: one row is 8 KiB
ROW = COLS * 2


def shapes(mib):
    left, out, i = mib << 20, [], 0
    cycle = (256, 128, 64) if mib >= 1024 else (16, 8, 4)  # small (dry run): several storages
    while left >= ROW:
        n = min(cycle[i % 3] << 20, left)
        out.append(("layers.%d.weight" % i, n // ROW))
        left -= n // ROW * ROW
        i += 1
    return out


def write_torch(a):
    import torch
    cuda = torch.cuda.is_available()
    sd, hashes = {}, {}
    for name, rows in shapes(a.mib):
        if cuda:
            t = torch.randn(rows, COLS, device="cuda:0", dtype=torch.bfloat16).cpu()
        else:
            t = torch.randn(rows, COLS).to(torch.bfloat16)
        sd[name] = t
        if a.hashes:
            hashes[name] = hashlib.sha256(t.contiguous().view(torch.int16).numpy().tobytes()).hexdigest()
    torch.save(sd, a.out)
    if a.safetensors:
        try:
            from safetensors.torch import save_file
        except ImportError:
            print("no safetensors package for this python: %s not written" % a.safetensors)
        else:
            save_file(sd, a.safetensors)
    return hashes


def write_stdlib(a):
    header, hashes, offset, blobs = {}, {}, 0, []
    for name, rows in shapes(a.mib):
        n = rows * ROW
        header[name] = {"dtype": "BF16", "shape": [rows, COLS], "data_offsets": [offset, offset + n]}
        offset += n
        blobs.append((name, n))
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, n in blobs:
            b = os.urandom(n)
            hashes[name] = hashlib.sha256(b).hexdigest()
            f.write(b)
    return hashes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("how", choices=("torch", "stdlib"))
    ap.add_argument("out")
    ap.add_argument("--mib", type=int, required=True)
    ap.add_argument("--safetensors")
    ap.add_argument("--hashes")
    a = ap.parse_args()
    hashes = write_torch(a) if a.how == "torch" else write_stdlib(a)
    if a.hashes:
        with open(a.hashes, "w") as f:
            json.dump(hashes, f, indent=0)
    print("wrote %s: %d tensors, %d MiB" % (a.out, len(shapes(a.mib)), os.path.getsize(a.out) >> 20))


if __name__ == "__main__":
    main()
