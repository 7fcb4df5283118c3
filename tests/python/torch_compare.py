"""torch_compare.py - maploc.torch.load against torch.load on every fixture and the real-world corpus.

Usage: python3 torch_compare.py FIXTURES_DIR [REAL_FILES_DIR]

For each checkpoint of FIXTURES_DIR/checkpoints/index.json (torch-written by fixtures/generate.py, in the
repository) and each file under REAL_FILES_DIR (the real-world corpus cache, .cache/real/files, when present):
torch.load(f, map_location="cpu", weights_only=True) and maploc.torch.load(f, map_location="cpu") must give
the same structure: the same container types (dict, OrderedDict and its _metadata, list, tuple, set), the same
keys in the same order, equal scalars of the same type, tensors of the same type (Parameter or not),
requires_grad, dtype, shape, stride, storage offset and bytes, the same object where torch returns one object
twice (cycles included), and the same storage sharing (two tensors share a storage in maploc's result exactly
when they do in torch's).

Where torch's weights_only=True refuses an in-repo fixture (a class of generate.py's, an nn.Module), the
fixture is torch-written and in the repository, so torch.load(weights_only=False) is safe and is the
reference (generate.py's classes have stand-ins below); maploc's inert maploc.Object is then compared by its
BUILD state against the instance's __dict__. The real corpus is downloaded, so it is never loaded with
weights_only=False: a file torch's weights_only=True refuses is a counted skip with torch's reason.
Every skip is listed with its reason and counted; exit 1 on any difference, 77 (a ctest skip) when torch
cannot be imported (a failure under MAPLOC_PYTHON_REQUIRED=1). Without the real corpus (no checkpoint under
REAL_FILES_DIR) the fixtures are still compared, and a run without differences then exits 77, not 0: half
the test did not run. Under MAPLOC_REAL_REQUIRED=1 (tools/test.sh, after fetching the CI subset) a file of
the CI subset (fixtures/real/sources.json) missing from the cache is a failure instead.
"""
import collections
import enum
import json
import math
import os
import sys
import tempfile
import warnings

try:
    import torch
except ImportError as e:
    if os.environ.get("MAPLOC_PYTHON_REQUIRED") == "1":
        sys.exit(f"FAIL: torch cannot be imported ({e}) and MAPLOC_PYTHON_REQUIRED=1")
    print(f"SKIP: torch cannot be imported here ({e})")
    sys.exit(77)

import maploc
import maploc.torch

warnings.filterwarnings("ignore")


class TinyNet(torch.nn.Module):
    """Stands in for generate.py's __main__.TinyNet (unpickling restores its __dict__)."""


class SmallNet(torch.nn.Module):
    """Stands in for generate.py's __main__.SmallNet."""


class Block(torch.nn.Module):
    """Stands in for generate.py's __main__.Block."""


class Cfg:
    """Stands in for generate.py's __main__.Cfg (cycle_class.*): attributes only."""


class Tagged(torch.Tensor):
    """Stands in for generate.py's __main__.Tagged (tensor_state.*)."""


class Differ(Exception):
    pass


