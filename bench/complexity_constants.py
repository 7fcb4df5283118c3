#!/usr/bin/env python3
"""complexity_constants.py - measures the constants of docs/security.md's cost guarantee.

    python3 bench/complexity_constants.py [MAPLOC_BINARY]     (default: build/src/cli/maploc)

Builds the complexity corpus (fixtures/malicious/complexity.py, plus the issue-15 table rows
with --table) in a temporary folder, opens every file with the CLI (`ls`, `dis` or `load` as its
reader says) at the default limits under a 2 GiB address-space limit, and prints per file the
CPU time (user + system of the child) and peak RSS, then the largest CPU seconds per MB and RSS
bytes per input byte over the files of at least 1 MB, and the largest absolute CPU time and RSS
over the small ones (the fixed allowances: a few KB may still name 2^21 tensors).
"""
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent.parent
BIN = sys.argv[1] if len(sys.argv) > 1 else str(HERE / "build/src/cli/maploc")
VERB = {"checkpoint": "ls", "load": "load", "dis": "dis", "pickle": "dis", "zip": "ls"}


def limit_as():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run(path, verb):
    p = subprocess.Popen([BIN, verb, path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=limit_as)
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    code = err[err.find("[k") + 1:err.find("]", err.find("[k"))] if "[k" in err else ("ok" if status == 0 else
                                                                                      f"status {status}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, code


def main():
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for extra in ([], ["--table"]):
            out = pathlib.Path(tmp) / ("table" if extra else "corpus")
            subprocess.run([sys.executable, str(HERE / "fixtures/malicious/complexity.py"), str(out)] + extra,
                           check=True, stdout=subprocess.DEVNULL)
            for e in json.loads((out / "complexity.json").read_text())["entries"]:
                verb = VERB[e["reader"]]
                if e["reader"] == "pickle":
                    continue  # raw pickles that are not checkpoints: `ls` refuses them, dis reads them
                cpu, rss, code = min((run(str(out / e["file"]), verb) for _ in range(3)), key=lambda r: r[0])
                rows.append((e["file"], e["bytes"], verb, cpu, rss, code))
    print(f"{'file':44} {'bytes':>10} {'verb':5} {'cpu s':>7} {'RSS MB':>7} {'s/MB':>6} {'B/B':>6} result")
    for f, b, verb, cpu, rss, code in rows:
        mb = b / 1e6
        print(f"{f:44} {b:10d} {verb:5} {cpu:7.3f} {rss / 1e6:7.1f} {cpu / mb:6.3f} {rss / b:6.1f} {code}")
    big = [r for r in rows if r[1] >= 1_000_000]
    small = [r for r in rows if r[1] < 1_000_000]
    print()
    print(f"files >= 1 MB ({len(big)}): max {max(r[3] / (r[1] / 1e6) for r in big):.3f} CPU s/MB, "
          f"max {max(r[4] / r[1] for r in big):.1f} RSS bytes per input byte")
    print(f"files < 1 MB ({len(small)}): max {max(r[3] for r in small):.3f} CPU s, "
          f"max {max(r[4] for r in small) / 1e6:.0f} MB RSS")
    print(f"binary: {BIN}; every file read 3 times, the fastest kept")


if __name__ == "__main__":
    main()
