#!/usr/bin/env python3
"""torch_check.py - real torch and the safetensors package read what maploc wrote.

  torch_check.py remap MAPLOC FIXTURES WORKDIR
      maploc remap every fixture (--map-location cpu), torch.load each output
      WITHOUT map_location (this machine has no GPU in CI), compare every
      manifest tensor (sha256 of the row-major values) and require device cpu.
  torch_check.py safetensors MAPLOC FIXTURES WORKDIR
      maploc convert every zip fixture of dense tensors to .safetensors, read it
      with safetensors.torch.load_file, compare with the manifest; then convert
      back to .pt and torch.load that.

Exit 0 when everything matched, 1 on a mismatch, 77 (ctest SKIP_RETURN_CODE)
when torch (or safetensors) is not importable here. A missing torch is a failure instead under
MAPLOC_PYTHON_REQUIRED=1 (tools/test.sh, after install-deps), and so is a missing torch or
safetensors in the safetensors mode under MAPLOC_SAFETENSORS_REQUIRED=1 (tools/test.sh, which
installs the package).
"""
import ctypes
import hashlib
import json
import os
import subprocess
import sys

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means: skip, unless torch is required
    required = [v for v in ("MAPLOC_PYTHON_REQUIRED", "MAPLOC_SAFETENSORS_REQUIRED") if os.environ.get(v) == "1"]
    if sys.argv[1:2] != ["safetensors"] and "MAPLOC_SAFETENSORS_REQUIRED" in required:
        required.remove("MAPLOC_SAFETENSORS_REQUIRED")  # the remap mode needs torch, not safetensors
    if required:
        print("FAILED: torch is not importable by %s although %s=1: %s" % (sys.executable, required[0], e))
        sys.exit(1)
    print("SKIP: torch is not importable: %s" % e)
    sys.exit(77)

T2 = int(torch.__version__.split(".")[0]) >= 2
LOAD_KW = {"weights_only": False} if T2 else {}
SPARSE = {"sparse_coo": ("indices", "values"), "sparse_csr": ("crow_indices", "col_indices", "values"),
          "sparse_csc": ("ccol_indices", "row_indices", "values"),
          "sparse_bsr": ("crow_indices", "col_indices", "values"),
          "sparse_bsc": ("ccol_indices", "row_indices", "values")}


class TinyNet(torch.nn.Module):
    """Stands in for generate.py's __main__.TinyNet: unpickling restores its __dict__."""


class SmallNet(torch.nn.Module):
    """Stands in for generate.py's __main__.SmallNet."""


class Cfg:
    """Stands in for generate.py's __main__.Cfg (cycle_class.*): attributes only."""


class Tagged(torch.Tensor):
    """Stands in for generate.py's __main__.Tagged (tensor_state.*): a subclass whose state is restored."""


def wrapper_subclass(t):
    """A tensor subclass with its own __torch_dispatch__ and no data of its own (torchao's, TwoTensor)."""
    dispatch = getattr(type(t), "__torch_dispatch__", None)
    return (type(t) is not torch.Tensor and dispatch is not None
            and dispatch is not getattr(torch.Tensor, "__torch_dispatch__", None) and t.data_ptr() == 0)


def join(prefix, key):
    return str(key) if prefix == "" else "%s.%s" % (prefix, key)


def tensor_sha(t):
    t = t.detach()
    if t.is_quantized:
        t = t.int_repr()
    c = t.contiguous()
    n = c.numel() * c.element_size()
    return hashlib.sha256(ctypes.string_at(c.data_ptr(), n) if n else b"").hexdigest()


STATES = object()  # key in flatten's output: name -> tensor with a __dict__


def check_states(label, flat, manifest, problems):
    """Every attribute the manifest lists for a tensor's state (its tensor-free ones) is back, with its
    value where that is a plain scalar."""
    wanted = [(e["name"], e["state"]) for e in manifest["tensors"] if e.get("state")]
    wanted += [(o["name"], o["state"]) for o in manifest.get("objects", []) if o.get("wrapper_subclass")]
    have = flat.get(STATES, {})
    for name, state in wanted:
        t = have.get(name)
        if t is None:
            problems.append("%s: %s has no state after loading" % (label, name))
            continue
        for k, v in state.items():
            if k not in vars(t):
                problems.append("%s: %s lost attribute %r" % (label, name, k))
            elif (v is None or type(v) in (bool, int, float, str)) and vars(t)[k] != v:
                problems.append("%s: %s.%s is %r, manifest says %r" % (label, name, k, vars(t)[k], v))
    return len(wanted)


