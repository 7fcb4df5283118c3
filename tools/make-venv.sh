#!/usr/bin/env bash
# make-venv.sh - creates .venv/ (git-ignored) with a pinned newer torch, safetensors and numpy,
# for the fixture generators, the real-checkpoint corpus manifests and the benchmark.
# Debian's python3-torch (1.13, /usr/bin/python3) is the other torch the project uses.
# Usage: bash tools/make-venv.sh        prints the venv's python on its last line
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${MAPLOC_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
pins=(torch==2.15.0 safetensors==0.8.0 numpy==2.4.6)

if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "${pins[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    if version(name).split("+")[0] != want:
        sys.exit(1)
PY
then
  echo "$venv/bin/python"
  exit 0
fi
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q "${pins[@]}" >&2
echo "$venv/bin/python"
