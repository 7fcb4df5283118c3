#!/usr/bin/env python3
"""make_seeds.py - assembles the seed corpora of the fuzz targets from fixtures/.

Usage: make_seeds.py OUT_DIR   (creates OUT_DIR/<target>/ for every target)

fuzz_zip, fuzz_checkpoint: every committed checkpoint under 512 KiB (zip, legacy,
tar, TorchScript), the malicious corpus and the regression inputs.
fuzz_safetensors: fixtures/safetensors and the malicious .safetensors files.
fuzz_pickle: the pickle corpus (*.pkl), every pickle record pulled out of the zip
checkpoints (data.pkl, constants.pkl), the malicious corpus's pickles.
Reads files only with zipfile; never unpickles anything.
"""
import hashlib
import pathlib
import shutil
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_SEED = 512 * 1024


def put(out: pathlib.Path, data: bytes, hint: str) -> None:
    if len(data) > MAX_SEED:
        return
    name = hashlib.sha1(data).hexdigest()[:16] + "-" + hint.replace("/", "_")[:60]
    (out / name).write_bytes(data)


def checkpoint_files():
    dirs = [ROOT / "fixtures" / "checkpoints", ROOT / "fixtures" / "malicious",
            ROOT.parent / "shared" / "conformance" / "pytorch"]
    for d in dirs:
        if d.is_dir():
            for p in sorted(d.rglob("*")):
                if p.is_file() and not p.name.endswith((".json", ".py", ".md")):
                    yield p


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    targets = ["fuzz_zip", "fuzz_pickle", "fuzz_checkpoint", "fuzz_safetensors"]
    for t in targets:
        shutil.rmtree(out / t, ignore_errors=True)
        (out / t).mkdir(parents=True)
    for p in checkpoint_files():
        data = p.read_bytes()
        put(out / "fuzz_zip", data, p.name)
        put(out / "fuzz_checkpoint", data, p.name)
        if data[:1] == b"\x80":  # a bare pickle (legacy stream or malicious .pkl)
            put(out / "fuzz_pickle", data, p.name)
        try:
            with zipfile.ZipFile(p) as z:
                for info in z.infolist():
                    if info.filename.endswith(".pkl") and info.file_size <= MAX_SEED:
                        put(out / "fuzz_pickle", z.read(info), p.name + "." + info.filename)
        except Exception:  # not a zip, or a deliberately broken one
            pass
    for d in (ROOT / "fixtures" / "safetensors", ROOT / "fixtures" / "malicious"):
        for p in sorted(d.rglob("*.safetensors")) if d.is_dir() else []:
            put(out / "fuzz_safetensors", p.read_bytes(), p.name)
            put(out / "fuzz_checkpoint", p.read_bytes(), p.name)
    for p in sorted((ROOT / "fixtures" / "pickle" / "corpus").glob("*.pkl")):
        put(out / "fuzz_pickle", p.read_bytes(), p.name)
    for t in targets:
        reg = ROOT / "tests" / "fuzz" / "regressions" / t
        for p in sorted(reg.glob("*")) if reg.is_dir() else []:
            if p.name != "README":
                put(out / t, p.read_bytes(), p.name)
        print(f"{t}: {len(list((out / t).iterdir()))} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