def flatten(obj, prefix, out, walking=None):
    """name -> tensor, named the way the fixture manifests name them. A path back
    to an object being walked (a reference cycle, cycle_*.pt) is not followed;
    the manifests' names are all among those this gives."""
    walking = set() if walking is None else walking
    if id(obj) in walking:
        return
    if not isinstance(obj, torch.Tensor):
        walking.add(id(obj))
        try:
            flatten_items(obj, prefix, out, walking)
        finally:
            walking.discard(id(obj))
        return
    if obj.layout == getattr(torch, "jagged", None):  # docs/torch.md: parts <name>.values/.offsets/.lengths
        for part in ("values", "offsets", "lengths"):
            if getattr(obj, "_" + part) is not None:
                flatten(getattr(obj, "_" + part), join(prefix, part), out, walking)
        return
    if obj.layout != torch.strided:
        lay = str(obj.layout).replace("torch.", "")
        parts = [obj._indices(), obj._values()] if lay == "sparse_coo" else \
            [getattr(obj, n)() for n in SPARSE[lay]]
        for n, c in zip(SPARSE[lay], parts):
            out[join(prefix, n)] = c
    elif not wrapper_subclass(obj):
        out[prefix] = obj
    # docs/torch.md, "Tensor state": tensors in a tensor's __dict__ are named <name>.<attribute>.
    if getattr(obj, "__dict__", None):
        out.setdefault(STATES, {})[prefix] = obj
        walking.add(id(obj))
        try:
            for k, v in vars(obj).items():
                flatten(v, join(prefix, k), out, walking)
        finally:
            walking.discard(id(obj))


def flatten_items(obj, prefix, out, walking):
    if isinstance(obj, torch.nn.Module):
        for k, t in obj.state_dict(keep_vars=True).items():
            flatten(t, join(prefix, k), out, walking)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, join(prefix, k), out, walking)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, join(prefix, i), out, walking)
    elif hasattr(obj, "__dict__") and (type(obj).__module__ == "argparse" or isinstance(obj, Cfg)):
        for k, v in vars(obj).items():
            flatten(v, join(prefix, k), out, walking)


def compare(label, loaded, manifest, problems, want_cpu=True, states=None):
    flat = {}
    flatten(loaded, "", flat)
    checked = 0
    if states is not None:  # torch.load of a remapped file: the state must be back too
        states.append(check_states(label, flat, manifest, problems))
    for e in manifest["tensors"]:
        t = flat.get(e["name"])
        if t is None:
            problems.append("%s: tensor %r missing (have %s)" % (label, e["name"], sorted(flat)[:8]))
            continue
        if want_cpu and t.device.type != "cpu":
            problems.append("%s: %s is on %s" % (label, e["name"], t.device))
        if list(t.shape) != e["shape"] or str(t.dtype).replace("torch.", "") != e["dtype"]:
            problems.append("%s: %s is %s %s, manifest says %s %s" % (label, e["name"], t.dtype, list(t.shape),
                                                                      e["dtype"], e["shape"]))
        elif tensor_sha(t) != e["sha256"]:
            problems.append("%s: %s values differ from the manifest" % (label, e["name"]))
        checked += 1
    return checked


