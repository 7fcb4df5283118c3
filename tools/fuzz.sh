#!/usr/bin/env bash
# fuzz.sh MINUTES [TARGET...] - builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz
# and runs each target for MINUTES minutes, one at a time, nice'd. Default: every target.
# Corpora grow in build-fuzz/corpus/<target>/work; crashes land in build-fuzz/artifacts/<target>/;
# logs in build-fuzz/logs/<target>.log (the last lines give execs, cov and ft).
# Limits are OSS-Fuzz's: -timeout=25 s, -rss_limit_mb=2560.
#
# FUZZ_MODE=default: the second mode (issue 15). The targets read with maploc's DEFAULT Limits
# (MAPLOC_FUZZ_LIMITS=default) and inputs up to 2 MB, with a per-input budget derived from the
# guarantee of docs/security.md (2 s + 1 s/MB and 1 GiB + 64 B/byte, times the sanitizers'
# slowdown): -timeout=30 -rss_limit_mb=4096. A slow or big input is then a finding. Corpora:
# build-fuzz/corpus/<target>/work-default. FUZZ_PARALLEL=1 runs the targets at the same time.
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

mode=${FUZZ_MODE:-tight}
case "$mode" in
  tight) flags=(-timeout=25 -rss_limit_mb=2560 -max_len=524288); work=work; suffix= ;;
  default) flags=(-timeout=30 -rss_limit_mb=4096 -max_len=2097152); work=work-default; suffix=-default ;;
  *) echo "FUZZ_MODE is tight or default, not '$mode'" >&2; exit 2 ;;
esac
mkdir -p "$build/logs"
run_one() {
  local t=$1 exe status=0 log="$build/logs/$1$suffix.log"
  mkdir -p "$build/corpus/$t/$work" "$build/artifacts/$t$suffix"
  exe=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  echo "== $t ($mode limits): $minutes min, log $log"
  MAPLOC_FUZZ_LIMITS=$mode ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
  nice -n 19 "$exe" -max_total_time=$((minutes * 60)) "${flags[@]}" \
    -dict=tests/fuzz/maploc.dict -print_final_stats=1 -artifact_prefix="$build/artifacts/$t$suffix/" \
    "$build/corpus/$t/$work" "$build/corpus/seed/$t" >"$log" 2>&1 || status=$?
  tail -n 3 "$log" | grep -E "^#|stat::" || true
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" || true
  [ "$status" -eq 0 ] || echo "!! $t stopped with status $status: see $log and $build/artifacts/$t$suffix/"
}
for t in "${targets[@]}"; do
  if [ "${FUZZ_PARALLEL:-0}" = 1 ]; then run_one "$t" & else run_one "$t"; fi
done
wait
