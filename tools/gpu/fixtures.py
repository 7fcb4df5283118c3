#!/usr/bin/env python3
"""fixtures.py - every CUDA-tagged fixture and the cached real-world corpus loaded to cuda:0 by maploc,
each tensor's sha256 compared with the committed manifest and (with --torch) with torch on this machine.

    python3 tools/gpu/fixtures.py --maploc BIN --out DIR [--torch] [--real-cache DIR] [--timeout S]

Files:
  * fixtures/**/X.manifest.json (fixtures/real aside) whose storages include a "cuda:N" tag, X beside it;
  * every file of fixtures/real/sources.json present in the cache (default .cache/real, filled by
    fixtures/real/fetch.py), checked against its pinned sha256 first; none cached: said so, not a failure.
Each is loaded with `maploc load FILE --map-location 'cuda:*->cuda:0,*->cuda:0' --hash --json`: the
CUDA tags as the check asks, then every other tag (cpu, mps, ...) to cuda:0 as well, which is what
torch's map_location='cuda:0' does, so every storage goes through the upload and both sides place the
same tensors on the same device. Every tensor must be on cuda:0 and its sha256 must equal:
  * the manifest's (torch's view when the fixture was made; committed), always;
  * with --torch: torch's on this machine, `torch.load(f, map_location='cuda:0', weights_only=True)`
    (safetensors: `safetensors.torch.load_file(f, device='cuda:0')`), each tensor copied back to the
    host and hashed as fixtures/generate.py hashes (value_bytes: its values row-major, contiguous;
    int_repr() of a quantized tensor), named as generate.py's walk() names them. A file torch refuses
    with weights_only=True (TorchScript, unknown globals) is compared with its manifest only, said so.
Then the same fixtures and fixtures/checkpoints/large_storages.t113.pt once more by URL, served on
127.0.0.1 by tests/remote/range_server.py: a URL load streams each storage through the pinned ring to
the device (docs/remote.md); every tensor's sha256 must equal the manifest's again.
Writes DIR/fixtures.json and prints one line per file; exit 1 if any tensor differs or a load fails.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "fixtures")
SPEC = "cuda:*->cuda:0,*->cuda:0"


def tagged_fixtures():
    out = []
    for d, dirs, files in os.walk(FIXTURES):
        dirs.sort()
        if os.path.relpath(d, FIXTURES).split(os.sep)[0] == "real":
            continue
        for f in sorted(files):
            if not f.endswith(".manifest.json"):
                continue
            path = os.path.join(d, f)
            with open(path) as fh:
                m = json.load(fh)
            tags = {s.get("location", "") for s in m.get("storages", [])} | \
                   {t.get("location", "") for t in m.get("tensors", [])}
            if any(t.startswith("cuda:") for t in tags):
                out.append((os.path.relpath(path[:-len(".manifest.json")], ROOT), path[:-len(".manifest.json")], m))
    return out


def by_url(todo):
    """The fixtures of `todo` (and the one of several-MiB storages) as URLs of a loopback range server."""
    big = os.path.join(FIXTURES, "checkpoints", "large_storages.t113.pt")
    with open(big + ".manifest.json") as fh:
        todo = todo + [(os.path.relpath(big, ROOT), big, json.load(fh))]
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "remote", "range_server.py"), FIXTURES],
                              stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline().split()[1])
    urls = [(name + " by URL", "http://127.0.0.1:%d/ok/%s" % (port, os.path.relpath(path, FIXTURES)), m)
            for name, path, m in todo]
    return server, urls


def real_files(cache):
    sys.path.insert(0, os.path.join(FIXTURES, "real"))
    import fetch  # fixtures/real/fetch.py: standard library only
    cache = cache or fetch.DEFAULT_CACHE
    out, bad = [], []
    for s in fetch.load_sources():
        for e in s["files"]:
            path = fetch.file_path(cache, s, e)
            if not os.path.isfile(path):
                continue
            name = "real/%s/%s" % (s["id"], e["member"])
            if fetch.sha256_of(path) != e["sha256"]:
                bad.append(name)
                continue
            with open(os.path.join(FIXTURES, "real", "manifests", s["id"], e["member"] + ".manifest.json")) as fh:
                out.append((name, path, json.load(fh)))
    return cache, out, bad


def maploc_load(maploc, path, timeout):
    cmd = [maploc, "load", path, "--map-location", SPEC, "--hash", "--json"]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "maploc load timed out after %d s" % timeout
    if r.returncode != 0:
        return None, "maploc load exit %d: %s" % (r.returncode, r.stderr.decode(errors="replace").strip()[:400])
    try:
        return json.loads(r.stdout), None
    except ValueError as e:
        return None, "maploc load printed no JSON (%s)" % e


class TorchSide:
    """torch on this machine, to cuda:0; hashes as fixtures/generate.py defines them."""

    def __init__(self):
        sys.path.insert(0, FIXTURES)
        import torch
        import generate  # fixtures/generate.py: value_bytes(), walk(), sha()
        self.torch, self.gen = torch, generate
        if not torch.cuda.is_available():
            raise RuntimeError("torch %s sees no CUDA device" % torch.__version__)
        torch.zeros(1, device="cuda:0")

    def hashes(self, path, fmt):
        """{name: sha256} of torch's tensors loaded to cuda:0, or (None, why torch did not load it)."""
        torch, gen = self.torch, self.gen
        try:
            if fmt == "safetensors":
                from safetensors.torch import load_file
                obj = load_file(path, device="cuda:0")
            else:
                obj = torch.load(path, map_location="cuda:0", weights_only=True)
        except Exception as e:  # noqa: BLE001 - torch refusing is reported, the manifest still compared
            return None, "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:200] if str(e).strip() else "")
        tensors, objects = [], []
        gen.walk(obj, "", tensors, objects)
        out, where = {}, set()
        for name, t in tensors:
            if t.layout != torch.strided:
                continue  # sparse: generate.py names its components apart; the manifest covers them
            where.add(str(t.device))
            out[name] = gen.sha(gen.value_bytes(t.detach().cpu()))
        torch.cuda.synchronize()
        if where - {"cuda:0"}:
            return None, "torch placed tensors on %s, not only cuda:0" % sorted(where)
        return out, None


