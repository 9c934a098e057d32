#!/usr/bin/env bash
# Installs everything normkit needs on a fresh Debian 12 machine: the
# toolchain and libraries from Debian, the Python side from PyPI.
# Idempotent: packages already present are not reinstalled.
set -euo pipefail

debs=(cmake ninja-build g++ pkg-config
      libhwy-dev            # Google Highway: SIMD kernels with run-time dispatch
      libgtest-dev googletest libbenchmark-dev
      libomp-dev            # OpenMP (g++ brings libgomp; clang's runtime for the fuzzer build)
      libdnnl-dev           # oneDNN: the baseline `normkit bench` compares against
      libopenblas-dev       # matrix products of the lab's transformer step
      clang-14 libclang-rt-14-dev)  # libFuzzer and sanitizer runtimes

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/requirements.txt"
