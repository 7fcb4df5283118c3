#!/usr/bin/env bash
# cli_output_diff.sh - runs two maploc binaries over every fixture and every output form of every
# command, and reports where their stdout or exit status differ (timings masked).
# Usage: bash tools/cli_output_diff.sh OLD_BIN NEW_BIN [FILE...]   (default: every file under fixtures/)
# Used to check that a change to the CLI's output code prints byte-for-byte what it printed before.
set -uo pipefail
old=$1 new=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then
  mapfile -t files < <(find "$root/fixtures" -type f \( -name '*.pt' -o -name '*.pth' -o -name '*.zip' -o -name '*.pkl' \
    -o -name '*.safetensors' -o -name '*.ptl' -o -name '*.bin' -o -name '*.tar' \) | sort)
else
  files=("$@")
fi
forms=("ls" "ls --json" "ls --json --hash" "ls --records" "ls --records --json" "dis" "dis --json"
       "plan" "plan --json" "plan --json --map-location cpu" "load --hash --quiet" "load --json --hash --quiet"
       "load --json --host copy --quiet" "verify" "verify --json")
# Timings differ from run to run: mask them.
mask() { sed -E -e 's/"(open|load)_seconds": [0-9.e+-]+/"\1_seconds": T/' -e 's/in [0-9.]+ ms/in T ms/g' \
  -e 's/\([0-9.]+ GB\/s\)/(R)/g'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
runs=0 diffs=0
for f in "${files[@]}"; do
  for form in "${forms[@]}"; do
    # shellcheck disable=SC2086
    "$old" $form "$f" >"$tmp/a" 2>/dev/null; ra=$?
    # shellcheck disable=SC2086
    "$new" $form "$f" >"$tmp/b" 2>/dev/null; rb=$?
    runs=$((runs + 1))
    if [ $ra != $rb ] || ! cmp -s <(mask <"$tmp/a") <(mask <"$tmp/b"); then
      diffs=$((diffs + 1))
      echo "DIFF: maploc $form ${f#"$root"/} (exit $ra vs $rb)"
      diff <(mask <"$tmp/a") <(mask <"$tmp/b") | head -5
    fi
  done
done
echo "cli_output_diff: $runs runs, $diffs differ"
[ $diffs = 0 ]
