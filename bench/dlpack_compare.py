"""dlpack_compare.py - torch.load against maploc.load then torch.from_dlpack, in-process, on W1 and W2.

Usage: python3 bench/dlpack_compare.py --build DIR --work DIR [--runs 5] [--python VENV_PYTHON]
  --build   a build holding libmaploc.so (its root: cmake -B DIR)
  --work    where w1.pth and w2.pth lie (bench/workloads.py DIR --only W1,W2 makes them)
Each row is a fresh process per run (one untimed run first, warm page cache); `import torch` and
`import maploc` are outside the timed region. The timed region goes from the path to a dict of
torch.Tensors on the CPU:
  torch.load            torch.load(path, map_location="cpu") (weights_only, torch's default)
  torch.load mmap       the same with mmap=True (pages read on first use)
  maploc view           maploc.load(path, "cpu") (zero-copy copy-on-write pages) + torch.from_dlpack each
  maploc copy           maploc.load(path, "cpu", host="copy") (private copies) + torch.from_dlpack each
  maploc view numpy     maploc view with numpy.from_dlpack each (a dict of numpy arrays)
  maploc copy numpy     maploc copy with numpy.from_dlpack each
Medians with min and max. Ratios are like for like: the materialised rows against torch.load
(every byte in private memory), the lazy ones against torch.load(mmap=True) (pages of the file); the
numpy rows end in numpy arrays, not torch tensors (what a numpy user would otherwise get from torch.load).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = ("torch.load", "torch.load mmap", "maploc view", "maploc copy", "maploc view numpy", "maploc copy numpy")


def child(row, path):
    """One measured load in this (fresh) process; prints a JSON line."""
    import torch
    if row.startswith("maploc"):
        sys.path.insert(0, os.path.join(HERE, "..", "python"))
        import maploc
        import numpy
        take = numpy.from_dlpack if row.endswith("numpy") else torch.from_dlpack
    t0 = time.perf_counter()
    if row == "torch.load":
        tensors = torch.load(path, map_location="cpu")
    elif row == "torch.load mmap":
        tensors = torch.load(path, map_location="cpu", mmap=True)
    else:
        host = "copy" if row.startswith("maploc copy") else "view"
        tensors = {k: take(v) for k, v in maploc.load(path, "cpu", host=host).items()}
    total = time.perf_counter() - t0
    print(json.dumps({"total_s": total, "tensors": len(tensors), "torch": torch.__version__}))


def measure(python, env, row, path, runs):
    cmd = [python, os.path.abspath(__file__), "--child", row, path]
    subprocess.run(cmd, env=env, capture_output=True, check=True)  # untimed: warms the page cache
    out = []
    for _ in range(runs):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    out.sort(key=lambda j: j["total_s"])
    med = dict(out[len(out) // 2])
    med.update(min_s=out[0]["total_s"], max_s=out[-1]["total_s"])
    return med


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default=os.path.join(HERE, "..", ".venv", "bin", "python"))
    a = ap.parse_args()
    env = dict(os.environ, MAPLOC_LIBRARY=os.path.abspath(os.path.join(a.build, "libmaploc.so")))
    peer = {row: "torch.load mmap" if row == "torch.load mmap" or row.startswith("maploc view") else "torch.load"
            for row in ROWS}
    print("| workload | row | median s | min s | max s | like-for-like torch row / row |")
    print("|---|---|---|---|---|---|")
    for wid in ("w1", "w2"):
        path = os.path.join(a.work, wid + ".pth")
        results = {row: measure(a.python, env, row, path, a.runs) for row in ROWS}
        for row in ROWS:
            r = results[row]
            base = results[peer[row]]["total_s"]
            print(f"| {wid.upper()} ({r['tensors']} tensors) | {row} | {r['total_s']:.4f} | {r['min_s']:.4f} | "
                  f"{r['max_s']:.4f} | {base / r['total_s']:.1f}x ({peer[row]}) |", flush=True)
    print(f"\ntorch {results['torch.load']['torch']}, {a.runs} runs per row")


if __name__ == "__main__":
    main()
