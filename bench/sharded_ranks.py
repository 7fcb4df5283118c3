#!/usr/bin/env python3
"""sharded_ranks.py - W processes each load their row slice of a sharded set, against one process loading it all.

    python3 bench/sharded_ranks.py [--maploc build/src/cli/maploc] [--mib 256] [--world 2,4] [--runs 3]

Writes a safetensors set (an index + 4 shards of float32 [rows, 4096] tensors, random bytes; Python's
standard library only) in a temporary directory, then, RUNS times each:
  * one process: `maploc load SET --map-location cpu --host copy --json` (every byte read into private memory);
  * W processes started together: `maploc load SET --map-location cpu --slice rows:* --rank R --world-size W --json`.
Per process: wall time (start to exit, os.wait4), peak RSS (ru_maxrss of that child), and the bytes maploc
read from the files (its --json `slice.bytes_from_files`; the whole-set load reads every storage byte).
Prints medians as a markdown table. Warm page cache (the set is read once before timing).
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

COLS = 4096


def write_set(d, mib):
    rows_total = mib * 2**20 // (COLS * 4)
    per_shard = [rows_total // 4] * 4
    weight_map, total = {}, 0
    for s, rows in enumerate(per_shard):
        name = f"model-{s + 1:05d}-of-00004.safetensors"
        tensors = {f"layers.{s}.{k}.weight": rows // 2 for k in ("up", "down")}
        header, off = {"__metadata__": {"format": "pt"}}, 0
        for t, r in tensors.items():
            n = r * COLS * 4
            header[t] = {"dtype": "F32", "shape": [r, COLS], "data_offsets": [off, off + n]}
            off += n
            weight_map[t] = name
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(os.path.join(d, name), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for _ in range(off // 2**20):
                f.write(os.urandom(2**20))
            f.write(os.urandom(off % 2**20))
        total += off
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    return total


def run_many(cmds):
    """Starts every command at once; returns [(wall_s, maxrss_kib, json)] in order."""
    procs = []
    for c in cmds:
        t0 = time.monotonic()
        procs.append((subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE), t0))
    out = []
    for p, t0 in procs:
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        text = p.stdout.read()
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            sys.exit(f"failed: {p.args}\n{p.stderr.read().decode()}")
        out.append((wall, ru.ru_maxrss, json.loads(text)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--maploc", default="build/src/cli/maploc")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--world", default="2,4")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        payload = write_set(d, a.mib)
        base = [a.maploc, "load", d, "--map-location", "cpu", "--json", "--quiet"]
        run_many([base + ["--host", "copy"]])  # warm the page cache
        rows = []
        whole = [run_many([base + ["--host", "copy"]])[0] for _ in range(a.runs)]
        rows.append(("1 process, whole set (--host copy)", 1, statistics.median(w for w, _, _ in whole),
                     statistics.median(r for _, r, _ in whole), payload, payload))
        for world in [int(x) for x in a.world.split(",")]:
            runs = [run_many([base + ["--slice", "rows:*", "--rank", str(r), "--world-size", str(world)]
                              for r in range(world)]) for _ in range(a.runs)]
            per_rank_wall = statistics.median(w for run in runs for w, _, _ in run)
            per_rank_rss = statistics.median(r for run in runs for _, r, _ in run)
            read = [sum(j["slice"]["bytes_from_files"] for _, _, j in run) for run in runs]
            rank0 = runs[0][0][2]["slice"]["bytes_from_files"]
            rows.append((f"{world} processes, rows:* slice each", world, per_rank_wall, per_rank_rss, rank0,
                         statistics.median(read)))
        print(f"payload {payload} bytes ({payload / 2**20:.0f} MiB), {a.runs} runs, medians; "
              f"{os.cpu_count()} CPUs; maploc {a.maploc}\n")
        print("| load | processes | wall per process | peak RSS per process | bytes read by one process |"
              " bytes read, all processes | of one copy |")
        print("|---|---|---|---|---|---|---|")
        for name, n, wall, rss, one, total in rows:
            print(f"| {name} | {n} | {wall * 1e3:.0f} ms | {rss / 1024:.0f} MiB | {one / 2**20:.1f} MiB |"
                  f" {total / 2**20:.1f} MiB | {total / payload:.3f} |")


if __name__ == "__main__":
    main()
