#!/usr/bin/env python3
"""torch_peer.py - one load of a checkpoint to cuda:0 by torch or safetensors, in a fresh process,
measured the way maploc_bench_load --mode cuda measures maploc (and bench/peers.py measures torch).

    python3 tools/gpu/torch_peer.py torch_load|torch_mmap_to|safetensors FILE

  torch_load     torch.load(FILE, map_location='cuda:0', weights_only=True)
  torch_mmap_to  torch.load(FILE, mmap=True, map_location='cpu', weights_only=True), then .to('cuda:0')
                 of every tensor
  safetensors    safetensors.torch.load_file(FILE, device='cuda:0')
Outside the timer: interpreter start, `import torch` (import_s) and the CUDA context
(torch.zeros(1, device='cuda:0') + synchronize: cuda_init_s). Inside: the load and a final
torch.cuda.synchronize(). Prints one JSON object (total_s, bytes, tensors, rss_peak_over_base_kb,
rss_base_kb, rss_peak_kb, gpu_peak_bytes, versions) or {"unsupported": why}.
"""
import json
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


def main():
    peer, path = sys.argv[1], sys.argv[2]
    extra = {"import_s": import_s, "torch": torch.__version__}
    if not torch.cuda.is_available():
        print(json.dumps({"unsupported": "torch %s sees no CUDA device" % torch.__version__}))
        return 0
    t = time.perf_counter()
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    extra["cuda_init_s"] = time.perf_counter() - t
    if peer == "torch_mmap_to" and "mmap" not in torch.load.__code__.co_varnames:
        print(json.dumps({"unsupported": "torch %s has no torch.load(mmap=True)" % torch.__version__}))
        return 0
    if peer == "safetensors":
        try:
            import safetensors
            from safetensors.torch import load_file
        except ImportError:
            print(json.dumps({"unsupported": "safetensors is not installed for this python"}))
            return 0
        extra["safetensors"] = safetensors.__version__
    rss0 = proc_field("/proc/self/status", "VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    t0 = time.perf_counter()
    if peer == "torch_load":
        obj = torch.load(path, map_location="cuda:0", weights_only=True)
    elif peer == "torch_mmap_to":
        cpu = torch.load(path, mmap=True, map_location="cpu", weights_only=True)
        obj = {k: v.to("cuda:0") for k, v in cpu.items()}
    elif peer == "safetensors":
        obj = load_file(path, device="cuda:0")
    else:
        sys.exit("unknown peer %r" % peer)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    hwm = proc_field("/proc/self/status", "VmHWM:")
    ts = list(obj.values())
    out = {"total_s": t1 - t0, "load_s": t1 - t0, "bytes": sum(t.numel() * t.element_size() for t in ts),
           "tensors": len(ts), "devices": sorted({str(t.device) for t in ts}),
           "rss_peak_over_base_kb": hwm - rss0, "rss_base_kb": rss0, "rss_peak_kb": hwm,
           "gpu_peak_bytes": torch.cuda.max_memory_allocated()}
    out.update(extra)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
