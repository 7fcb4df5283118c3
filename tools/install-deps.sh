#!/usr/bin/env bash
# install-deps.sh - brings a fresh Debian machine to a state that builds (and, with `test`, tests) maploc.
# Idempotent. Usage: bash tools/install-deps.sh [build|test]
#   build (default): what the library and the CLI need; no Python, no torch (tools/demo.sh).
#   test:            build's packages plus what the test suite compares against (tools/test.sh).
set -euo pipefail
mode=${1:-build}

build=(cmake make g++ pkg-config zlib1g-dev nlohmann-json3-dev
       libssl-dev libisal-dev libzstd-dev libdlpack-dev)
test=(catch2            # the test framework
      python3-torch     # tests/write loads maploc-written files with real torch (1.13)
      python3-numpy     # the Python module's DLPack tests
      ca-certificates)  # fixtures/real/fetch.py downloads the real-world corpus over HTTPS

case "$mode" in
  build) packages=("${build[@]}") ;;
  test)  packages=("${build[@]}" "${test[@]}") ;;
  *) echo "install-deps: unknown mode '$mode' (use build or test)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
