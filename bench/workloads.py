"""workloads.py - writes the benchmark checkpoints W1-W5 with real torch, their safetensors twins and a manifest.

Usage: python workloads.py OUT_DIR [--maploc BIN] [--w4-gb GB] [--only W1,W2]
Nothing here is committed: the files are made at run time (docs/performance.md, "Workloads").
Shapes follow loading-performance-and-security.md A.13. Every tensor is contiguous and
unshared in W1-W4 (so the safetensors twin holds the same bytes); W5 is for correctness only.
"""
import argparse
import ctypes
import hashlib
import json
import os
import subprocess
import sys

import torch


def value_sha(t):
    """sha256 of a tensor's values in row-major order (maploc's Loaded::tensor_sha256)."""
    c = t.detach().contiguous()
    n = c.numel() * c.element_size()
    return hashlib.sha256(ctypes.string_at(c.data_ptr(), n) if n else b"").hexdigest()


def w1(gen):
    # LoRA-like: 30,000 tensors of 32x32 fp32 (safetensors' create_lora bench shape).
    return {f"lora.{i // 2}.{'A' if i % 2 == 0 else 'B'}": torch.randn(32, 32, generator=gen) for i in range(30000)}


def w2(gen):
    # safetensors' create_gpt2(12): GPT-2 small shapes in fp32, about 150 tensors.
    d = {"wte": torch.randn(50257, 768, generator=gen), "wpe": torch.randn(1024, 768, generator=gen)}
    for i in range(12):
        p = f"h.{i}."
        d[p + "ln_1.weight"] = torch.randn(768, generator=gen)
        d[p + "ln_1.bias"] = torch.randn(768, generator=gen)
        d[p + "attn.bias"] = torch.randn(1, 1, 1024, 1024, generator=gen)
        d[p + "attn.c_attn.weight"] = torch.randn(768, 2304, generator=gen)
        d[p + "attn.c_attn.bias"] = torch.randn(2304, generator=gen)
        d[p + "attn.c_proj.weight"] = torch.randn(768, 768, generator=gen)
        d[p + "attn.c_proj.bias"] = torch.randn(768, generator=gen)
        d[p + "ln_2.weight"] = torch.randn(768, generator=gen)
        d[p + "ln_2.bias"] = torch.randn(768, generator=gen)
        d[p + "mlp.c_fc.weight"] = torch.randn(768, 3072, generator=gen)
        d[p + "mlp.c_fc.bias"] = torch.randn(3072, generator=gen)
        d[p + "mlp.c_proj.weight"] = torch.randn(3072, 768, generator=gen)
        d[p + "mlp.c_proj.bias"] = torch.randn(768, generator=gen)
    d["ln_f.weight"] = torch.randn(768, generator=gen)
    d["ln_f.bias"] = torch.randn(768, generator=gen)
    return d


def fill_bf16(shape, seed):
    # Cheap, non-constant bf16 payload (randn of gigabytes is slow on two cores).
    n = 1
    for s in shape:
        n *= s
    t = torch.arange(n, dtype=torch.int32).remainder_(65521).mul_(seed * 2 + 1).remainder_(32768).to(torch.int16)
    return t.view(torch.bfloat16).reshape(shape)


def w3(gen):
    # Few large: 2 tensors of 1 GiB each, bf16.
    return {f"block.{i}.weight": fill_bf16((32768, 16384), i) for i in range(2)}


