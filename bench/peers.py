"""peers.py - one load by a peer (torch.load, safetensors) in a fresh process, measured like maploc_bench_load.

Usage: python peers.py PEER MODE FILE [--first NAME] [--cold]
  PEER  torch_load | torch_load_mmap | safetensors
  MODE  lazy | materialised | first | cuda
Prints one JSON object (open_s, load_s, total_s, bytes, tensors, rss_peak_over_base_kb, minflt, majflt,
rchar, import_s, and cuda_init_s on the GPU), or {"unsupported": why}. Interpreter start-up, `import torch`
and CUDA context creation are outside the timed region and reported apart (A.13).
"""
import json
import os
import resource
import sys
import time

t_start = time.perf_counter()
import torch  # noqa: E402

import_s = time.perf_counter() - t_start


def proc_field(path, key):
    with open(path) as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return -1


def touch(tensors):
    """Reads one byte of every 4 KiB page of every tensor (the 'materialised' rule for mapped results)."""
    s = 0
    for t in tensors:
        if t.numel() == 0:
            continue
        u = t.detach().reshape(-1).view(torch.uint8)
        s += int(u[::4096].sum())
    return s


def tensors_of(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors_of(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors_of(v)]
    return []


def main():
    peer, mode, path = sys.argv[1], sys.argv[2], sys.argv[3]
    first = sys.argv[sys.argv.index("--first") + 1] if "--first" in sys.argv else None
    extra = {"import_s": import_s, "torch": torch.__version__}
    device = "cpu"
    if mode == "cuda":
        if not torch.cuda.is_available():
            print(json.dumps({"unsupported": "no CUDA device"}))
            return
        t = time.perf_counter()
        torch.zeros(1, device="cuda:0")
        torch.cuda.synchronize()
        extra["cuda_init_s"] = time.perf_counter() - t
        device = "cuda:0"
    if peer == "torch_load_mmap" and "mmap" not in torch.load.__code__.co_varnames:
        print(json.dumps({"unsupported": f"torch {torch.__version__} has no torch.load(mmap=True)"}))
        return
    if peer == "safetensors":
        try:
            import safetensors
            from safetensors import safe_open
            from safetensors.torch import load_file
        except ImportError:
            print(json.dumps({"unsupported": "safetensors is not installed for this python"}))
            return
        extra["safetensors"] = safetensors.__version__
    if "--cold" in sys.argv:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)

    rss0 = proc_field("/proc/self/status", "VmRSS:")
    rchar0 = proc_field("/proc/self/io", "rchar:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if peer.startswith("torch_load"):
        kw = {"weights_only": True, "map_location": device}
        if peer == "torch_load_mmap":
            kw["mmap"] = True
        obj = torch.load(path, **kw)
        ts = tensors_of(obj)
        if mode == "cuda" and peer == "torch_load_mmap":
            pass  # map_location already placed them
        if mode in ("materialised", "first") and peer == "torch_load_mmap":
            touch(ts[:1] if mode == "first" else ts)
    else:
        if mode == "first":
            with safe_open(path, framework="pt", device=device) as f:
                ts = [f.get_tensor(first or next(iter(f.keys())))]
            touch(ts)
        else:
            obj = load_file(path, device=device)
            ts = list(obj.values())
            if mode == "materialised":
                touch(ts)
    if mode == "cuda":
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    storage = (lambda t: t.untyped_storage()) if hasattr(torch.Tensor, "untyped_storage") else (lambda t: t.storage())
    nbytes = sum({storage(t).data_ptr(): storage(t).nbytes() for t in ts}.values())
    out = {"open_s": 0.0, "load_s": t1 - t0, "total_s": t1 - t0, "bytes": nbytes, "tensors": len(ts),
           "rss_peak_over_base_kb": proc_field("/proc/self/status", "VmHWM:") - rss0,
           "minflt": ru1.ru_minflt - ru0.ru_minflt, "majflt": ru1.ru_majflt - ru0.ru_majflt,
           "rchar": proc_field("/proc/self/io", "rchar:") - rchar0}
    if mode == "cuda":
        out["gpu_peak_bytes"] = torch.cuda.max_memory_allocated()
    out.update(extra)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