def check(name, path, m, maploc, torch_side, timeout):
    res = {"file": name, "path": path, "errors": [], "tensors": 0, "vs_manifest": 0, "vs_torch": 0}
    t0 = time.perf_counter()
    out, err = maploc_load(maploc, path, timeout)
    res["maploc_s"] = round(time.perf_counter() - t0, 3)
    if err:
        res["errors"].append(err)
        return res
    got = {t["name"]: t for t in out.get("tensors", [])}
    res["tensors"] = len(got)
    res["devices"] = out.get("devices")
    for t in out.get("tensors", []):
        if t.get("device") != "cuda:0":
            res["errors"].append("tensor %s placed on %s, not cuda:0" % (t["name"], t.get("device")))
    for t in m.get("tensors", []):
        x = got.get(t["name"])
        if x is None:
            res["errors"].append("tensor %s (in the manifest) not in maploc's output" % t["name"])
        elif x.get("sha256") != t.get("sha256"):
            res["errors"].append("tensor %s: maploc sha256 %s, manifest %s" % (t["name"], x.get("sha256"), t.get("sha256")))
        else:
            res["vs_manifest"] += 1
    if torch_side is not None:
        theirs, why = torch_side.hashes(path, m.get("format"))
        if theirs is None:
            res["torch"] = "not compared: torch did not load it to cuda:0 (%s); manifest compared" % why
        else:
            for tname, h in theirs.items():
                x = got.get(tname)
                if x is None:
                    res["errors"].append("tensor %s (torch's) not in maploc's output" % tname)
                elif x.get("sha256") != h:
                    res["errors"].append("tensor %s: maploc sha256 %s, torch %s" % (tname, x.get("sha256"), h))
                else:
                    res["vs_torch"] += 1
            res["torch"] = "%d tensors compared" % len(theirs)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maploc", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--torch", action="store_true", help="compare with torch on this machine too")
    ap.add_argument("--real-cache", default=None)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per maploc load")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch_side = None
    failed = 0
    notes = []
    if a.torch:
        try:
            torch_side = TorchSide()
        except Exception as e:  # noqa: BLE001
            print("FAIL torch on this machine cannot load to cuda:0: %s: %s" % (type(e).__name__, e))
            failed += 1
    todo = tagged_fixtures()
    cache, real, bad = real_files(a.real_cache)
    if real or bad:
        notes.append("real-world corpus: %d cached file(s) in %s" % (len(real) + len(bad), cache))
    else:
        notes.append("real-world corpus: not cached in %s (python3 fixtures/real/fetch.py [--all]): skipped" % cache)
    for n in bad:
        print("FAIL %s: sha256 differs from fixtures/real/sources.json (rerun fetch.py)" % n)
        failed += 1
    results = []
    for name, path, m in todo + real:
        r = check(name, path, m, a.maploc, torch_side, a.timeout)
        results.append(r)
        failed += bool(r["errors"])
        extra = "; torch: %s" % r["torch"] if "torch" in r else ""
        print("%-4s %s: %d tensors on cuda:0, %d equal to the manifest%s%s (%.2f s)" % (
            "FAIL" if r["errors"] else "ok", name, r["tensors"], r["vs_manifest"],
            ", %d equal to torch" % r["vs_torch"] if torch_side else "", extra, r["maploc_s"]))
        for e in r["errors"][:10]:
            print("     " + e)
        sys.stdout.flush()
    server, urls = by_url(todo)
    try:
        for name, url, m in urls:
            r = check(name, url, m, a.maploc, None, a.timeout)
            results.append(r)
            failed += bool(r["errors"])
            print("%-4s %s: %d tensors on cuda:0, %d equal to the manifest (%.2f s)" % (
                "FAIL" if r["errors"] else "ok", name, r["tensors"], r["vs_manifest"], r["maploc_s"]))
            for e in r["errors"][:10]:
                print("     " + e)
            sys.stdout.flush()
    finally:
        server.terminate()
        server.wait()
    for n in notes:
        print(n)
    print("%d load(s) (%d CUDA-tagged fixtures, %d real, %d by URL), %d failed" % (
        len(results) + len(bad), len(todo), len(real) + len(bad), len(urls), failed))
    with open(os.path.join(a.out, "fixtures.json"), "w") as f:
        json.dump({"spec": SPEC, "notes": notes, "failed": failed, "results": results}, f, indent=1)
    if not todo:
        print("FAIL no CUDA-tagged fixture found under %s" % FIXTURES)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
