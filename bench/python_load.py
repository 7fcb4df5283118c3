"""python_load.py - maploc.torch.load against torch.load and safetensors, side by side (issue 28, part 9).

Usage: python3 bench/python_load.py [--build build] [--work /tmp/maploc-pyload] [--runs 5]
                                    [--python .venv/bin/python] [--only w30k,resnet50,bf16_1g] [--json OUT]
  --build   a build holding libmaploc.so (its root: cmake -B DIR); the package is python/ of this tree
  --work    where the workloads are written (made with --python's torch the first time; never committed)
  --python  the interpreter (and so the torch) every row runs under; /usr/bin/python3 for Debian's 1.13
Workloads (bench/workloads.py's generators):
  w30k      30,000 tensors of 32x32 float32 (W1: a LoRA-like state_dict of small tensors), 123 MB
  resnet50  torchvision.models.resnet50().state_dict() (320 entries, 25.6M parameters, float32), 102 MB;
            bench/workloads.py's W6 (the same shapes by hand) where torchvision is missing
  bf16_1g   8 tensors of 8192x8192 bfloat16, 1 GiB
each with a safetensors twin (safetensors.torch.save_file of the same tensors).
Rows, each a fresh process per run; `import torch`, `import maploc.torch`, `import safetensors.torch` are
outside the timed region, which goes from the path to the returned state_dict on the CPU:
  maploc.torch.load            maploc.torch.load(path, map_location="cpu"): zero-copy copy-on-write pages
  maploc.torch.load mmap=False the same into private copies (every byte read)
  torch.load                   torch.load(path, map_location="cpu"), default arguments (torch >= 2.6:
                               weights_only=True; torch < 2.6: weights_only=False)
  torch.load weights_only=True only under torch < 2.6 (where it is not the default)
  torch.load weights_only=False
  torch.load mmap=True         weights_only default (torch >= 2.1)
  safetensors load_file        safetensors.torch.load_file(twin, device="cpu") (when safetensors imports)
  read file (page cache)       the physical reference: the .pth file's bytes read into one private buffer
One untimed run per row first (warm page cache) that also checks the result: the same keys (in order for
torch-format rows), container type, and per tensor its type, dtype, shape, stride and a sha256 of its
bytes, against torch.load(weights_only=False) of the same file. Any difference: the program prints it
and exits 1 (before printing a table). Then --runs timed runs: median, min, max; ratio = row / maploc.
"""
import argparse
import ctypes
import hashlib
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = ("w30k", "resnet50", "bf16_1g")
MAPLOC = "maploc.torch.load"
DEFAULT = "torch.load"
REFERENCE = "torch.load weights_only=False"


# ---------------------------------------------------------------- workloads (run under --python)

def generate(work, only):
    import torch
    sys.path.insert(0, HERE)
    import workloads
    os.makedirs(work, exist_ok=True)
    for wid in only:
        path = os.path.join(work, wid + ".pth")
        if os.path.exists(path) and os.path.exists(os.path.join(work, wid + ".safetensors")):
            continue
        from safetensors.torch import save_file
        gen = torch.Generator().manual_seed(28)
        how = ""
        if wid == "w30k":
            sd = workloads.w1(gen)
        elif wid == "resnet50":
            try:
                import torchvision
                torch.manual_seed(28)
                sd = torchvision.models.resnet50().state_dict()
                how = f"torchvision {torchvision.__version__}"
            except ImportError:
                sd = workloads.w6(gen)
                how = "bench/workloads.py W6 (no torchvision)"
        else:
            sd = {f"layers.{i}.weight": workloads.fill_bf16((8192, 8192), i) for i in range(8)}
        torch.save(sd, path)
        save_file(dict(sd), os.path.join(work, wid + ".safetensors"))
        n = sum(t.numel() for t in sd.values())
        print(f"{wid}: {len(sd)} tensors, {n} elements, {os.path.getsize(path)} bytes {how} -> {path}",
              file=sys.stderr)


# ---------------------------------------------------------------- one run (a fresh process)

