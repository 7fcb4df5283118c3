#!/usr/bin/env bash
# install-deps.sh - brings a fresh Debian machine to a state that builds maploc. Idempotent.
set -euo pipefail

packages=(cmake make g++ pkg-config catch2 nlohmann-json3-dev zlib1g-dev
          python3-torch)  # python3-torch: tests/write loads maploc-written files with real torch

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
