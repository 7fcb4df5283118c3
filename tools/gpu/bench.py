#!/usr/bin/env python3
"""bench.py - gpu-check's step 5: maploc's load to cuda:0 against pinned host-to-device bandwidth,
torch and safetensors, each measurement a fresh process, within a deadline.

    python3 tools/gpu/bench.py --build DIR --work TMPDIR --out DIR --deadline EPOCH [--dry]
                               [--sizes-mib 1024,4096] [--runs 3] [--peer-runs 2] [--python PY]

GPU run: PY (torch with CUDA) writes one bf16 state_dict per size (tools/gpu/bench_write.py; the
largest also as safetensors, per-tensor sha256 of the smallest), the page cache is warmed by
reading every file once, then:
  * the smallest file loaded to cuda:0 by `maploc load --hash --json`: every tensor's sha256 must
    equal the writer's (a failure fails the step);
  * maploc_bench_physical SMALLEST --gpu: h2d_pinned (cudaMemcpyAsync of 256 MiB from pinned memory,
    the physical reference), h2d_pageable, the pread -> pinned ring -> device pipeline;
  * maploc_bench_load LARGEST --mode cuda: arena and per-storage (--no-arena), the defaults and 1
    reader thread, and other ring geometries; the defaults (arena, 8 readers, 8 x 16 MiB) also at
    every smaller size (host RSS against size);
  * tools/gpu/torch_peer.py LARGEST: torch.load(map_location='cuda:0'), torch.load(mmap=True) then
    .to('cuda:0'), safetensors.torch.load_file(device='cuda:0');
each one untimed run and then --runs (maploc) or --peer-runs (peers) timed runs, medians reported.
Dry run (--dry, no GPU, the CUDA runtime stand-in in MAPLOC_CUDART): one 64 MiB file written
without torch (bench_write.py stdlib, then `maploc convert` to a torch.save zip), the hash check
and the maploc rows through the stand-in; torch's rows "not available in dry mode".
A measurement that would pass the deadline is cut and listed. Writes OUT/bench.json and
OUT/bench.md (also printed); exit 1 when a hash differs or a maploc load fails.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MAIN = "maploc, arena, defaults (8 readers, 8 x 16 MiB)"
TARGET_H2D = 0.85   # maploc >= 85% of pinned host-to-device bandwidth, warm page cache
TARGET_TORCH = 5.0  # maploc >= 5x torch.load(map_location='cuda:0')
RSS_SLACK_KB = 64 * 1024  # "independent of size": the larger file's peak within 64 MiB of the smaller's


class Bench:
    def __init__(self, a):
        self.a = a
        self.cut = []      # measurements left out for time, with why
        self.errors = []   # failures that fail the step
        self.rows = {}     # label -> {"cmd", "runs": [json...], "median_s", ...}
        self.log = open(os.path.join(a.out, "bench-runs.log"), "a")

    def left(self):
        return self.a.deadline - time.time()

    def run(self, cmd, timeout, env=None):
        """One process; returns (rc, stdout, stderr), rc 124 on timeout."""
        self.log.write("$ %s\n" % " ".join(cmd))
        self.log.flush()
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=max(1, timeout), env=env)
        except subprocess.TimeoutExpired:
            self.log.write("  timed out after %d s\n" % timeout)
            return 124, "", "timed out after %d s" % timeout
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        self.log.write(out[-4000:] + err[-4000:] + "  exit %d\n" % r.returncode)
        self.log.flush()
        return r.returncode, out, err

    def measure(self, label, cmd, runs, untimed=1, need_s=10, cap_s=180):
        """untimed + runs fresh processes printing one JSON object each; medians into self.rows."""
        row = {"cmd": " ".join(cmd), "runs": []}
        self.rows[label] = row
        for i in range(untimed + runs):
            if self.left() < need_s:
                self.cut.append("%s: %s (%.0f s left, about %.0f s needed)" % (
                    label, "untimed run" if i < untimed else "timed run %d of %d" % (i - untimed + 1, runs),
                    self.left(), need_s))
                break
            t0 = time.time()
            rc, out, err = self.run(cmd, min(cap_s, self.left() - 2))
            need_s = max(need_s, (time.time() - t0) * 1.2)
            try:
                j = json.loads(out.strip().splitlines()[-1]) if rc == 0 else None
            except (ValueError, IndexError):
                j = None
            if j is None:
                row["error"] = "exit %d: %s" % (rc, (err or out).strip()[-400:])
                return row
            if "unsupported" in j:
                row["unsupported"] = j["unsupported"]
                return row
            if i >= untimed:
                row["runs"].append(j)
        if row["runs"]:
            ts = sorted(r["total_s"] for r in row["runs"])
            row["median_s"] = statistics.median(ts)
            row["min_s"], row["max_s"] = ts[0], ts[-1]
            row["bytes"] = row["runs"][0]["bytes"]
            row["gbps"] = row["bytes"] / 1e9 / row["median_s"] if row["median_s"] > 0 else 0.0
            for k in ("rss_peak_over_base_kb", "rss_peak_kb", "rss_base_kb"):
                if k in row["runs"][0]:
                    row[k] = max(r[k] for r in row["runs"])
            for k in ("cuda_init_s", "import_s"):
                if k in row["runs"][0]:
                    row[k] = statistics.median(r[k] for r in row["runs"])
        return row


def write_files(b, a, maploc):
    """{mib: path}, the safetensors twin of the largest, the smallest's hashes (or None on failure)."""
    files, twin, hashes = {}, None, None
    sizes = sorted(a.sizes_mib)
    for mib in sizes:
        pt = os.path.join(a.work, "bench-%dmib.pt" % mib)
        want_hashes = mib == sizes[0]
        hpath = os.path.join(a.work, "bench-%dmib.hashes.json" % mib)
        if a.dry:
            st = os.path.join(a.work, "bench-%dmib.safetensors" % mib)
            cmd = [sys.executable, os.path.join(HERE, "bench_write.py"), "stdlib", st, "--mib", str(mib),
                   "--hashes", hpath]
            rc, out, err = b.run(cmd, max(5, b.left() - 5))
            if rc == 0:
                rc, out, err = b.run([maploc, "convert", st, pt], max(5, b.left() - 5))
        else:
            cmd = [a.python, os.path.join(HERE, "bench_write.py"), "torch", pt, "--mib", str(mib)]
            if mib == sizes[-1]:
                twin = os.path.join(a.work, "bench-%dmib.safetensors" % mib)
                cmd += ["--safetensors", twin]
            if want_hashes:
                cmd += ["--hashes", hpath]
            rc, out, err = b.run(cmd, max(5, b.left() - 5))
        if rc != 0:
            b.errors.append("writing the %d MiB checkpoint failed (exit %d): %s" % (mib, rc, (err or out).strip()[-400:]))
            break
        files[mib] = pt
        if want_hashes:
            with open(hpath) as f:
                hashes = json.load(f)
    if twin and not os.path.isfile(twin):
        twin = None  # the writer's python has no safetensors package (it said so)
    for path in list(files.values()) + ([twin] if twin else []):
        with open(path, "rb") as f:  # warm the page cache: every figure below is from a warm cache
            while f.read(64 << 20):
                pass
    return files, twin, hashes


