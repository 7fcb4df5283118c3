#!/usr/bin/env python3
"""cuda_versions.py - the CUDA runtime maploc would load, asked the way maploc asks it.

    python3 tools/gpu/cuda_versions.py

Loads the first library of MAPLOC_CUDART (colon-separated) or, without it, of
libcudart.so.13, .12, .11.0, libcudart.so (maploc's own order,
src/remap/cuda_runtime_backend.cpp) with ctypes and prints, one `key: value`
a line: the library, cudaRuntimeGetVersion, cudaDriverGetVersion,
cudaGetDeviceCount and each device's cudaMemGetInfo. Standard library only,
so it runs against the CUDA runtime stand-in as against the real runtime.
Exit 0 when at least one device answers, 1 otherwise.
"""
import ctypes
import os
import sys


def candidates():
    env = os.environ.get("MAPLOC_CUDART")
    if env:
        return [p for p in env.split(":") if p]
    return ["libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"]


def version(v):
    return "%d (%d.%d)" % (v, v // 1000, (v % 1000) // 10)


def main():
    lib, tried = None, []
    for name in candidates():
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as e:
            tried.append("%s: %s" % (name, e))
    if lib is None:
        print("runtime library: none loaded (%s)" % "; ".join(tried))
        return 1
    print("runtime library: %s" % name)
    for t in tried:
        print("passed over: %s" % t)
    lib.cudaGetErrorString.restype = ctypes.c_char_p

    def err(rc):
        return "error %d (%s)" % (rc, lib.cudaGetErrorString(rc).decode(errors="replace"))

    v = ctypes.c_int(0)
    rc = lib.cudaRuntimeGetVersion(ctypes.byref(v))
    print("cudaRuntimeGetVersion: %s" % (version(v.value) if rc == 0 else err(rc)))
    rc = lib.cudaDriverGetVersion(ctypes.byref(v))
    print("cudaDriverGetVersion: %s" % (version(v.value) if rc == 0 else err(rc)))
    n = ctypes.c_int(0)
    rc = lib.cudaGetDeviceCount(ctypes.byref(n))
    if rc != 0:
        print("cudaGetDeviceCount: %s" % err(rc))
        return 1
    print("cudaGetDeviceCount: %d" % n.value)
    for d in range(n.value):
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        rc = lib.cudaSetDevice(d)
        if rc == 0:
            rc = lib.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        if rc == 0:
            print("cuda:%d memory: %.2f GiB free of %.2f GiB" % (d, free.value / 2**30, total.value / 2**30))
        else:
            print("cuda:%d: %s" % (d, err(rc)))
    return 0 if n.value > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
