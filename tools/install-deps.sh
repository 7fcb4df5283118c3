#!/usr/bin/env bash
# install-deps.sh - brings a fresh Debian machine to a state that builds (and, with `test`, tests) maploc.
# Idempotent. Usage: bash tools/install-deps.sh [build|test]
#   build (default): what the library and the CLI need; no Python, no torch (tools/demo.sh).
#   test:            build's packages plus what the test suite compares against (tools/test.sh),
#                    and .cache/safetensors-venv: Debian's python3 with its torch (system site
#                    packages) plus the safetensors package from the Python package index, for the
#                    safetensors round trips (tests/write, tests/sharded), which may not skip in CI,
#                    and moto[server] (with boto3), a test-only S3-compatible server for the s3://
#                    tests (tests/remote/moto_test.cpp, which fail without it);
#                    and .cache/python-build-wheels: scikit-build-core, for the installed-wheel test.
set -euo pipefail
mode=${1:-build}

build=(cmake make g++ pkg-config zlib1g-dev nlohmann-json3-dev
       libssl-dev libisal-dev libzstd-dev libdlpack-dev libcurl4-openssl-dev
       ninja-build)     # pip install . (scikit-build-core) takes the system's Ninja, else it asks the index
test=(catch2            # the test framework
      python3-torch     # tests/write loads maploc-written files with real torch (1.13)
      python3-numpy     # the Python module's DLPack tests
      python3-venv      # .cache/safetensors-venv (below)
      clang-16          # the sanitizer builds (tools/test.sh), and tools/syntax-check.py for the rest
      libclang-rt-16-dev  # clang-16's ASan, UBSan and TSan runtimes
      ca-certificates   # fixtures/real/fetch.py downloads the real-world corpus over HTTPS
      openssl)          # tests/remote/tls_test.cpp makes a CA and a certificate for its https loopback server

case "$mode" in
  build) packages=("${build[@]}") ;;
  test)  packages=("${build[@]}" "${test[@]}") ;;
  *) echo "install-deps: unknown mode '$mode' (use build or test)" >&2; exit 2 ;;
esac

# The safetensors package beside Debian's torch 1.13 (pinned as tools/make-venv.sh pins it), and
# moto[server] (pinned; it brings boto3), moto's S3 in server mode for tests/remote/moto_test.cpp
# (test-only: nothing of maploc imports or links it); kept between runs, rebuilt when it cannot
# import all of them (a venv made before moto was added gets it).
venv_packages=('safetensors==0.8.0' 'moto[server]==5.2.5')
safetensors_venv() {
  local root venv
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.cache/safetensors-venv"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$venv_check" 2>/dev/null; then
    return 0
  fi
  echo "install-deps: creating $venv (${venv_packages[*]} over Debian's torch)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --timeout 30 --retries 3 "${venv_packages[@]}"
  "$venv/bin/python" -c "$venv_check"
}
# What the venv must import: torch and safetensors, and moto's server at the pinned version with boto3.
venv_check='import torch, safetensors.torch, boto3, moto.server, moto.moto_server.threaded_moto_server
from importlib.metadata import version
assert version("moto") == "5.2.5", version("moto")'

# scikit-build-core and what it needs (pinned), for the installed-wheel test (tests/python/installed_wheel.py):
# it runs pip with --no-index --find-links here, so the test itself needs no network. Fetched with the pip
# of the venv above; kept between runs.
python_build_wheels() {
  local root dir
  root="$(cd "$(dirname "$0")/.." && pwd)"
  dir="$root/.cache/python-build-wheels"
  if [ -f "$dir/scikit_build_core-1.1.2-py3-none-any.whl" ]; then
    return 0
  fi
  echo "install-deps: downloading scikit-build-core==1.1.2 into $dir"
  "$root/.cache/safetensors-venv/bin/python" -m pip download -q --disable-pip-version-check --timeout 30 \
    --retries 3 --only-binary=:all: -d "$dir" 'scikit-build-core==1.1.2' 'packaging==26.4' 'pathspec==1.1.1'
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  if [ "$mode" = test ]; then safetensors_venv; python_build_wheels; fi
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
if [ "$mode" = test ]; then safetensors_venv; python_build_wheels; fi
