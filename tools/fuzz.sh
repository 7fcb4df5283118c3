#!/usr/bin/env bash
# fuzz.sh MINUTES [TARGET...] - builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz
# and runs each target for MINUTES minutes, one at a time, nice'd. Default: every target.
# Corpora grow in build-fuzz/corpus/<target>/work; crashes land in build-fuzz/artifacts/<target>/;
# logs in build-fuzz/logs/<target>.log (the last lines give execs, cov and ft).
# Limits are OSS-Fuzz's: -timeout=25 s, -rss_limit_mb=2560.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:?usage: tools/fuzz.sh MINUTES [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_zip fuzz_pickle fuzz_checkpoint fuzz_safetensors)
cxx=${CXX_FUZZ:-$(command -v clang++-14 || command -v clang++)}
cc=${CC_FUZZ:-$(command -v clang-14 || command -v clang)}
build=${FUZZ_BUILD_DIR:-build-fuzz}

cmake -S . -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAPLOC_CUDA=OFF -DMAPLOC_FUZZ=ON \
  -DMAPLOC_SANITIZE=address,undefined,fuzzer-no-link \
  -DMAPLOC_BUILD_BENCH=OFF >/dev/null
nice -n 19 cmake --build "$build" -j"${FUZZ_BUILD_JOBS:-1}" --target "${targets[@]}"
python3 tests/fuzz/make_seeds.py "$build/corpus/seed" >/dev/null

mkdir -p "$build/logs"
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t/work" "$build/artifacts/$t"
  exe=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  echo "== $t: $minutes min, log $build/logs/$t.log"
  status=0
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
  nice -n 19 "$exe" -max_total_time=$((minutes * 60)) -timeout=25 -rss_limit_mb=2560 \
    -max_len=524288 -dict=tests/fuzz/maploc.dict -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$t/" \
    "$build/corpus/$t/work" "$build/corpus/seed/$t" >"$build/logs/$t.log" 2>&1 || status=$?
  tail -n 3 "$build/logs/$t.log" | grep -E "^#|stat::" || true
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/logs/$t.log" || true
  [ "$status" -eq 0 ] || echo "!! $t stopped with status $status: see $build/logs/$t.log and $build/artifacts/$t/"
done
