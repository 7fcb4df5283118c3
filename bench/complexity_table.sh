#!/usr/bin/env bash
# complexity_table.sh - issue 15's table: each row's input (fixtures/malicious/complexity.py --table),
# opened by `maploc ls` (and `maploc dis` for the big-int pickle) at the default limits under a
# 2 GiB address-space limit and a 300 s timeout. Prints CPU seconds (user+sys), peak RSS and the result.
#   bench/complexity_table.sh [MAPLOC_BINARY...]     (default: build/src/cli/maploc)
# Give two binaries (before, after) to compare them row by row.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=("$here/build/src/cli/maploc")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/fixtures/malicious/complexity.py" "$work" --table
rows=(
  "ls dict_int_shift_200000.pt|a data.pkl dict of 200,000 int keys i << 32"
  "ls dict_int_plain_200000.pt|200,000 ordinary int keys (benign twin)"
  "ls bigint_key_300000.pt|a dict with one 300 KB int key"
  "ls bigint_key_30000.pt|a 30 KB int key (benign twin)"
  "dis bigint_dis_300000.pkl|dis of a 300 KB LONG4"
  "ls st_tensors_30000.safetensors|a legitimate safetensors file of 30,000 tensors"
  "ls st_tensors_60000.safetensors|the same with 60,000 tensors"
  "ls st_torch_zip_30000.pt|the same 30,000 tensors as a torch zip"
  "ls st_token_flood_20000000.safetensors|a safetensors header of 20 million JSON tokens"
)
printf "%-48s %9s" "input" "size"
for i in "${!bins[@]}"; do printf " | %-44s" "binary $((i + 1))"; done
printf "\n"
for row in "${rows[@]}"; do
  cmd=${row%%|*}; what=${row#*|}; verb=${cmd%% *}; file=${cmd#* }
  size=$(stat -c %s "$work/$file")
  printf "%-48s %8.1fM" "$what" "$(echo "$size/1000000" | bc -l)"
  for b in "${bins[@]}"; do
    out=$( (ulimit -v 2097152; /usr/bin/time -f "TIME %U %S %M" timeout 300 "$b" "$verb" "$work/$file" >/dev/null 2>"$work/err") 2>&1; echo "RC $?")
    cat "$work/err" >> "$work/all_err" 2>/dev/null
    t=$(grep -o "TIME.*" "$work/err" | tail -1)
    rc=$(echo "$out" | grep -o "RC [0-9]*" | cut -d' ' -f2)
    code=$(grep -o "\[k[A-Za-z]*\]" "$work/err" | head -1)
    grep -q "bad_alloc\|terminate" "$work/err" && code="abort: uncaught std::bad_alloc"
    [ "$rc" = 124 ] && code="killed after 300 s"
    [ -z "$code" ] && code=$([ "$rc" = 0 ] && echo ok || echo "exit $rc")
    read -r _ u s m <<< "${t:-TIME 0 0 0}"
    printf " | %7.2f s %6d MB %-24s" "$(echo "$u+$s" | bc -l)" $((m / 1024)) "$code"
  done
  printf "\n"
done
for i in "${!bins[@]}"; do echo "binary $((i + 1)): ${bins[$i]}"; done