def w4(gen, gb):
    # Llama-3-8B-like bf16 layer shapes; as many layers as fit in `gb` (embedding first).
    h, kv, ff, vocab = 4096, 1024, 14336, 128256
    d = {"model.embed_tokens.weight": fill_bf16((vocab, h), 0)}
    layer_bytes = 2 * (2 * h * h + 2 * kv * h + 3 * h * ff + 2 * h)
    layers = max(1, int((gb * 1e9 - 2 * vocab * h) // layer_bytes))
    seed = 1
    for i in range(layers):
        p = f"model.layers.{i}."
        for name, shape in (("self_attn.q_proj.weight", (h, h)), ("self_attn.k_proj.weight", (kv, h)),
                            ("self_attn.v_proj.weight", (kv, h)), ("self_attn.o_proj.weight", (h, h)),
                            ("mlp.gate_proj.weight", (ff, h)), ("mlp.up_proj.weight", (ff, h)),
                            ("mlp.down_proj.weight", (h, ff)), ("input_layernorm.weight", (h,)),
                            ("post_attention_layernorm.weight", (h,))):
            d[p + name] = fill_bf16(shape, seed)
            seed += 1
    d["model.norm.weight"] = fill_bf16((h,), seed)
    return d


def w6(gen):
    # ResNet-50's state_dict shapes (torchvision.models.resnet50, no torchvision needed), fp32:
    # 320 tensors, 102 MB, the common vision case: tens of 1-20 MB convolutions and many small BN ones.
    d = {}

    def conv(name, out_c, in_c, k):
        d[name + ".weight"] = torch.randn(out_c, in_c, k, k, generator=gen)

    def bn(name, c):
        d[name + ".weight"] = torch.rand(c, generator=gen)
        d[name + ".bias"] = torch.randn(c, generator=gen)
        d[name + ".running_mean"] = torch.randn(c, generator=gen)
        d[name + ".running_var"] = torch.rand(c, generator=gen)
        d[name + ".num_batches_tracked"] = torch.tensor(0)

    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    in_c = 64
    for li, (blocks, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512)), start=1):
        for b in range(blocks):
            p = f"layer{li}.{b}."
            conv(p + "conv1", width, in_c, 1)
            bn(p + "bn1", width)
            conv(p + "conv2", width, width, 3)
            bn(p + "bn2", width)
            conv(p + "conv3", width * 4, width, 1)
            bn(p + "bn3", width * 4)
            if b == 0:
                conv(p + "downsample.0", width * 4, in_c, 1)
                bn(p + "downsample.1", width * 4)
            in_c = width * 4
    d["fc.weight"] = torch.randn(1000, 2048, generator=gen)
    d["fc.bias"] = torch.randn(1000, generator=gen)
    return d


def w5(gen):
    # Edge semantics: views, shared storages, 0-d and 0-size tensors, every dtype torch can save.
    base = torch.randn(8, 6, generator=gen)
    d = {"base": base, "row_view": base[2:5], "transposed": base.t(), "strided": base[:, ::2],
         "tied_a": base, "scalar": torch.tensor(3.5), "empty": torch.empty(0, 4), "offset_1d": base.view(-1)[7:19]}
    dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
              torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]
    for name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
        if hasattr(torch, name):
            dtypes.append(getattr(torch, name))
    for dt in dtypes:
        key = "dtype." + str(dt).replace("torch.", "")
        if dt == torch.bool:
            d[key] = torch.randn(5, 3, generator=gen) > 0
        elif dt.is_floating_point or dt.is_complex:
            d[key] = torch.randn(5, 3, generator=gen).to(dt)
        else:
            d[key] = torch.randint(0, 100, (5, 3), generator=gen).to(dt)
    return d


def twin(path, tensors, maploc):
    """The safetensors file with the same tensors: `maploc convert` when it exists, else safetensors."""
    out = os.path.splitext(path)[0] + ".safetensors"
    if maploc:
        r = subprocess.run([maploc, "convert", path, out], capture_output=True, text=True)
        if r.returncode == 0:
            return out, "maploc convert"
    from safetensors.torch import save_file
    save_file(tensors, out)
    return out, "safetensors.torch.save_file"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--maploc", default="")
    ap.add_argument("--w4-gb", type=float, default=4.5)
    ap.add_argument("--only", default="W1,W2,W3,W4,W5")
    ap.add_argument("--hash", default="W2,W5", help="workloads whose per-tensor sha256 is recorded")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    manifest_path = os.path.join(args.out, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    makers = {"W1": w1, "W2": w2, "W3": w3, "W4": lambda g: w4(g, args.w4_gb), "W5": w5,
              "W6": w6}
    for wid in args.only.split(","):
        path = os.path.join(args.out, wid.lower() + ".pth")
        gen = torch.Generator().manual_seed(int(wid[1:]))
        tensors = makers[wid](gen)
        torch.save(tensors, path)
        storages = {}
        for t in tensors.values():
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        entry = {"file": path, "tensors": len(tensors), "storages": len(storages),
                 "payload_bytes": sum(storages.values()), "file_bytes": os.path.getsize(path),
                 "first": next(iter(tensors)), "torch": torch.__version__}
        if wid != "W5":
            entry["twin"], entry["twin_by"] = twin(path, tensors, args.maploc)
        if wid in args.hash.split(","):
            entry["sha256"] = {k: value_sha(v) for k, v in tensors.items()}
        manifest[wid] = entry
        print(f"{wid}: {entry['tensors']} tensors, {entry['payload_bytes'] / 1e9:.3f} GB -> {path}", file=sys.stderr)
        del tensors
        json.dump(manifest, open(manifest_path, "w"), indent=1)


if __name__ == "__main__":
    main()