def storage_ptr(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr()


def raw(t):
    t = t.detach()
    if t.is_quantized:
        t = t.int_repr()
    if t.is_conj():
        t = t.resolve_conj()
    if hasattr(t, "is_neg") and t.is_neg():
        t = t.resolve_neg()
    c = t.contiguous().reshape(-1)
    return c.view(torch.uint8) if c.element_size() > 0 and c.numel() else c


class Comparer:
    def __init__(self, weights_only, values=True):
        self.weights_only = weights_only
        self.values = values
        self.pairs = {}         # id(torch's object) -> maploc's object
        self.keep = []          # keeps compared objects alive, so ids are not reused
        self.storages = {}      # torch storage data_ptr -> maploc storage data_ptr
        self.storages_back = {}
        self.tensors = 0
        self.limits = collections.Counter()

    def same(self, want, got, path):
        if isinstance(want, (dict, list, tuple, set, frozenset, torch.Tensor)) or hasattr(want, "__dict__"):
            if id(want) in self.pairs:
                if self.pairs[id(want)] is not got:
                    raise Differ(f"{path}: torch returns one object here and earlier; maploc two")
                return
            self.pairs[id(want)] = got
            self.keep.append((want, got))
        if isinstance(want, torch.Tensor) and isinstance(got, maploc.torch.WrapperSubclass):
            return self.wrapper(want, got, path)
        if isinstance(want, torch.Tensor):
            return self.tensor(want, got, path)
        if hasattr(torch, "storage") and isinstance(want, getattr(torch.storage, "TypedStorage", ())):
            return self.typed_storage(want, got, path)
        if isinstance(got, maploc.Object):
            if self.weights_only:
                raise Differ(f"{path}: maploc gives an inert {got.cls} where torch gives {type(want).__name__}")
            state = got.state
            if not isinstance(state, dict):   # numpy's ndarray: (version, shape, dtype, fortran, bytes)
                self.limits[f"inert {got.cls} with a non-dict state, not compared (weights_only=False reference)"] += 1
                return
            self.limits["class instances compared by __dict__ (weights_only=False reference)"] += 1
            attrs = dict(vars(want))
            added = [k for k in attrs if k not in state]   # set by the class's __setstate__ (nn.Module in 2.x)
            if added:
                self.limits["attributes a class's __setstate__ adds, absent from the file's state"] += len(added)
            return self.mapping({k: v for k, v in attrs.items() if k in state}, state, path)
        if type(want) is not type(got) and not (isinstance(want, torch.Size) and type(got) is torch.Size):
            raise Differ(f"{path}: torch gives {type(want).__name__}, maploc {type(got).__name__}")
        if isinstance(want, dict):
            self.mapping(want, got, path)
            if hasattr(want, "_metadata") or hasattr(got, "_metadata"):
                self.same(getattr(want, "_metadata", None), getattr(got, "_metadata", None), path + "._metadata")
        elif isinstance(want, (list, tuple)):
            if len(want) != len(got):
                raise Differ(f"{path}: {len(want)} items in torch's, {len(got)} in maploc's")
            for i, (w, g) in enumerate(zip(want, got)):
                self.same(w, g, f"{path}[{i}]")
        elif isinstance(want, float):
            if not (want == got or (math.isnan(want) and math.isnan(got))):
                raise Differ(f"{path}: {want!r} != {got!r}")
        elif want != got:
            raise Differ(f"{path}: {want!r} != {got!r}")

    def mapping(self, want, got, path):
        if list(want.keys()) != list(got.keys()):
            raise Differ(f"{path}: keys differ: torch {list(want)[:8]}..., maploc {list(got)[:8]}...")
        for k in want:
            self.same(want[k], got[k], f"{path}[{k!r}]")

    def typed_storage(self, want, got, path):
        if type(got) is not type(want) or want.dtype != got.dtype or want.size() != got.size():
            raise Differ(f"{path}: storage {type(want).__name__} {want.dtype} {want.size()} != "
                         f"{type(got).__name__} {getattr(got, 'dtype', None)} {getattr(got, 'size', lambda: None)()}")
        if want.tolist() != got.tolist():
            raise Differ(f"{path}: storage values differ")
        w, g = want.data_ptr(), got.data_ptr()
        if want.size() and (self.storages.setdefault(w, g) != g or self.storages_back.setdefault(g, w) != w):
            raise Differ(f"{path}: storage sharing differs from torch's")
        self.tensors += 1

    def wrapper(self, want, got, path):
        """A wrapper subclass torch rebuilt by importing its class; maploc.torch's inert WrapperSubclass: the
        class's name, the outer shape/dtype/requires_grad, every inner tensor (__tensor_flatten__'s names) and
        every plain attribute."""
        if got.cls.rsplit(".", 1)[-1] != type(want).__name__:
            raise Differ(f"{path}: torch gives a {type(want).__name__}, maploc names {got.cls}")
        for what in ("dtype", "shape", "requires_grad"):
            if getattr(want, what) != getattr(got, what):
                raise Differ(f"{path}: {what} {getattr(want, what)} != {getattr(got, what)}")
        names = list(want.__tensor_flatten__()[0]) if hasattr(want, "__tensor_flatten__") else list(got)
        if sorted(names) != sorted(got):
            raise Differ(f"{path}: inner tensors {names} in torch's, {list(got)} in maploc's")
        for name in names:
            self.same(getattr(want, name), got[name], f"{path}.{name}")
        for name, value in got.attributes.items():
            mine = getattr(want, name, None)
            if isinstance(mine, enum.Enum) and isinstance(value, dict) and "class" in value:
                if value["class"].rsplit(".", 1)[-1] != type(mine).__name__ or value.get("value") != mine.value:
                    raise Differ(f"{path}.{name}: {mine!r} != {value!r}")
                continue
            if isinstance(mine, torch.dtype) and isinstance(value, dict) and "dtype" in value:
                if str(mine) != "torch." + value["dtype"]:
                    raise Differ(f"{path}.{name}: {mine!r} != {value!r}")
                continue
            if isinstance(mine, (tuple, list)):
                mine = [list(x) if isinstance(x, tuple) else x for x in mine]
            if mine is None or isinstance(mine, (bool, int, float, str, list)):
                if mine != value:
                    raise Differ(f"{path}.{name}: {mine!r} != {value!r}")
            else:
                self.limits[f"wrapper-subclass attributes of non-plain types not compared ({type(mine).__name__})"] += 1
        self.limits["wrapper subclasses as maploc.torch.WrapperSubclass (inner tensors and attributes compared)"] += 1
        self.tensors += 1

    def jagged(self, want, got, path):
        """A jagged nested tensor: its values, offsets and lengths as tensors, ragged_idx and the cached
        min/max sequence lengths (the shape's nested int differs by construction: it names the offsets)."""
        if not (got.is_nested and got.layout == want.layout):
            raise Differ(f"{path}: torch gives a jagged nested tensor, maploc a {got.layout} {type(got).__name__}")
        for what in ("dtype", "requires_grad", "device", "_ragged_idx", "dim"):
            w, g = getattr(want, what), getattr(got, what)
            w, g = (w(), g()) if callable(w) else (w, g)
            if w != g:
                raise Differ(f"{path}: {what} {w} != {g}")
        for what in ("_min_seqlen", "_max_seqlen"):
            if hasattr(want, what) and getattr(want, what) != getattr(got, what):
                raise Differ(f"{path}: {what} {getattr(want, what)} != {getattr(got, what)}")
        for part in ("_values", "_offsets", "_lengths"):
            w, g = getattr(want, part), getattr(got, part)
            if (w is None) != (g is None):
                raise Differ(f"{path}.{part}: torch's is {w is not None and 'set' or 'None'}, maploc's not")
            if w is not None:
                self.same(w, g, f"{path}.{part}")
        self.limits["jagged nested tensors compared by values/offsets/lengths, ragged_idx, min/max seqlen"] += 1
        self.tensors += 1

    def nested(self, want, got, path):
        """A strided nested tensor: its buffer's geometry (sizes, strides, offsets) and each constituent."""
        if not getattr(got, "is_nested", False) or got.layout != torch.strided:
            raise Differ(f"{path}: torch gives a strided nested tensor, maploc a {type(got).__name__}")
        for what in ("dtype", "requires_grad", "device"):
            if getattr(want, what) != getattr(got, what):
                raise Differ(f"{path}: {what} {getattr(want, what)} != {getattr(got, what)}")
        for what in ("_nested_tensor_size", "_nested_tensor_strides", "_nested_tensor_storage_offsets"):
            if hasattr(want, what) and not torch.equal(getattr(want, what)(), getattr(got, what)()):
                raise Differ(f"{path}: {what} differs")
        w, g = want.unbind(), got.unbind()
        if len(w) != len(g) or not all(torch.equal(a, b) for a, b in zip(w, g)):
            raise Differ(f"{path}: constituents differ")
        self.limits["strided nested tensors compared by sizes/strides/offsets and constituents"] += 1
        self.tensors += 1

    def quantizer(self, want, got, path):
        if want.qscheme() != got.qscheme():
            raise Differ(f"{path}: qscheme {want.qscheme()} != {got.qscheme()}")
        if want.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            if (want.q_scale(), want.q_zero_point()) != (got.q_scale(), got.q_zero_point()):
                raise Differ(f"{path}: scale/zero_point {want.q_scale()}/{want.q_zero_point()} != "
                             f"{got.q_scale()}/{got.q_zero_point()}")
        else:
            if want.q_per_channel_axis() != got.q_per_channel_axis():
                raise Differ(f"{path}: axis {want.q_per_channel_axis()} != {got.q_per_channel_axis()}")
            for what in ("q_per_channel_scales", "q_per_channel_zero_points"):
                w, g = getattr(want, what)(), getattr(got, what)()
                if w.dtype != g.dtype or not torch.equal(w, g):
                    raise Differ(f"{path}: {what} {w} != {g}")
        self.limits["quantized tensors compared by int_repr, qscheme, scale(s), zero point(s), axis"] += 1

    def tensor(self, want, got, path):
        if not isinstance(got, torch.Tensor):
            raise Differ(f"{path}: torch gives a tensor, maploc {type(got).__name__}")
        if getattr(want, "is_nested", False) and want.layout != torch.strided:
            return self.jagged(want, got, path)
        if getattr(want, "is_nested", False):
            return self.nested(want, got, path)
        if want.is_quantized != got.is_quantized:
            raise Differ(f"{path}: quantized in torch's: {want.is_quantized}, in maploc's: {got.is_quantized}")
        if want.is_quantized:
            self.quantizer(want, got, path)
        wp, gp = isinstance(want, torch.nn.Parameter), isinstance(got, torch.nn.Parameter)
        if wp != gp:
            raise Differ(f"{path}: Parameter in torch's: {wp}, in maploc's: {gp}")
        if type(want) not in (torch.Tensor, torch.nn.Parameter) and type(got) is not type(want):
            self.limits[f"tensor subclass {type(want).__name__} returned as {type(got).__name__}"] += 1
        for what in ("dtype", "shape", "requires_grad", "device"):
            if getattr(want, what) != getattr(got, what):
                raise Differ(f"{path}: {what} {getattr(want, what)} != {getattr(got, what)}")
        if want.layout != got.layout:
            raise Differ(f"{path}: layout {want.layout} != {got.layout}")
        if want.layout != torch.strided:
            if not torch.equal(want.to_dense(), got.to_dense()):
                raise Differ(f"{path}: values differ")
            self.limits["sparse tensors compared by their dense values (coalesced flag not restored)"] += 1
        elif want.device.type != "meta":
            if want.stride() != got.stride() or want.storage_offset() != got.storage_offset():
                raise Differ(f"{path}: stride/offset {want.stride()}/{want.storage_offset()} != "
                             f"{got.stride()}/{got.storage_offset()}")
            if self.values and not torch.equal(raw(want), raw(got)):
                raise Differ(f"{path}: values differ")
            w, g = storage_ptr(want), storage_ptr(got)
            if want.numel():
                if self.storages.setdefault(w, g) != g or self.storages_back.setdefault(g, w) != w:
                    raise Differ(f"{path}: storage sharing differs from torch's")
        self.tensors += 1


def torch_load(path, weights_only):
    if weights_only:
        return torch.load(path, map_location="cpu", weights_only=True)
    return torch.load(path, map_location="cpu")  # torch 1.13's default, weights_only=False in 2.x needs it named


def torch_load_unsafe(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:
        return torch.load(path, map_location="cpu")


def compare(path, in_repo, fmt, tally, skips, failures, manifest=None):
    name = os.path.relpath(path)
    if fmt == "torchscript":
        skips.append((name, "TorchScript archive: torch.load hands it to torch.jit.load (a ScriptModule, runs "
                            "TorchScript code); maploc returns data.pkl inertly"))
        return
    weights_only = True
    try:
        want = torch_load(path, True)
    except Exception as e:  # torch's refusal or failure, with its reason
        reason = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        if not in_repo:
            skips.append((name, f"torch.load(weights_only=True) refuses it ({reason}); downloaded, so never "
                                "loaded with weights_only=False"))
            return
        try:
            want = torch_load_unsafe(path)
            weights_only = False
        except Exception as e2:
            skips.append((name, f"torch {torch.__version__} cannot read it ({type(e2).__name__}: "
                                f"{str(e2).splitlines()[0][:160] if str(e2) else ''})"))
            return
    try:
        got = maploc.torch.load(path, map_location="cpu")
    except maploc.Error as e:
        if e.code == 313 and str(e).startswith("maploc.torch:"):
            skips.append((name, f"maploc.torch limit: {e}"))
        else:
            failures.append((name, f"maploc.torch.load raised {e.code_name}: {e}"))
        return
    # A big-endian file: torch < 2.1 has no byteorder record and reads its bytes unswapped, so there
    # torch's values are wrong; maploc's are checked against the manifest's (torch 2.x's) hashes instead.
    big = manifest is not None and manifest.get("byteorder") == "big" and \
        tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 1)
    if big:
        hashes = {t["name"]: t["sha256"] for t in manifest["tensors"]}
        flat = maploc.tensors(path, map_location="cpu")
        bad = [n for n, h in hashes.items() if flat[n].sha256() != h]
        if bad:
            failures.append((name, f"values differ from the manifest: {bad[:5]}"))
            return
        tally[f"big-endian files: values against the manifest (torch {torch.__version__} does not swap)"] += 1
    c = Comparer(weights_only, values=not big)
    try:
        c.same(want, got, "")
    except Differ as e:
        failures.append((name, str(e)))
        return
    tally["files"] += 1
    tally["weights_only" if weights_only else "weights_only=False (in-repo, torch-written)"] += 1
    tally["tensors"] += c.tensors
    for k, v in c.limits.items():
        tally[k] += v


def collision_check(failures):
    """maploc.tensors raises on two tensors with one name; maploc.load keeps both."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "collide.pt")
        torch.save({1: torch.zeros(2), "1": torch.ones(3)}, path)
        try:
            maploc.tensors(path)
            failures.append(("collide.pt", "maploc.tensors did not raise on two tensors named '1'"))
        except maploc.Error as e:
            if e.code != 4:
                failures.append(("collide.pt", f"maploc.tensors raised code {e.code}"))
        obj = maploc.torch.load(path)
        if list(obj) != [1, "1"] or obj[1].shape != (2,) or obj["1"].shape != (3,):
            failures.append(("collide.pt", f"maploc.torch.load gave {obj}"))
        with open(path, "rb") as f:   # a file object as well
            if list(maploc.torch.load(f)) != [1, "1"]:
                failures.append(("collide.pt", "maploc.torch.load of a file object differs"))


def roundtrip_check(tally, failures):
    """Values torch.save writes that the fixtures lack: a cycle through a tuple, a dict holding itself, sets,
    an int beyond 64 bits, complex, bytearray, a dtype, a torch.Size, protocols 2 and 4."""
    cycle = []
    t = (cycle, torch.ones(2))
    cycle.append(t)
    d = {"t": t, "l": cycle, "s": {1, 2}, "fs": frozenset([3]), "b": b"xy", "big": 2 ** 80, "neg": -5,
         "f": float("nan"), "c": 1 + 2j, "ba": bytearray(b"q"), "dt": torch.float16, "sz": torch.Size([2, 3])}
    d["self"] = d
    with tempfile.TemporaryDirectory() as tmp:
        for protocol in (2, 4):
            path = os.path.join(tmp, f"values_p{protocol}.pt")
            torch.save(d, path, pickle_protocol=protocol)
            try:
                Comparer(False).same(torch_load_unsafe(path), maploc.torch.load(path), "")  # our own file
                tally["checked too: files this test writes (a cycle through a tuple, sets, big ints, ...)"] += 1
            except (Differ, maploc.Error) as e:
                failures.append((os.path.basename(path), str(e)))


def composite_check(tally, failures):
    """Kinds the fixtures lack, written here and compared against torch.load(weights_only=False) of this test's
    own file: qint32, per_channel_affine_float_qparams and a transposed (non-contiguous) quantized tensor shared
    twice; a strided nested tensor where this torch can save one."""
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 7
    d = {"qint32": torch.quantize_per_tensor(x, 0.01, 3, torch.qint32),
         "float_qparams": torch.quantize_per_channel(x, torch.rand(4) + 0.1, torch.randn(4), 0, torch.quint8),
         "transposed": torch.quantize_per_tensor(x, 0.1, 1, torch.qint8).t()}
    d["again"] = d["transposed"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, value in (("quantized_more", d), ("nested_strided", "nested")):
            path = os.path.join(tmp, name + ".pt")
            if value == "nested":
                try:
                    value = {"n": torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])}
                    torch.save(value, path)
                except (RuntimeError, AttributeError) as e:
                    tally[f"checked too: not written, torch {torch.__version__} cannot save a strided nested tensor"] += 1
                    continue
            else:
                torch.save(value, path)
            try:
                c = Comparer(False)
                c.same(torch_load_unsafe(path), maploc.torch.load(path), "")  # our own file
                tally[f"checked too: files this test writes ({name}: {c.tensors} tensors, "
                      f"{sum(c.limits.values())} compared in their own terms)"] += 1
            except (Differ, maploc.Error) as e:
                failures.append((os.path.basename(path), str(e)))


def missing_ci_files(fixtures, real):
    """The CI subset's files (fixtures/real/fetch.py's sources marked "ci") not in the cache REAL is the files/ of."""
    sys.path.insert(0, os.path.join(fixtures, "real"))
    import fetch  # noqa: E402 - fixtures/real/fetch.py: where each file of the corpus is cached
    cache = os.path.dirname(os.path.normpath(real)) if real else fetch.DEFAULT_CACHE
    return [f"{s['id']}/{e['member']}" for s in fetch.load_sources() if s["ci"] for e in s["files"]
            if not os.path.isfile(fetch.file_path(cache, s, e))]


def main():
    fixtures = sys.argv[1]
    real = sys.argv[2] if len(sys.argv) > 2 else None
    sys.modules["__main__"].__dict__.update(TinyNet=TinyNet, SmallNet=SmallNet, Block=Block, Cfg=Cfg, Tagged=Tagged)
    tally, skips, failures = collections.Counter(), [], []
    with open(os.path.join(fixtures, "checkpoints", "index.json")) as f:
        index = json.load(f)
    for entry in index:
        with open(os.path.join(fixtures, "checkpoints", entry["manifest"])) as f:
            manifest = json.load(f)
        compare(os.path.join(fixtures, "checkpoints", entry["file"]), True, entry.get("format"), tally, skips,
                failures, manifest)
    checked_real = 0
    if real and os.path.isdir(real):
        for root, _, files in sorted(os.walk(real)):
            for f in sorted(files):
                if f.endswith((".pt", ".pth", ".ckpt", ".bin", ".tar")):
                    checked_real += 1
                    compare(os.path.join(root, f), False, None, tally, skips, failures)
    else:
        skips.append((str(real), "no real-world corpus cache here (fixtures/real/fetch.py fills it)"))
    collision_check(failures)
    roundtrip_check(tally, failures)
    composite_check(tally, failures)
    print(f"torch {torch.__version__}: {tally['files']} files equal ({tally['weights_only']} against "
          f"weights_only=True, {tally['weights_only=False (in-repo, torch-written)']} against weights_only=False), "
          f"{tally['tensors']} tensors compared; {len(index)} fixtures, {checked_real} real-corpus files")
    for k, v in sorted(tally.items()):
        if k not in ("files", "tensors", "weights_only", "weights_only=False (in-repo, torch-written)"):
            print(f"  {'' if k.startswith('checked') else 'limit: '}{k}: {v}")
    print(f"{len(skips)} skipped:")
    for name, why in skips:
        print(f"  SKIP {name}: {why}")
    for name, why in failures:
        print(f"  FAIL {name}: {why}")
    print(f"{len(failures)} differ")
    if os.environ.get("MAPLOC_REAL_REQUIRED") == "1":
        missing = missing_ci_files(fixtures, real)
        if missing or not checked_real:
            print(f"FAIL: MAPLOC_REAL_REQUIRED=1 but {len(missing)} file(s) of the real corpus's CI subset are not "
                  f"under {real}{' (first: ' + missing[0] + ')' if missing else ''} and {checked_real} real-corpus "
                  "files were compared: run `python3 fixtures/real/fetch.py`")
            return 1
    if failures:
        return 1
    if not checked_real:
        print(f"SKIP: the fixtures are equal, but no real-corpus file was compared (none under {real}: "
              "`python3 fixtures/real/fetch.py` fetches the CI subset)")
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