def maploc(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def newer_dtype(name):
    """A dtype torch 1.13 does not have (the manifests' names)."""
    return name in ("uint16", "uint32", "uint64") or name.startswith("float8")


def readable_here(path):
    """Can this torch read the source at all (t2x fixtures may need torch 2)?"""
    try:
        torch.load(path, map_location="cpu", **LOAD_KW)
        return True
    except Exception:  # noqa: BLE001 - any refusal means: not this torch's file
        return False


def run_remap(binary, fixtures, work):
    problems, done, skipped, states, sharded = [], 0, [], [], 0
    for entry in json.load(open(os.path.join(fixtures, "index.json"))):
        src = os.path.join(fixtures, entry["file"])
        manifest = json.load(open(os.path.join(fixtures, entry["manifest"])))
        out = os.path.join(work, entry["file"] + ".remapped.pt")
        r = maploc(binary, "remap", src, out, "--map-location", "cpu")
        if r.returncode != 0:
            problems.append("%s: maploc remap failed: %s" % (entry["file"], r.stderr.strip()))
            continue
        if not readable_here(src) and not readable_here(out):
            skipped.append(entry["file"])  # e.g. torch-2 dtypes under torch 1.13
            continue
        try:
            loaded = torch.load(out, **LOAD_KW)  # no map_location: the tags must say cpu
        except Exception as e:  # noqa: BLE001
            problems.append("%s: torch.load of the remapped file failed: %s" % (entry["file"], e))
            continue
        done += compare(entry["file"], loaded, manifest, problems, states=states)
        sharded += check_shards(binary, entry, src, manifest, work, problems, states)
    print("remap: torch %s loaded %d tensors without map_location, %d tensor states; skipped (unreadable by "
          "this torch): %s" % (torch.__version__, done, sum(states), ", ".join(skipped) or "none"))
    print("remap --shard-size: %d tensors matched across the shards, loaded and merged as transformers does"
          % sharded)
    return problems


def check_shards(binary, entry, src, manifest, work, problems, states):
    """maploc remap --shard-size writes shards of at most 200 bytes; torch.load of each, merged into
    one dict, holds every manifest tensor (wrapper subclasses and jagged tensors whole, with their
    state), and the index's weight_map names exactly the keys of the shards."""
    out = os.path.join(work, entry["file"] + ".shards")
    r = maploc(binary, "remap", src, out, "--map-location", "cpu", "--shard-size", "200B")
    if r.returncode != 0:
        problems.append("%s: maploc remap --shard-size failed: %s" % (entry["file"], r.stderr.strip()))
        return 0
    index = json.load(open(os.path.join(out, "pytorch_model.bin.index.json")))
    merged = {}
    for shard in sorted(set(index["weight_map"].values())):
        part = torch.load(os.path.join(out, shard), **LOAD_KW)
        for k in part:
            if index["weight_map"].get(k) != shard:
                problems.append("%s: shard %s holds %r, the index says %r" % (entry["file"], shard, k,
                                                                                index["weight_map"].get(k)))
        merged.update(part)
    if sorted(merged) != sorted(index["weight_map"]):
        problems.append("%s: the shards hold %d keys, the weight_map %d" % (entry["file"], len(merged),
                                                                           len(index["weight_map"])))
    return compare(entry["file"] + " (shards)", merged, manifest, problems, states=states)


def run_safetensors(binary, fixtures, work):
    try:
        from safetensors.torch import load_file
    except Exception as e:  # noqa: BLE001
        if os.environ.get("MAPLOC_SAFETENSORS_REQUIRED") == "1":
            print("FAILED: safetensors is not importable by %s although MAPLOC_SAFETENSORS_REQUIRED=1: %s"
                  % (sys.executable, e))
            sys.exit(1)
        print("SKIP: safetensors is not importable: %s" % e)
        sys.exit(77)
    problems, done, refused, unreadable = [], 0, [], []
    sources = [(e["file"], os.path.join(fixtures, "checkpoints", e["file"]) if False else
                os.path.join(fixtures, "checkpoints", e["file"]), e["manifest"], "checkpoints")
               for e in json.load(open(os.path.join(fixtures, "checkpoints", "index.json")))]
    st_index = os.path.join(fixtures, "safetensors", "index.json")
    st_sources = json.load(open(st_index)) if os.path.exists(st_index) else []
    for file, src, man, sub in sources:
        manifest = json.load(open(os.path.join(fixtures, sub, man)))
        out = os.path.join(work, file + ".safetensors")
        r = maploc(binary, "convert", src, out)
        if r.returncode != 0:
            refused.append(file)  # sparse, quantized, nested ... say so and write nothing
            if os.path.exists(out):
                problems.append("%s: convert failed but left %s" % (file, out))
            continue
        try:
            loaded = load_file(out)
        except Exception as e:  # noqa: BLE001
            if not T2 and any(newer_dtype(t["dtype"]) for t in manifest["tensors"]):
                unreadable.append(file)  # torch 1.13 has no such dtypes: said below, not a pass
                continue
            problems.append("%s: safetensors.load_file failed: %s" % (file, e))
            continue
        md = {}
        try:
            from safetensors import safe_open
            with safe_open(out, "pt") as f:
                md = f.metadata() or {}
        except Exception as e:  # noqa: BLE001
            problems.append("%s: safe_open failed: %s" % (file, e))
        for k, kept in md.items():  # tied tensors come back under both names
            if k.startswith("maploc.tied.") and kept in loaded:
                loaded[k[len("maploc.tied."):]] = loaded[kept]
        done += compare(file + " (safetensors)", loaded, manifest, problems)
    for e in st_sources:
        src = os.path.join(fixtures, "safetensors", e["file"])
        manifest = json.load(open(os.path.join(fixtures, "safetensors", e["manifest"])))
        out = os.path.join(work, e["file"] + ".pt")
        r = maploc(binary, "convert", src, out)
        if r.returncode != 0:
            problems.append("%s: convert to .pt failed: %s" % (e["file"], r.stderr.strip()))
            continue
        try:
            loaded = torch.load(out, **LOAD_KW)
        except Exception as ex:  # noqa: BLE001
            if any(newer_dtype(t["dtype"]) for t in manifest["tensors"]) and not T2:
                continue  # torch 1.13 has no such dtypes
            problems.append("%s: torch.load of the converted file failed: %s" % (e["file"], ex))
            continue
        done += compare(e["file"] + " (to .pt)", loaded, manifest, problems)
    print("safetensors: %d tensors matched; refused by convert (not dense): %s; not readable by torch %s (its "
          "dtypes are newer): %s" % (done, ", ".join(refused) or "none", torch.__version__,
                                     ", ".join(unreadable) or "none"))
    return problems


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("remap", "safetensors"):
        sys.exit(__doc__)
    mode, binary, fixtures, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    if mode == "remap":
        problems = run_remap(binary, os.path.join(fixtures, "checkpoints"), work)
    else:
        problems = run_safetensors(binary, fixtures, work)
    for p in problems:
        print("FAIL: " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
