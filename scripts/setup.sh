#!/usr/bin/env bash
# Installs everything normkit needs on a fresh Debian 12 machine: the
# toolchain and libraries from Debian, the Python side from PyPI into a
# virtual environment in the checkout (.venv/), which every script uses.
#   scripts/setup.sh          what the demo needs (build, lab, bench, plots)
#   scripts/setup.sh --test   also what the tests need (bindings, PyTorch, pytest)
# Idempotent: packages already present are not reinstalled.
set -euo pipefail
cd "$(dirname "$0")/.."

test_deps=0
case "${1:-}" in
  "") ;;
  --test) test_deps=1 ;;
  *) echo "usage: scripts/setup.sh [--test]" >&2; exit 2 ;;
esac

debs=(cmake ninja-build g++ pkg-config ca-certificates
      ccache                # compile cache: the CLI, the Python package and CI build the same library
      python3 python3-venv python3-dev  # the virtual environment and the bindings' headers
      libhwy-dev            # Google Highway: SIMD kernels with run-time dispatch
      libgtest-dev googletest libbenchmark-dev
      libomp-dev            # OpenMP (g++ brings libgomp; clang's runtime for the fuzzer build)
      libdnnl-dev           # oneDNN: the baseline `normkit bench` compares against
      ocl-icd-opencl-dev    # OpenCL headers: Debian's oneDNN CMake package requires them
      libopenblas-dev       # matrix products of the lab's transformer step and the model
      valgrind              # callgrind's cache simulator: `normkit bench --lines`
      bible-kjv)            # the King James text `normkit study` trains on (public domain)
if ((test_deps)); then
  debs+=(clang-14 libclang-rt-14-dev)  # libFuzzer and sanitizer runtimes
fi

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's Python refuses packages from pip outside a virtual environment
# (PEP 668), and a user's own python3 should stay untouched too. A venv
# without a working pip (its python3 was removed or upgraded, or an earlier
# creation failed half-way) is made anew; a failed creation leaves none.
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  echo "setup: creating the virtual environment .venv with $(command -v python3)"
  rm -rf .venv
  python3 -m venv .venv || { rm -rf .venv; exit 1; }
fi
# `normkit study`'s text: Genesis, one verse per line without its reference,
# through bible-kjv's own reader (its data file is compressed).
text=build/data/genesis-kjv-full.txt
if [ ! -s "$text" ]; then
  mkdir -p build/data
  bible -f -l100000 Gen1:1-Gen50:26 | sed 's/^Ge[0-9]*:[0-9]* //' >"$text.part"
  mv "$text.part" "$text"
  echo "setup: extracted Genesis (KJV) from bible-kjv into $text"
fi

# The packages go in through uv (from PyPI), which links them from its cache
# (~/.cache/uv) where pip unpacks every wheel again: PyTorch and the CUDA
# libraries its PyPI wheel depends on are about 5 GB. --native-tls: the
# system's certificates (ca-certificates), as pip uses them. uv takes its
# index from UV_INDEX_URL or uv.toml, not from pip.conf.
reqs=(-r scripts/requirements.txt)
((test_deps)) && reqs+=(-r scripts/requirements-test.txt)
echo "setup: Python packages into .venv (${reqs[*]})"
.venv/bin/python -m pip install -q --disable-pip-version-check uv
.venv/bin/uv pip install -q --native-tls --python .venv/bin/python "${reqs[@]}"
