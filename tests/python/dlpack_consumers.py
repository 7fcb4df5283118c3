"""dlpack_consumers.py - every fixture tensor handed to numpy or torch by DLPack through the maploc module:
zero-copy (the consumer's data pointer is the one maploc reports), torch's geometry, values equal to torch's
manifest; and an array kept after the dict, the load and the file handles are gone still reads right.
Usage: python3 dlpack_consumers.py numpy|torch FIXTURES_DIR. Exit 77 (a ctest skip) when the consumer
cannot be imported, a failure instead under MAPLOC_PYTHON_REQUIRED=1 (tools/test.sh, which installs both)."""
import ctypes
import gc
import hashlib
import json
import os
import sys

CONSUMER, FIXTURES = sys.argv[1], sys.argv[2]
try:
    if CONSUMER == "numpy":
        import numpy
    else:
        import torch
except ImportError as e:
    if os.environ.get("MAPLOC_PYTHON_REQUIRED") == "1":
        sys.exit(f"FAIL: {CONSUMER} cannot be imported ({e}) and MAPLOC_PYTHON_REQUIRED=1")
    print(f"SKIP: {CONSUMER} cannot be imported here ({e})")
    sys.exit(77)

import maploc

# Refused by maploc itself: dtypes DLPack has no code for (quantized, bits; float8/float4 under DLPack < 1.1).
MAPLOC_REFUSES = ("qint8", "quint8", "qint32", "bits8", "bits16", "float8_e5m2", "float8_e4m3fn",
                  "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2")
# Refused by the consumer: dtypes it has no type for.
if CONSUMER == "numpy":
    CONSUMER_REFUSES = ("bfloat16", "complex32")  # numpy has neither
else:  # torch < 2.3 has no uint16-64; a later one must take them
    CONSUMER_REFUSES = () if hasattr(torch, "uint16") else ("uint16", "uint32", "uint64")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def from_dlpack(t):
    return numpy.from_dlpack(t) if CONSUMER == "numpy" else torch.from_dlpack(t)


def pointer_of(a):
    return a.__array_interface__["data"][0] if CONSUMER == "numpy" else a.data_ptr()


def strides_of(a):
    return tuple(s // a.itemsize for s in a.strides) if CONSUMER == "numpy" else tuple(a.stride())


def sha256_of(a):
    if CONSUMER == "numpy":
        return hashlib.sha256(numpy.ascontiguousarray(a).tobytes()).hexdigest()
    c = a.contiguous()  # as fixtures/generate.py hashes: raw row-major bytes
    n = c.numel() * c.element_size()
    return hashlib.sha256(ctypes.string_at(c.data_ptr(), n) if n else b"").hexdigest()


def check_fixture(file, manifest, host):
    tensors = maploc.tensors(os.path.join(FIXTURES, "checkpoints", file), map_location="cpu", host=host)
    counts = {"taken": 0, "refused": 0}
    listed = set()
    for want in manifest["tensors"]:
        name, dtype = want["name"], want["dtype"]
        where = f"{file} ({host}) {name} {dtype}"
        listed.add(name)
        t = tensors[name]
        try:
            a = from_dlpack(t)
        except BufferError as e:  # maploc's refusal names the tensor
            assert dtype in MAPLOC_REFUSES, f"{where}: refused by maploc: {e}"
            assert f"'{name}'" in str(e), f"{where}: the refusal does not name the tensor: {e}"
            counts["refused"] += 1
            continue
        except (TypeError, RuntimeError, ValueError) as e:
            assert dtype in CONSUMER_REFUSES, f"{where}: {CONSUMER} refused it: {e}"
            counts["refused"] += 1
            continue
        assert tuple(a.shape) == tuple(want["shape"]), f"{where}: shape {a.shape}"
        if a.size if CONSUMER == "numpy" else a.numel():
            assert pointer_of(a) == t.data_ptr, f"{where}: copied ({pointer_of(a):#x} != {t.data_ptr:#x})"
            assert strides_of(a) == tuple(want["stride"]), f"{where}: strides {strides_of(a)}"
        assert sha256_of(a) == want["sha256"], f"{where}: values differ from torch's manifest"
        counts["taken"] += 1
    # Composites (sparse, nested, ...) are listed by their components: refused by name, never a wrong view.
    for name, t in tensors.items():
        if name not in listed and t.kind not in ("dense", "storage"):
            try:
                t.__dlpack__()
            except BufferError as e:
                assert f"'{name}'" in str(e), f"{file} {name}: {e}"
                continue
            raise AssertionError(f"{file} {name}: a {t.kind} tensor was exported")
    return counts


def check_lifetime(host):
    """Arrays kept after the dict, the Tensor objects and the C handles are all dropped stay valid."""
    file = "views_shared.t113.pt"
    manifest = read_json(os.path.join(FIXTURES, "checkpoints", file + ".manifest.json"))
    tensors = maploc.tensors(os.path.join(FIXTURES, "checkpoints", file), map_location="cpu", host=host)
    kept = {name: from_dlpack(t) for name, t in tensors.items() if name in ("base", "transpose", "tied_a")}
    unconsumed = tensors["tied_b"].__dlpack__()  # a capsule never consumed: released by its destructor
    del tensors, unconsumed
    gc.collect()
    for want in manifest["tensors"]:
        if want["name"] in kept:
            assert sha256_of(kept[want["name"]]) == want["sha256"], f"{want['name']} changed after the load was freed"


def main():
    index = read_json(os.path.join(FIXTURES, "checkpoints", "index.json"))
    totals = {"taken": 0, "refused": 0}
    for entry in index:
        manifest = read_json(os.path.join(FIXTURES, "checkpoints", entry["manifest"]))
        hosts = ("view", "copy") if len(manifest["tensors"]) < 1000 else ("view",)
        for host in hosts:
            for k, v in check_fixture(entry["file"], manifest, host).items():
                totals[k] += v
    for host in ("view", "copy"):
        check_lifetime(host)
    assert totals["taken"] > 1000, totals
    print(f"{CONSUMER} {getattr(sys.modules[CONSUMER], '__version__', '?')}: {totals['taken']} tensors taken "
          f"zero-copy with torch's values, {totals['refused']} refused (dtypes DLPack or {CONSUMER} lack)")


main()
