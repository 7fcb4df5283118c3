"""proc_run.py - runs a command in fresh processes: wall time, CPU, peak RSS and page faults.

Shared by the command-level benchmarks (hash_compare.py, cli_compare.py). Standard library only
plus GNU time (/usr/bin/time, Debian's `time`): a child of Python inherits Python's peak RSS through
fork and exec, so the counters come from GNU time, whose own child starts clean.
"""
import os
import statistics
import subprocess
import tempfile
import time

GNU_TIME = "/usr/bin/time"


def once(cmd, stdout=subprocess.DEVNULL):
    """One process: wall seconds, user+sys seconds, peak RSS (MB), minor+major faults, exit status."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as f:
        t0 = time.perf_counter()
        p = subprocess.run([GNU_TIME, "-o", f.name, "-f", "%U %S %M %F %R %x"] + cmd, stdout=stdout,
                           stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
        fields = f.read().split()[-6:]
    user, sys_, rss_kb, major, minor, rc = fields
    return {"wall_s": wall, "cpu_s": float(user) + float(sys_), "rss_mb": int(rss_kb) / 1024,
            "faults": int(major) + int(minor), "rc": int(rc), "stderr": p.stderr.decode(errors="replace")[-300:]}


def repeat(cmd, runs, warmup=1):
    """Median of `runs` fresh processes after `warmup` untimed ones, with min/max and the median run's counters."""
    for _ in range(warmup):
        r = once(cmd)
        if r["rc"] != 0:
            raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r["rc"], r["stderr"]))
    samples = sorted((once(cmd) for _ in range(runs)), key=lambda r: r["wall_s"])
    med = dict(samples[len(samples) // 2])
    med["median_s"] = statistics.median(r["wall_s"] for r in samples)
    med["min_s"], med["max_s"] = samples[0]["wall_s"], samples[-1]["wall_s"]
    med["rss_mb"] = max(r["rss_mb"] for r in samples)
    med["runs"] = runs
    return med


def fmt(r):
    return "%.1f ms (min %.1f, max %.1f; %d runs), %.0f MB peak RSS, %d faults" % (
        r["median_s"] * 1e3, r["min_s"] * 1e3, r["max_s"] * 1e3, r["runs"], r["rss_mb"], r["faults"])