def digest(obj, ordered):
    """What the check compares: container type, keys, and per tensor type, dtype, shape, stride, sha256."""
    import torch
    out = {"type": type(obj).__name__ if ordered else "mapping"}
    keys = list(obj.keys())
    out["keys"] = keys if ordered else sorted(keys)
    tensors = {}
    for k in keys:
        t = obj[k]
        if not isinstance(t, torch.Tensor):
            tensors[k] = repr(t)
            continue
        c = t.detach()
        if not c.is_contiguous():
            c = c.contiguous()
        n = c.numel() * c.element_size()
        h = hashlib.sha256()
        if n:
            h.update((ctypes.c_char * n).from_address(c.data_ptr()))
        tensors[k] = [type(t).__name__, str(t.dtype), list(t.shape), list(t.stride()), h.hexdigest()]
    out["tensors"] = tensors
    return out


def child(row, wid, work, check):
    import torch
    pth = os.path.join(work, wid + ".pth")
    if row.startswith("maploc"):
        import maploc.torch
    elif row.startswith("safetensors"):
        import safetensors.torch
    t0 = time.perf_counter()
    if row == MAPLOC:
        sd = maploc.torch.load(pth, map_location="cpu")
    elif row == MAPLOC + " mmap=False":
        sd = maploc.torch.load(pth, map_location="cpu", mmap=False)
    elif row == DEFAULT:
        sd = torch.load(pth, map_location="cpu")
    elif row == "torch.load weights_only=True":
        sd = torch.load(pth, map_location="cpu", weights_only=True)
    elif row == REFERENCE:
        sd = torch.load(pth, map_location="cpu", weights_only=False)
    elif row == "torch.load mmap=True":
        sd = torch.load(pth, map_location="cpu", mmap=True)
    elif row == "safetensors load_file":
        sd = safetensors.torch.load_file(os.path.join(work, wid + ".safetensors"), device="cpu")
    elif row == "read file (page cache)":
        with open(pth, "rb", buffering=0) as f:
            buf = bytearray(os.fstat(f.fileno()).st_size)
            f.readinto(buf)
        sd = {}
    else:
        raise SystemExit(f"unknown row {row}")
    total = time.perf_counter() - t0
    out = {"total_s": total, "tensors": len(sd), "torch": torch.__version__}
    if check and row != "read file (page cache)":
        out["digest"] = digest(sd, ordered=not row.startswith("safetensors"))
    print(json.dumps(out))


# ---------------------------------------------------------------- the driver