def check_hashes(b, maploc, path, hashes):
    rc, out, err = b.run([maploc, "load", path, "--map-location", "cuda:0", "--hash", "--json"], max(5, b.left() - 5))
    if rc != 0:
        b.errors.append("maploc load %s to cuda:0 --hash failed (exit %d): %s" % (path, rc, err.strip()[-400:]))
        return "failed"
    got = {t["name"]: t for t in json.loads(out)["tensors"]}
    bad = [n for n, h in hashes.items() if got.get(n, {}).get("sha256") != h or got.get(n, {}).get("device") != "cuda:0"]
    if bad:
        b.errors.append("%d of %d tensors of %s differ from the writer's sha256 or are not on cuda:0 (first: %s)"
                        % (len(bad), len(hashes), os.path.basename(path), bad[0]))
        return "FAILED: %d of %d differ" % (len(bad), len(hashes))
    return "ok: %d tensors on cuda:0, every sha256 equal to the writer's" % len(hashes)


def fmt_row(label, r, payload_gb):
    if "error" in r:
        return "| %s | failed: %s | | | | |" % (label, r["error"].replace("|", "/").replace("\n", " ")[:200])
    if "unsupported" in r:
        return "| %s | not available: %s | | | | |" % (label, r["unsupported"])
    if "median_s" not in r:
        return "| %s | cut (no time left) | | | | |" % label
    rss = r.get("rss_peak_over_base_kb")
    return "| %s | %.3f s (min %.3f, max %.3f; %d runs) | %.2f | %s | %s | %s |" % (
        label, r["median_s"], r["min_s"], r["max_s"], len(r["runs"]), r["gbps"],
        "%.0f" % (rss / 1024) if rss is not None else "-",
        "%.0f" % (r["rss_peak_kb"] / 1024) if "rss_peak_kb" in r else "-",
        "%.2f" % r["cuda_init_s"] if "cuda_init_s" in r else "-")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, required=True, help="seconds since the epoch")
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--sizes-mib", default=None)
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--peer-runs", type=int, default=2)
    ap.add_argument("--python", default=sys.executable, help="the python with torch (GPU run)")
    a = ap.parse_args()
    a.sizes_mib = [int(x) for x in (a.sizes_mib or ("64" if a.dry else "1024,4096")).split(",")]
    a.runs = a.runs or (1 if a.dry else 3)
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    maploc = os.path.join(a.build, "src/cli/maploc")
    load = os.path.join(a.build, "bench/maploc_bench_load")
    physical = os.path.join(a.build, "bench/maploc_bench_physical")
    b = Bench(a)
    res = {"dry": a.dry, "sizes_mib": a.sizes_mib}

    files, twin, hashes = write_files(b, a, maploc)
    if not files:
        return finish(b, a, res, None)
    small, large = files[min(files)], files[max(files)]
    large_gb = os.path.getsize(large) / 1e9
    res["hash_check"] = check_hashes(b, maploc, small, hashes) if hashes else "no hashes (writer failed)"

    # The physical reference: pinned host-to-device copies (and the pageable and pipeline ones).
    reps = "1" if a.dry else "3"
    rc, out, err = b.run([physical, small, "--gpu", "--reps", reps], min(120, max(5, b.left() - 5)))
    h2d = None
    if rc == 0:
        refs = json.loads(out)["refs"]
        res["physical"] = refs
        h2d = refs.get("h2d_pinned", {}).get("gbps")
        if h2d is None:
            res["physical_note"] = "no h2d_pinned figure: %s" % (err.strip().splitlines()[-1] if err.strip() else
                                                               "maploc_bench_physical was built without the CUDA toolkit")
    else:
        res["physical_note"] = "maploc_bench_physical failed (exit %d): %s" % (rc, err.strip()[-300:])

    configs = [(MAIN, []), ("maploc, arena, 1 reader", ["--readers", "1"]),
               ("maploc, per-storage (--no-arena), defaults", ["--no-arena"]),
               ("maploc, per-storage (--no-arena), 1 reader", ["--no-arena", "--readers", "1"])]
    if not a.dry:
        # The ring's geometry (a ring of K buffers has K-1 being filled, so readers need buffers):
        # the old default (4 readers, 4 x 16 MiB) and larger rings, whose pinned allocation is timed.
        configs += [("maploc, arena, 4 readers, 4 x 16 MiB", ["--readers", "4", "--staging-buffers", "4"]),
                    ("maploc, arena, 8 readers, 16 x 16 MiB", ["--readers", "8", "--staging-buffers", "16"]),
                    ("maploc, arena, 16 readers, 16 x 16 MiB", ["--readers", "16", "--staging-buffers", "16"]),
                    ("maploc, arena, 8 readers, 8 x 32 MiB", ["--readers", "8", "--staging-buffers", "8",
                                                              "--staging-mib", "32"])]
    mib_large = max(files)
    for label, extra in configs:
        b.measure("%s [%d MiB]" % (label, mib_large), [load, large, "--mode", "cuda"] + extra, a.runs)
    for mib in sorted(files)[:-1]:
        b.measure("%s [%d MiB]" % (MAIN, mib), [load, files[mib], "--mode", "cuda"], a.runs)
    peers = [("torch.load(map_location='cuda:0')", "torch_load", large),
             ("torch.load(mmap=True) then .to('cuda:0')", "torch_mmap_to", large),
             ("safetensors load_file(device='cuda:0')", "safetensors", twin)]
    if not a.dry:
        for label, peer, path in peers:
            if path is None:
                b.rows["%s [%d MiB]" % (label, mib_large)] = {"unsupported": "no safetensors file (the writer's python "
                                                                            "has no safetensors package)"}
                continue
            b.measure("%s [%d MiB]" % (label, mib_large),
                      [a.python, os.path.join(HERE, "torch_peer.py"), peer, path], a.peer_runs, need_s=20)
    for label, row in b.rows.items():
        if label.startswith("maploc") and "error" in row:
            b.errors.append("%s: %s" % (label, row["error"]))
    return finish(b, a, res, (h2d, large_gb, mib_large, peers))


