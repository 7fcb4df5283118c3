"""header_check.py MAPLOC WORK - the JSON maploc writes is strict UTF-8 JSON, whatever the names.

Needs only python3. A safetensors file whose tensor names hold quotes, backslashes,
control characters and multi-byte UTF-8 is converted by `maploc convert` (to
safetensors, to .pt and back); each header written must decode with
bytes.decode('utf-8') (strict) and json.loads, and name the same tensors. A name
that is not valid UTF-8 (a lone surrogate pickled as Python pickles it) is refused
by convert, naming the tensor, and `maploc ls --json` shows it as the text \\xNN.
Where the safetensors package is importable, it reads the converted file too.
"""
import collections
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import types
import zipfile

NAMES = ["plain", 'quo"te', "back\\slash", "ctl\x01\x1f\x7f", "nl\ntab\tcr\r", "caf\u00e9", "\u20ac sign",
         "emoji \U0001F600", "slash/ok", "nul\x00x"]


def write_st(path, names, ensure_ascii):
    header = {n: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i, n in enumerate(names)}
    raw = json.dumps(header, ensure_ascii=ensure_ascii).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(struct.pack("<f", float(i)) for i in range(len(names))))


# A torch.save-style zip (data.pkl, data/N, version) written by the pickle module with stand-ins
# for torch's globals: no torch needed. A name with a lone surrogate is pickled as Python does
# (BINUNICODE, 'surrogatepass': the bytes ED B3 BF), which no UTF-8 decoder accepts.
def torch_zip(path, names):
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")
    class FloatStorage: pass
    FloatStorage.__module__ = "torch"; FloatStorage.__qualname__ = FloatStorage.__name__ = "FloatStorage"
    def _rebuild_tensor_v2(*a): pass
    _rebuild_tensor_v2.__module__ = "torch._utils"; _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    torch.FloatStorage = FloatStorage; utils._rebuild_tensor_v2 = _rebuild_tensor_v2; torch._utils = utils
    saved = {k: sys.modules.get(k) for k in ("torch", "torch._utils")}
    sys.modules["torch"] = torch; sys.modules["torch._utils"] = utils
    class Ref:
        def __init__(self, key): self.key = key
    class T:
        def __init__(self, key): self.key = key
        def __reduce__(self): return (_rebuild_tensor_v2, (Ref(self.key), 0, (1,), (1,), False, collections.OrderedDict()))
    class P(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", FloatStorage, obj.key, "cpu", 1) if isinstance(obj, Ref) else None
    buf = io.BytesIO()
    try:
        P(buf, protocol=2).dump(collections.OrderedDict((n, T(str(i))) for i, n in enumerate(names)))
    finally:
        for k, v in saved.items():
            if v is None: sys.modules.pop(k, None)
            else: sys.modules[k] = v
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        for i in range(len(names)): z.writestr("archive/data/%d" % i, struct.pack("<f", float(i)))
        z.writestr("archive/version", "3\n")

def read_header(path, problems):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    try:
        text = data[8:8 + n].decode("utf-8")  # strict: any byte that is not UTF-8 fails
    except UnicodeDecodeError as e:
        problems.append("%s: header is not valid UTF-8: %s" % (path, e))
        return {}
    try:
        return json.loads(text)
    except ValueError as e:
        problems.append("%s: header is not JSON: %s" % (path, e))
        return {}


def maploc(binary, *args):
    return subprocess.run([binary, *args, "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def main():
    binary, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    problems = []
    src = os.path.join(work, "names.safetensors")
    write_st(src, NAMES, ensure_ascii=False)
    st = os.path.join(work, "out.safetensors")
    pt = os.path.join(work, "out.pt")
    back = os.path.join(work, "back.safetensors")
    for a, b in ((src, st), (st, pt), (pt, back)):
        if os.path.exists(b):
            os.remove(b)
        r = maploc(binary, "convert", a, b)
        if r.returncode != 0:
            problems.append("convert %s %s failed (%d): %s" % (a, b, r.returncode, r.stderr.decode("utf-8", "replace")))
    for path in (st, back):
        if not os.path.exists(path):
            continue
        header = read_header(path, problems)
        names = sorted(k for k in header if k != "__metadata__")
        if names != sorted(NAMES):
            problems.append("%s: names %r, expected %r" % (path, names, sorted(NAMES)))
        for k, v in header.get("__metadata__", {}).items():
            if not isinstance(v, str):
                problems.append("%s: metadata %r is not a string" % (path, k))
    # ls --json: strict UTF-8 JSON, the names as they are.
    r = maploc(binary, "ls", st, "--json")
    try:
        listing = json.loads(r.stdout.decode("utf-8"))
        if sorted(t["name"] for t in listing["tensors"]) != sorted(NAMES):
            problems.append("ls --json names differ: %r" % [t["name"] for t in listing["tensors"]])
    except (UnicodeDecodeError, ValueError, KeyError) as e:
        problems.append("ls --json output is not strict UTF-8 JSON: %s" % e)

    # A name that is not UTF-8: "bad\udcff" in a torch zip's pickle (the bytes ED B3 BF).
    bad_src = os.path.join(work, "bad.pt")
    torch_zip(bad_src, ["good", "bad\udcff"])
    bad_out = os.path.join(work, "bad_out.safetensors")
    if os.path.exists(bad_out):
        os.remove(bad_out)
    r = maploc(binary, "convert", bad_src, bad_out)
    err = r.stderr.decode("utf-8", "replace")
    if r.returncode != 3 or "not valid UTF-8" not in err or "bad\\\\xed\\\\xb3\\\\xbf" not in err:
        problems.append("convert of a non-UTF-8 name: exit %d, %r (expected 3 naming the tensor)" % (r.returncode, err))
    if os.path.exists(bad_out):
        problems.append("convert of a non-UTF-8 name left %s" % bad_out)
    r = maploc(binary, "ls", bad_src, "--json")
    try:
        listing = json.loads(r.stdout.decode("utf-8"))
        if sorted(t["name"] for t in listing["tensors"]) != ["bad\\xed\\xb3\\xbf", "good"]:
            problems.append("ls --json shows the non-UTF-8 name as %r" % [t["name"] for t in listing["tensors"]])
    except (UnicodeDecodeError, ValueError, KeyError) as e:
        problems.append("ls --json of a non-UTF-8 name is not strict UTF-8 JSON: %s" % e)

    try:
        from safetensors import safe_open  # optional: the package's own reader
    except ImportError:
        print("safetensors package not importable: checked with json and strict UTF-8 only")
    else:
        for path in (st, back):
            if os.path.exists(path):
                with safe_open(path, framework="numpy") as f:
                    if sorted(f.keys()) != sorted(NAMES):
                        problems.append("safetensors reads %s as %r" % (path, sorted(f.keys())))
    for p in problems:
        print("PROBLEM:", p)
    print("%d problem(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
