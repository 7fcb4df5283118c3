"""hash_compare.py - `maploc load --hash` of one large tensor against `openssl dgst -sha256` of the same file.

Usage: python hash_compare.py --maploc BIN --work DIR [--gib 1] [--runs 5]
Makes WORK/hash_<N>gib.pt (one uint8 tensor of N GiB, written by torch) unless it exists, then times
both commands in fresh processes, warm page cache, one core's work each (one storage: one hashing
thread). The target of issue 17: maploc within 1.3x of openssl.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proc_run  # noqa: E402


def make(path, gib):
    import torch
    n = int(gib * (1 << 30))
    t = torch.arange(n, dtype=torch.int64).remainder_(251).to(torch.uint8)
    torch.save({"blob": t}, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--maploc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    path = os.path.join(a.work, "hash_%sgib.pt" % a.gib)
    if not os.path.exists(path):
        make(path, a.gib)
    ours = proc_run.repeat([a.maploc, "load", path, "--hash"], a.runs)
    ref = proc_run.repeat(["openssl", "dgst", "-sha256", path], a.runs)
    print("file: %s (%.2f GiB)" % (os.path.basename(path), os.path.getsize(path) / (1 << 30)))
    print("maploc load --hash      %s" % proc_run.fmt(ours))
    print("openssl dgst -sha256    %s" % proc_run.fmt(ref))
    print("ratio maploc/openssl: %.2fx (target <= 1.3x)" % (ours["median_s"] / ref["median_s"]))
    got = subprocess.run([a.maploc, "load", path, "--hash"], capture_output=True, text=True).stdout
    print("hash line:", [l for l in got.splitlines() if l.endswith("  blob")][0][:20] + "...")


if __name__ == "__main__":
    main()
