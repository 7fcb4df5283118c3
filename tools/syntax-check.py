#!/usr/bin/env python3
"""syntax-check.py - every C and C++ source of a configured build, checked by a second compiler.

    python3 tools/syntax-check.py BUILD_DIR [--cxx clang++-16] [--cc clang-16] [--jobs N]
                                  [--covered-by OTHER_BUILD_DIR]

Reads BUILD_DIR/compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS=ON), runs each command
with the other compiler and -fsyntax-only (no objects, no link), and fails listing every error.

Why: C++20's comparison rules as GCC 13+ and Clang 16+ implement them (P2468R2, "the equality
operator you are looking for") reject `std::string == nlohmann::json`, which GCC 12 (Debian 12's
compiler) accepts. The first GPU machine (Ubuntu 24.04, GCC 13) failed to build two tests for
that reason (docs/cuda.md, "The GPU run"); Debian 12's clang-16 applies the same rules, so CI
runs this over every source. A missing compiler is an error, never a pass.

--covered-by: a second configured build that compiles with that same compiler (CI's ASan+UBSan
build is made with clang-16): its sources are compiled there, warnings and all, so only the
sources it lacks (the benchmarks, which sanitizer builds leave out) are checked here. A source is
skipped only when the other build's entry for it runs the same compiler.
"""
import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys


def command_for(entry, cxx, cc):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    # Drop a launcher (ccache) and the original compiler; keep the flags, drop the outputs.
    while args and os.path.basename(args[0]) in ("ccache", "sccache"):
        args = args[1:]
    source = entry["file"]
    compiler = cc if source.endswith(".c") else cxx
    out, skip = [compiler], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith("-fdiagnostics-color"):
            continue
        out.append(a)
    return out + ["-fsyntax-only", "-Wno-unknown-warning-option"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--cxx", default="clang++-16")
    ap.add_argument("--cc", default="clang-16")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--covered-by", metavar="OTHER_BUILD")
    a = ap.parse_args()
    db = os.path.join(a.build, "compile_commands.json")
    if not os.path.exists(db):
        sys.exit("syntax-check: no %s (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)" % db)
    for tool in (a.cxx, a.cc):
        if shutil.which(tool) is None:
            sys.exit("syntax-check: %s not found (Debian: apt-get install %s; tools/install-deps.sh test)"
                     % (tool, tool.replace("++", "")))
    with open(db) as f:
        entries = [e for e in json.load(f) if "/_deps/" not in e["file"]]
    if not entries:
        sys.exit("syntax-check: %s lists no sources" % db)
    covered = set()
    if a.covered_by:
        other = os.path.join(a.covered_by, "compile_commands.json")
        if not os.path.exists(other):
            sys.exit("syntax-check: no %s (configure it with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)" % other)
        with open(other) as f:
            for e in json.load(f):
                args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
                while args and os.path.basename(args[0]) in ("ccache", "sccache"):
                    args = args[1:]
                compiler = a.cc if e["file"].endswith(".c") else a.cxx
                if args and os.path.basename(args[0]) == os.path.basename(compiler):
                    covered.add(os.path.realpath(e["file"]))
        if not covered:
            sys.exit("syntax-check: %s compiles nothing with %s; it covers no source" % (other, a.cxx))
    skipped = [e for e in entries if os.path.realpath(e["file"]) in covered]
    entries = [e for e in entries if os.path.realpath(e["file"]) not in covered]

    def check(e):
        r = subprocess.run(command_for(e, a.cxx, a.cc), cwd=e["directory"], capture_output=True, text=True)
        return e["file"], r.returncode, r.stderr

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for source, rc, err in pool.map(check, entries):
            if rc != 0:
                errors = [l for l in err.splitlines() if ": error:" in l] or err.strip().splitlines()[-5:]
                failed.append((source, errors))
    for source, errors in failed:
        print("syntax-check: %s does not compile with %s:" % (source, a.cxx))
        for l in errors[:20]:
            print("  " + l)
    print("syntax-check: %d of %d sources compile with %s/%s -fsyntax-only" % (
        len(entries) - len(failed), len(entries), a.cxx, a.cc))
    if skipped:
        print("syntax-check: %d more compiled with %s in %s" % (len(skipped), a.cxx, a.covered_by))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
