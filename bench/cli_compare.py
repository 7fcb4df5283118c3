"""cli_compare.py - the commands users type, measured against the library and against torch.load, in one run.

Usage: python3 bench/cli_compare.py --build DIR --work DIR [--runs 7] [--python VENV_PYTHON]
  --build   a Release build with maploc, maploc_bench_load and maploc_bench_physical (bench/run.sh makes build-bench)
  --work    where the workloads lie or are made (bench/workloads.py --only W1,W6)
Rows (issue 17's targets; benchmarks, never timed tests):
  1. W1 (30,000 tensors): every CLI command's whole process against `maploc_bench_load --mode lazy`'s whole
     process (target within 1.5x), with peak RSS and page faults from GNU time.
  2. `ls --json` on W1 against torch.load in-process (import excluded; bench/peers.py), target >= 20x;
     peak RSS of `ls --json` against `load`'s (target within 2x).
  3. W1's lazy open + index in-process (`maploc_bench_load --mode lazy`, target 20 ms) against
     torch.load(mmap=True) in-process, with page faults.
  4. W6 (ResNet-50's state_dict shapes, 102 MB): maploc's private copy (`--mode materialised`, `load --host copy`)
     against torch.load and against pread into fresh memory (bench/physical_reference.cpp), target >= 2x torch.load.
Fresh processes, warm page cache, one untimed run first; medians with min and max.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import proc_run  # noqa: E402


def in_process(cmd, runs):
    """Median of the `total_s` that a runner (maploc_bench_load, peers.py) prints, over fresh processes."""
    subprocess.run(cmd, capture_output=True)
    out = []
    for _ in range(runs):
        r = subprocess.run(cmd, capture_output=True, text=True)
        line = (r.stdout.strip().splitlines() or ["{}"])[-1]
        j = json.loads(line)
        if "total_s" not in j:
            raise RuntimeError("%s: %s %s" % (" ".join(cmd), line, r.stderr[-300:]))
        out.append(j)
    out.sort(key=lambda j: j["total_s"])
    med = dict(out[len(out) // 2])
    med.update(min_s=out[0]["total_s"], max_s=out[-1]["total_s"], runs=runs)
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--python", default=os.path.join(HERE, "..", ".venv", "bin", "python"))
    a = ap.parse_args()
    maploc = os.path.join(a.build, "src/cli/maploc")
    load = os.path.join(a.build, "bench/maploc_bench_load")
    phys = os.path.join(a.build, "bench/maploc_bench_physical")
    peers = os.path.join(HERE, "peers.py")
    w1, w6 = os.path.join(a.work, "w1.pth"), os.path.join(a.work, "w6.pth")
    missing = [w for w, p in (("W1", w1), ("W6", w6)) if not os.path.exists(p)]
    if missing:
        subprocess.run([a.python, os.path.join(HERE, "workloads.py"), a.work, "--only", ",".join(missing)],
                       check=True)
    res = {"runs": a.runs, "w1": {}, "w6": {}}
    torch_version = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                   text=True).stdout.strip()

    print("## W1 (30,000 tensors): whole process, median of %d (min-max), peak RSS, page faults" % a.runs)
    print()
    print("| command | median | min | max | vs bench_load lazy | peak RSS | faults |")
    print("|---|---|---|---|---|---|---|")
    base = proc_run.repeat([load, w1, "--mode", "lazy"], a.runs)
    res["w1"]["maploc_bench_load --mode lazy"] = base
    forms = ["ls", "ls --json", "plan", "plan --json", "load", "load --json", "load --hash", "verify",
             "verify --json", "dis", "dis --json"]
    rows = [("maploc_bench_load --mode lazy", base)]
    for f in forms:
        r = proc_run.repeat([maploc] + f.split() + [w1], a.runs)
        res["w1"]["maploc " + f] = r
        rows.append(("maploc " + f, r))
    for name, r in rows:
        print("| `%s` | %.1f ms | %.1f | %.1f | %.2fx | %.0f MB | %d |" % (
            name, r["median_s"] * 1e3, r["min_s"] * 1e3, r["max_s"] * 1e3, r["median_s"] / base["median_s"],
            r["rss_mb"], r["faults"]))
    print()

    tl = in_process([a.python, peers, "torch_load", "materialised", w1], max(3, a.runs // 2))
    tm = in_process([a.python, peers, "torch_load_mmap", "lazy", w1], max(3, a.runs // 2))
    res["w1"]["torch.load"], res["w1"]["torch.load(mmap=True)"] = tl, tm
    ls_json, ld = res["w1"]["maploc ls --json"], res["w1"]["maploc load"]
    print("## W1: `ls --json` (whole process) against torch.load %s in-process (import excluded)" % torch_version)
    print()
    print("| runner | median | min | max |")
    print("|---|---|---|---|")
    print("| `maploc ls --json`, whole process | %.1f ms | %.1f | %.1f |" % (
        ls_json["median_s"] * 1e3, ls_json["min_s"] * 1e3, ls_json["max_s"] * 1e3))
    for name, r in (("torch.load(map_location='cpu')", tl), ("torch.load(mmap=True)", tm)):
        print("| `%s`, in-process | %.1f ms | %.1f | %.1f |" % (name, r["total_s"] * 1e3, r["min_s"] * 1e3,
                                                           r["max_s"] * 1e3))
    print()
    print("torch.load / ls --json: %.1fx (target >= 20x); torch.load(mmap=True) / ls --json: %.1fx" % (
        tl["total_s"] / ls_json["median_s"], tm["total_s"] / ls_json["median_s"]))
    print("peak RSS: ls --json %.0f MB, load %.0f MB: %.2fx (target within 2x)" % (
        ls_json["rss_mb"], ld["rss_mb"], ls_json["rss_mb"] / ld["rss_mb"]))
    print()

    lazy = in_process([load, w1, "--mode", "lazy"], a.runs)
    res["w1"]["maploc lazy in-process"] = lazy
    print("## W1: the lazy open, in-process, against torch.load(mmap=True) in-process (lazy with lazy)")
    print()
    print("| runner | median | min | max | minor faults |")
    print("|---|---|---|---|---|")
    print("| maploc_bench_load --mode lazy: open + index (open alone %.1f ms) | %.1f ms | %.1f | %.1f | %d |" % (
        lazy["open_s"] * 1e3, lazy["total_s"] * 1e3, lazy["min_s"] * 1e3, lazy["max_s"] * 1e3, lazy["minflt"]))
    print("| torch.load(mmap=True) %s | %.1f ms | %.1f | %.1f | |" % (
        torch_version, tm["total_s"] * 1e3, tm["min_s"] * 1e3, tm["max_s"] * 1e3))
    print()
    print("torch.load(mmap=True) / maploc lazy: %.1fx; maploc lazy open + index against the 20 ms target: %.2fx" % (
        tm["total_s"] / lazy["total_s"], lazy["total_s"] / 0.020))
    print()

    print("## W6 (ResNet-50 shapes, 320 tensors, 102 MB): a private copy of every byte")
    print()
    mat = in_process([load, w6, "--mode", "materialised"], a.runs)
    cli = proc_run.repeat([maploc, "load", w6, "--host", "copy", "--quiet"], a.runs)
    tw = in_process([a.python, peers, "torch_load", "materialised", w6], a.runs)
    phys_out = json.loads(subprocess.run([phys, w6, "--threads", "2", "--reps", str(a.runs)], capture_output=True,
                                         text=True).stdout)["refs"]
    nbytes = mat["bytes"]
    res["w6"] = {"maploc materialised": mat, "maploc load --host copy": cli, "torch.load": tw, "refs": phys_out}
    print("| runner | median | min | max | GB/s |")
    print("|---|---|---|---|---|")
    for name, med, lo, hi in (("maploc_bench_load --mode materialised (in-process)", mat["total_s"], mat["min_s"],
                               mat["max_s"]),
                              ("`maploc load --host copy` (whole process)", cli["median_s"], cli["min_s"],
                               cli["max_s"]),
                              ("torch.load %s (in-process)" % torch_version, tw["total_s"], tw["min_s"], tw["max_s"])):
        print("| %s | %.1f ms | %.1f | %.1f | %.2f |" % (name, med * 1e3, lo * 1e3, hi * 1e3, nbytes / med / 1e9))
    for ref in ("pread_fresh", "pread_fresh_4k", "pread_prefaulted"):
        r = phys_out[ref]
        print("| pread (2 threads) %s: %s | %.1f ms | | | %.2f |" % (ref, r["note"], nbytes / r["gbps"] / 1e6,
                                                                   r["gbps"]))
    print()
    print("torch.load / maploc materialised: %.2fx (target >= 2x); maploc / pread_fresh: %.0f%%" % (
        tw["total_s"] / mat["total_s"], 100 * (nbytes / mat["total_s"] / 1e9) / phys_out["pread_fresh"]["gbps"]))
    json.dump(res, open(os.path.join(a.work, "cli_results.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
