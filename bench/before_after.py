"""before_after.py - two builds of maploc side by side: is the new one no slower than the old one?

Usage: python3 bench/before_after.py --old-cli PATH --old-lib PATH --new-cli PATH --new-lib PATH --work DIR
                                     [--runs 7] [--python /usr/bin/python3] [--pin CPU] [--json OUT]
  --old-cli, --new-cli  the two builds' `maploc` executables
  --old-lib, --new-lib  their libmaploc.so (given to python/maploc of this tree as MAPLOC_LIBRARY, so both
                        sides run the same Python package and differ only by the library)
  --work                where the workloads are written (made with --python's torch the first time; never
                        committed)
  --python              the interpreter (and so the torch) the Python rows run under; /usr/bin/python3 for
                        Debian's 1.13
  --runs                timed runs per build and row (default 7)
  --pin                 run every timed process on that one CPU (sched_setaffinity, inherited): on a shared
                        2-core VM it narrows the spread of rows of a few milliseconds
Workloads (bench/workloads.py's generators, seeded as workloads.py seeds them):
  w1   W1: 30,000 tensors of 32x32 float32 (a LoRA-like state_dict of small tensors), 123 MB
  w6   W6: ResNet-50's state_dict shapes (320 entries, 25.6M parameters, float32), 102 MB
Rows, per workload, each run a fresh process under GNU time (/usr/bin/time, bench/proc_run.py):
  ls --json            `maploc ls --json FILE`, stdout to /dev/null; wall time of the process
  load --host copy     `maploc load FILE --host copy`: every byte placed on the CPU as private copies (no
                       hashing), stdout to /dev/null; wall time of the process
  maploc.torch.load    maploc.torch.load(FILE, map_location="cpu") in a fresh --python process; `import torch`
                       and `import maploc.torch` are outside the timed region, which goes from the path to the
                       returned dict (time.perf_counter inside the child)
Before any timing, the two builds must agree: `ls --json FILE` byte-equal, and `load FILE --host copy --hash`
(run once each, untimed) the same sha256 for every tensor. Any difference, or any command that exits
non-zero, prints what and exits 1 (before printing a table).
Per row: one untimed warm-up of old, then of new (warm page cache), then --runs pairs run alternately
(old, new, old, new, ...) so that drifting machine load falls on both alike. Printed: median, min, max wall
seconds of old and of new, the median of the per-pair ratios new/old (1.00: the same; above 1: new slower,
1.10 = 10% slower; below 1: new faster), and the median peak RSS (MB) of each.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import proc_run  # noqa: E402  (standard library only; GNU time)

WORKLOADS = (("w1", "W1"), ("w6", "W6"))
ROWS = ("ls --json", "load --host copy", "maploc.torch.load")


# ---------------------------------------------------------------- workloads (run under --python)

def generate(work):
    import torch
    import workloads
    os.makedirs(work, exist_ok=True)
    for name, wid in WORKLOADS:
        path = os.path.join(work, name + ".pth")
        if os.path.exists(path):
            continue
        gen = torch.Generator().manual_seed(int(wid[1:]))
        sd = {"W1": workloads.w1, "W6": workloads.w6}[wid](gen)
        torch.save(sd, path + ".tmp")
        os.replace(path + ".tmp", path)
        print(f"{name}: {wid}, {len(sd)} tensors, {os.path.getsize(path)} bytes -> {path}", file=sys.stderr)
        del sd


# ---------------------------------------------------------------- one Python run (a fresh process)

def child(path):
    import maploc.torch
    import time
    t0 = time.perf_counter()
    sd = maploc.torch.load(path, map_location="cpu")
    total = time.perf_counter() - t0
    from maploc import _capi
    print(json.dumps({"total_s": total, "tensors": len(sd), "library": _capi.library_path}))


# ---------------------------------------------------------------- the driver

def fail(what):
    print(f"FAILED: {what}", file=sys.stderr)
    sys.exit(1)


def output_of(cmd, env=None):
    """stdout of a command that must succeed (untimed)."""
    r = subprocess.run(cmd, env=env, capture_output=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.decode(errors='replace').strip()[-300:]}")
    return r.stdout


def hashes(out):
    """The '<sha256>  name' lines of `maploc load --hash` (the timing lines around them differ run to run)."""
    lines = [ln for ln in out.decode(errors="replace").splitlines()
             if len(ln) > 66 and ln[64:66] == "  " and all(c in "0123456789abcdef" for c in ln[:64])]
    return lines


class Side:
    def __init__(self, label, cli, lib, python):
        self.label, self.cli, self.lib, self.python = label, os.path.abspath(cli), os.path.abspath(lib), python
        # The Python row's environment, set by env(1) inside GNU time (proc_run.once has no env argument).
        self.env = ["/usr/bin/env", "MAPLOC_LIBRARY=" + self.lib, "PYTHONPATH=" + os.pathsep.join(
            [os.path.join(ROOT, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])]
        for p in (self.cli, self.lib):
            if not os.path.isfile(p):
                fail(f"{label}: {p} does not exist")

    def command(self, row, path):
        if row == "ls --json":
            return [self.cli, "ls", "--json", path]
        if row == "load --host copy":
            return [self.cli, "load", path, "--host", "copy"]
        return self.env + [self.python, os.path.abspath(__file__), "--child", path]

    def once(self, row, path):
        """One fresh process: wall seconds (inside the child for the Python row), peak RSS MB."""
        cmd = self.command(row, path)
        with tempfile.TemporaryFile() as out:
            r = proc_run.once(cmd, stdout=out)
            out.seek(0)
            text = out.read().decode(errors="replace")
        if r["rc"] != 0:
            fail(f"{self.label}: {' '.join(cmd)} exited {r['rc']}: {r['stderr'].strip()}")
        wall = r["wall_s"]
        if row == "maploc.torch.load":
            try:
                got = json.loads(text.strip().splitlines()[-1])
                wall = got["total_s"]
            except (ValueError, IndexError, KeyError):
                fail(f"{self.label}: {' '.join(cmd)} printed no timing: {text[-300:]!r}")
            if os.path.realpath(got["library"]) != os.path.realpath(self.lib):
                fail(f"{self.label}: maploc.torch loaded {got['library']}, not {self.lib}")
        return wall, r["rss_mb"]


def summary(samples):
    walls = [w for w, _ in samples]
    return {"median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
            "rss_mb": statistics.median(m for _, m in samples), "runs_s": walls}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--generate":
        generate(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-cli", required=True)
    ap.add_argument("--old-lib", required=True)
    ap.add_argument("--new-cli", required=True)
    ap.add_argument("--new-lib", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--json", default="")
    ap.add_argument("--pin", type=int, default=None)
    a = ap.parse_args()
    if a.pin is not None:
        os.sched_setaffinity(0, {a.pin})  # children (GNU time and what it runs) inherit it
    if a.runs < 1:
        fail("--runs must be at least 1")
    a.work = os.path.abspath(a.work)
    old = Side("old", a.old_cli, a.old_lib, a.python)
    new = Side("new", a.new_cli, a.new_lib, a.python)
    gen = subprocess.run([a.python, os.path.abspath(__file__), "--generate", a.work])
    if gen.returncode != 0:
        fail(f"{a.python} {__file__} --generate {a.work} exited {gen.returncode}")

    # Like for like: the two builds must read every workload the same way before they are timed.
    for name, _ in WORKLOADS:
        path = os.path.join(a.work, name + ".pth")
        lo, ln = (output_of(s.command("ls --json", path)) for s in (old, new))
        if lo != ln:
            fail(f"{name}: `ls --json` differs between old ({len(lo)} bytes) and new ({len(ln)} bytes)")
        ho, hn = (hashes(output_of([s.cli, "load", path, "--host", "copy", "--hash"])) for s in (old, new))
        if not ho:
            fail(f"{name}: `load --host copy --hash` printed no hashes")
        if ho != hn:
            first = next((f"{x!r} against {y!r}" for x, y in zip(ho, hn) if x != y),
                         f"{len(ho)} against {len(hn)} tensors")
            fail(f"{name}: `load --host copy --hash` differs between old and new: {first}")
        print(f"{name}: old and new agree (ls --json {len(lo)} bytes, {len(ho)} tensor hashes)",
              file=sys.stderr, flush=True)

    results = {}
    for name, wid in WORKLOADS:
        path = os.path.join(a.work, name + ".pth")
        for row in ROWS:
            old.once(row, path)   # warm-up, untimed
            new.once(row, path)
            so, sn = [], []
            for _ in range(a.runs):
                so.append(old.once(row, path))
                sn.append(new.once(row, path))
            ro, rn = summary(so), summary(sn)
            ratio = statistics.median(n[0] / o[0] for o, n in zip(so, sn))
            results[(name, row)] = {"old": ro, "new": rn, "ratio": ratio}
            print(f"{name} {row}: old {ro['median_s']:.4f} s, new {rn['median_s']:.4f} s, new/old {ratio:.2f}",
                  file=sys.stderr, flush=True)

    torch_version = output_of([a.python, "-c", "import torch; print(torch.__version__)"]).decode().strip()
    print(f"old: {old.cli}, {old.lib}\nnew: {new.cli}, {new.lib}")
    print(f"torch {torch_version}, Python {platform.python_version()} ({a.python}), {a.runs} alternating pairs "
          f"per row after one warm-up each, {os.cpu_count()} CPUs"
          f"{'' if a.pin is None else f' (timed runs pinned to cpu {a.pin})'}, load average {os.getloadavg()[0]:.1f} "
          f"at the end\n")
    print("| workload | row | old median s | old min s | old max s | new median s | new min s | new max s "
          "| new/old (median of pairs) | old RSS MB | new RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, wid in WORKLOADS:
        size = os.path.getsize(os.path.join(a.work, name + ".pth"))
        for row in ROWS:
            r = results[(name, row)]
            o, n = r["old"], r["new"]
            print(f"| {name} ({wid}, {size / 2**20:.0f} MiB) | {row} | {o['median_s']:.4f} | {o['min_s']:.4f} | "
                  f"{o['max_s']:.4f} | {n['median_s']:.4f} | {n['min_s']:.4f} | {n['max_s']:.4f} | "
                  f"{r['ratio']:.2f} | {o['rss_mb']:.0f} | {n['rss_mb']:.0f} |")
    print("\nnew/old: the median over the runs of new's wall time / old's in the same pair; "
          "above 1.00 the new build is slower.")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"old": {"cli": old.cli, "lib": old.lib}, "new": {"cli": new.cli, "lib": new.lib},
                       "torch": torch_version, "python": a.python, "runs": a.runs,
                       "results": {f"{w}|{r}": v for (w, r), v in results.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
