#!/usr/bin/env python3
"""installed_wheel.py SOURCE_DIR WORK_DIR WHEELHOUSE FIXTURES_DIR - `pip install .` into a fresh virtual
environment, then the module's tests against what it installed, run from outside the source tree.

WHEELHOUSE holds scikit-build-core and what it needs (tools/install-deps.sh test puts them in
.cache/python-build-wheels): pip builds with --no-index --find-links WHEELHOUSE, so this needs no network.
The build folder is WORK_DIR/build (kept: a second run rebuilds only what changed). Checked: the venv got
the maploc package and nothing else (libmaploc.so, __init__.py, _capi.py, _tree.py, torch.py, py.typed), the `import maploc` is the
venv's, the library the loader mapped is the wheel's (also with MAPLOC_LIBRARY set to something else:
the package's own library comes first), the wheel build built no tests, then test_module.py, the
numpy and torch DLPack tests and torch_compare.py (maploc.torch.load against torch.load). Exit 77 (a ctest skip) when `python3 -m venv`, the wheelhouse, numpy or
torch is missing; a failure instead under MAPLOC_PYTHON_REQUIRED=1 (tools/test.sh, after install-deps).
"""
import glob
import os
import shutil
import subprocess
import sys
import time

SOURCE, WORK, WHEELHOUSE, FIXTURES = (os.path.abspath(a) for a in sys.argv[1:5])
HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(WORK, "venv")
PY = os.path.join(VENV, "bin", "python")
# What a user's shell would not have: nothing may point the module at a library or a source tree.
ENV = {k: v for k, v in os.environ.items() if k not in ("MAPLOC_LIBRARY", "PYTHONPATH", "PYTHONHOME")}
ENV["PYTHONDONTWRITEBYTECODE"] = "1"

CHECK = r"""
import os, sys, maploc
venv, expect_env = sys.argv[1], sys.argv[2]
site = [p for p in sys.path if p.startswith(venv) and p.endswith("site-packages")][0]
package = os.path.join(site, "maploc")
assert os.path.dirname(os.path.abspath(maploc.__file__)) == package, f"imported {maploc.__file__}, not {package}"
mapped = {line.split()[-1] for line in open("/proc/self/maps") if "libmaploc" in line}
want = os.path.join(package, "libmaploc.so")
assert mapped == {want}, f"the loader mapped {sorted(mapped)}, not the wheel's {want}"
assert maploc._capi.library_path == want, maploc._capi.library_path
assert os.environ.get("MAPLOC_LIBRARY", "") == expect_env, os.environ.get("MAPLOC_LIBRARY")
print(f"maploc {maploc.__version__} from {package}, library {want} (MAPLOC_LIBRARY={expect_env or 'unset'})")
"""


def skip_or_fail(why):
    if os.environ.get("MAPLOC_PYTHON_REQUIRED") == "1":
        sys.exit(f"FAIL: {why} and MAPLOC_PYTHON_REQUIRED=1")
    print(f"SKIP: {why}")
    sys.exit(77)


def run(cmd, cwd, env=ENV):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, env=env, check=True)


def main():
    started = time.monotonic()
    if not glob.glob(os.path.join(WHEELHOUSE, "scikit_build_core-*.whl")):
        skip_or_fail(f"no scikit-build-core wheel in {WHEELHOUSE} (bash tools/install-deps.sh test)")
    shutil.rmtree(VENV, ignore_errors=True)
    tests = os.path.join(WORK, "tests")   # outside the source tree: no python/ beside the scripts
    shutil.rmtree(tests, ignore_errors=True)
    os.makedirs(tests)
    # This interpreter's, with its site packages (Debian's numpy and torch, for the DLPack tests).
    if subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", VENV]).returncode != 0:
        skip_or_fail(f"{sys.executable} -m venv failed (python3-venv)")
    build = os.path.join(WORK, "build")
    run([PY, "-m", "pip", "install", "--disable-pip-version-check", "--no-index", "--find-links", WHEELHOUSE,
         "--config-settings=build-dir=" + build, SOURCE], cwd=tests)
    built = time.monotonic()

    site = glob.glob(os.path.join(VENV, "lib", "python3*", "site-packages"))[0]
    record = glob.glob(os.path.join(site, "maploc-*.dist-info", "RECORD"))[0]
    with open(record) as f:
        files = sorted(p for p in (line.split(",")[0] for line in f)   # less pip's own byte-compiled files
                       if not p.startswith("maploc-") and "/__pycache__/" not in p)
    assert files == ["maploc/__init__.py", "maploc/_capi.py", "maploc/_torch_load.py", "maploc/_tree.py",
                     "maploc/libmaploc.so", "maploc/py.typed", "maploc/torch.py"], files
    assert not os.path.exists(os.path.join(build, "tests")), "the wheel build configured the tests"
    assert not os.path.exists(os.path.join(build, "bench")), "the wheel build configured the benchmarks"

    run([PY, "-c", CHECK, VENV, ""], cwd=tests)
    other = dict(ENV, MAPLOC_LIBRARY=os.path.join(WORK, "not-this-libmaploc.so"))
    run([PY, "-c", CHECK, VENV, other["MAPLOC_LIBRARY"]], cwd=tests, env=other)
    for script in ("test_module.py", "dlpack_consumers.py", "torch_compare.py"):
        shutil.copy(os.path.join(HERE, script), tests)
    run([PY, "test_module.py", FIXTURES], cwd=tests)
    for consumer in ("numpy", "torch"):
        rc = subprocess.run([PY, "dlpack_consumers.py", consumer, FIXTURES], cwd=tests, env=ENV).returncode
        if rc == 77:
            skip_or_fail(f"{consumer} cannot be imported in the venv (system site packages)")
        if rc != 0:
            sys.exit(f"FAIL: dlpack_consumers.py {consumer} against the installed wheel exited {rc}")
    rc = subprocess.run([PY, "torch_compare.py", FIXTURES, os.path.join(SOURCE, ".cache", "real", "files")],
                        cwd=tests, env=ENV).returncode
    if rc == 77:
        skip_or_fail("torch cannot be imported in the venv (system site packages)")
    if rc != 0:
        sys.exit(f"FAIL: torch_compare.py against the installed wheel exited {rc}")
    print(f"installed wheel: pip install {built - started:.0f} s, tests {time.monotonic() - built:.0f} s")


if __name__ == "__main__":
    main()