def finish(b, a, res, ctx):
    res["rows"] = b.rows
    res["cut"] = b.cut
    res["errors"] = b.errors
    lines = ["### Benchmark%s" % (" (dry run: the CUDA runtime stand-in, figures mean nothing)" if a.dry else ""), ""]
    if ctx is None:
        lines += ["Not run: %s" % "; ".join(b.errors)]
    else:
        h2d, large_gb, mib_large, peers = ctx
        lines += ["Hash check of the smallest file loaded to cuda:0: %s" % res["hash_check"], ""]
        if "physical" in res:
            lines += ["Physical references (`maploc_bench_physical --gpu`, GB/s median of the repetitions):", ""]
            lines += ["- %s: %.2f GB/s (min %.2f, max %.2f): %s" % (k, v["gbps"], v["min"], v["max"], v["note"])
                      for k, v in res["physical"].items() if k.startswith(("h2d", "pipeline", "pread_prefaulted"))]
        if "physical_note" in res:
            lines += ["- %s" % res["physical_note"]]
        lines += ["", "| what (fresh process each) | time, median | GB/s | peak RSS over base, MB | peak RSS, MB | "
                  "CUDA init outside timer, s |", "|---|---|---|---|---|---|"]
        for label, row in b.rows.items():
            lines.append(fmt_row(label, row, large_gb))
        if a.dry:
            for label, _, _ in peers:
                lines.append("| %s | not available in dry mode | | | | |" % label)
        lines += ["", "Targets:"]
        main_row = b.rows.get("%s [%d MiB]" % (MAIN, mib_large), {})
        if "gbps" in main_row and h2d:
            pct = main_row["gbps"] / h2d
            lines.append("- >= %d%% of pinned H2D from a warm page cache: %.1f%% (%.2f of %.2f GB/s): %s" % (
                TARGET_H2D * 100, pct * 100, main_row["gbps"], h2d, "met" if pct >= TARGET_H2D else "NOT met"))
        else:
            lines.append("- >= %d%% of pinned H2D: not measured (%s)" % (
                TARGET_H2D * 100, "no h2d_pinned figure" if not h2d else "no maploc figure"))
        torch_row = b.rows.get("%s [%d MiB]" % (peers[0][0], mib_large), {})
        if "median_s" in main_row and "median_s" in torch_row:
            x = torch_row["median_s"] / main_row["median_s"]
            lines.append("- >= %.0fx torch.load(map_location='cuda:0'): %.1fx (%.3f s against %.3f s): %s" % (
                TARGET_TORCH, x, main_row["median_s"], torch_row["median_s"], "met" if x >= TARGET_TORCH else "NOT met"))
        else:
            lines.append("- >= %.0fx torch.load(map_location='cuda:0'): not measured%s" % (
                TARGET_TORCH, " (dry mode)" if a.dry else ""))
        sized = [(int(l.rsplit("[", 1)[1].split()[0]), r) for l, r in b.rows.items()
                 if l.startswith(MAIN + " [") and "rss_peak_over_base_kb" in r]
        if len(sized) >= 2:
            sized.sort(key=lambda t: t[0])
            (m0, r0), (m1, r1) = sized[0], sized[-1]
            grow = r1["rss_peak_over_base_kb"] - r0["rss_peak_over_base_kb"]
            lines.append("- host RSS independent of the checkpoint size: %d MiB file %.0f MB, %d MiB file %.0f MB over "
                         "the base (peak %.0f and %.0f MB in all): %s" % (
                             m0, r0["rss_peak_over_base_kb"] / 1024, m1, r1["rss_peak_over_base_kb"] / 1024,
                             r0.get("rss_peak_kb", 0) / 1024, r1.get("rss_peak_kb", 0) / 1024,
                             "met" if grow <= RSS_SLACK_KB else "NOT met (grew %.0f MB)" % (grow / 1024)))
        else:
            lines.append("- host RSS independent of the checkpoint size: needs two sizes (%s)" % (
                "one size in dry mode" if a.dry else "a size was cut or failed"))
    if b.cut:
        lines += ["", "Cut for time:"] + ["- " + c for c in b.cut]
    if b.errors:
        lines += ["", "Failures:"] + ["- " + e for e in b.errors]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "bench.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "bench.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(text)
    return 1 if b.errors else 0


if __name__ == "__main__":
    sys.exit(main())