def run_child(a, env, row, wid, check):
    cmd = [a.python, os.path.abspath(__file__), "--child", row, wid, a.work] + (["--check"] if check else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def compare(ref, got):
    """The first difference between two digests, or None."""
    if got["type"] != "mapping" and ref["type"] != got["type"]:
        return f"container {got['type']} != {ref['type']}"
    ref_keys = ref["keys"] if got["type"] != "mapping" else sorted(ref["keys"])
    if got["keys"] != ref_keys:
        return f"keys differ ({len(got['keys'])} against {len(ref_keys)}; first: " \
               f"{next((k for k, j in zip(got['keys'], ref_keys) if k != j), '-')})"
    for k in ref_keys:
        a, b = ref["tensors"][k], got["tensors"][k]
        if a != b:
            if got["type"] == "mapping" and isinstance(a, list) and isinstance(b, list) \
                    and a[1:3] == b[1:3] and a[4] == b[4]:
                continue  # safetensors: contiguous copies (stride as torch's for contiguous tensors anyway)
            return f"tensor {k}: {b} != {a}"
    return None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], "--check" in sys.argv[5:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--generate":
        generate(sys.argv[2], sys.argv[3].split(","))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="/tmp/maploc-pyload")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    a.work = os.path.abspath(a.work)
    only = a.only.split(",")
    lib = os.path.abspath(os.path.join(a.build, "libmaploc.so"))
    env = dict(os.environ, MAPLOC_LIBRARY=lib,
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    subprocess.run([a.python, os.path.abspath(__file__), "--generate", a.work, ",".join(only)], env=env, check=True)
    probe = subprocess.run([a.python, "-c", "import torch, importlib.util as u; print(torch.__version__); "
                            "print(int(u.find_spec('safetensors') is not None))"],
                           env=env, capture_output=True, text=True, check=True).stdout.split()
    version, have_st = probe[0], probe[1] == "1"
    major_minor = tuple(int(x) for x in version.split("+")[0].split(".")[:2])
    rows = [MAPLOC, MAPLOC + " mmap=False", DEFAULT]
    if major_minor < (2, 6):
        rows.append("torch.load weights_only=True")
    rows.append(REFERENCE)
    if major_minor >= (2, 1):
        rows.append("torch.load mmap=True")
    if have_st:
        rows.append("safetensors load_file")
    rows.append("read file (page cache)")

    results, bad = {}, []
    for wid in only:
        # Checks: one untimed run per row (also the page-cache warm-up), against weights_only=False.
        checked = {row: run_child(a, env, row, wid, check=True) for row in rows}
        ref = checked[REFERENCE]
        if "error" in ref:
            raise SystemExit(f"{wid}: the reference failed: {ref['error']}")
        for row in rows:
            r = checked[row]
            if "error" in r:
                results[(wid, row)] = r
                if row in (MAPLOC, MAPLOC + " mmap=False"):
                    bad.append(f"{wid} {row}: {r['error']}")
                continue
            if "digest" in r:
                diff = compare(ref["digest"], r["digest"])
                if diff:
                    bad.append(f"{wid} {row}: {diff}")
        print(f"{wid}: checked {len(ref['digest']['keys'])} tensors, {len(rows) - 1} rows against "
              f"{REFERENCE}: {'OK' if not bad else 'DIFFERENT'}", file=sys.stderr, flush=True)
        if bad:
            break
        for row in rows:
            if "error" in results.get((wid, row), {}):
                continue
            samples = sorted(run_child(a, env, row, wid, check=False)["total_s"] for _ in range(a.runs))
            results[(wid, row)] = {"median_s": samples[len(samples) // 2], "min_s": samples[0],
                                   "max_s": samples[-1], "tensors": checked[row]["tensors"]}
    if bad:
        print("MISMATCH:\n  " + "\n  ".join(bad), file=sys.stderr)
        sys.exit(1)

    print(f"torch {version}, Python {platform.python_version()} ({a.python}), {a.runs} runs per row, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| workload | row | median s | min s | max s | row / maploc.torch.load |")
    print("|---|---|---|---|---|---|")
    for wid in only:
        mine = results[(wid, MAPLOC)]["median_s"]
        size = os.path.getsize(os.path.join(a.work, wid + ".pth"))
        for row in rows:
            r = results[(wid, row)]
            label = f"{wid} ({results[(wid, MAPLOC)]['tensors']} tensors, {size / 2**20:.0f} MiB)"
            if "error" in r:
                print(f"| {label} | {row} | - | - | - | cannot: {r['error'][:80]} |")
                continue
            print(f"| {label} | {row} | {r['median_s']:.4f} | {r['min_s']:.4f} | {r['max_s']:.4f} | "
                  f"{r['median_s'] / mine:.1f}x |")
    print("\nTargets (issue 28): maploc.torch.load >= 10x torch.load on w30k, >= 2x on resnet50, "
          "never slower than torch.load(mmap=True):")
    for wid in only:
        mine = results[(wid, MAPLOC)]["median_s"]
        d = results.get((wid, DEFAULT), {}).get("median_s")
        m = results.get((wid, "torch.load mmap=True"), {}).get("median_s")
        need = {"w30k": 10, "resnet50": 2}.get(wid)
        parts = []
        if d and need:
            parts.append(f"{d / mine:.1f}x torch.load (target {need}x: {'met' if d / mine >= need else 'MISSED'})")
        elif d:
            parts.append(f"{d / mine:.1f}x torch.load")
        if m:
            parts.append(f"{m / mine:.1f}x torch.load(mmap=True) ({'met' if m >= mine else 'MISSED'})")
        print(f"  {wid}: " + "; ".join(parts))
    if a.json:
        json.dump({"torch": version, "python": a.python, "runs": a.runs,
                   "results": {f"{w}|{r}": v for (w, r), v in results.items()}}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
