#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: the C++ suite (warnings as
# errors), the same suite under AddressSanitizer + UndefinedBehaviorSanitizer,
# a bounded libFuzzer run, and the Python suite. Ends with pytest's summary line.
#
# NORMKIT_TEST_STAGES=build stops after setup, configure and build (the C++
# suite and the Python package): what scripts/check-fresh.sh runs on a bare
# Debian root, where the full suite would take too long.
set -euo pipefail
cd "$(dirname "$0")/.."
stages="${NORMKIT_TEST_STAGES:-all}"
case "$stages" in
  all|build) ;;
  *) echo "NORMKIT_TEST_STAGES must be 'all' or 'build', got '$stages'" >&2; exit 2 ;;
esac
bash scripts/setup.sh --test
py=.venv/bin/python

echo "== C++ suite (release, -Werror)"
cmake --preset ci >/dev/null
cmake --build --preset ci
echo "== Python package into .venv"
# The C++ suite above proves that the CUDA backend compiles and links; the
# package gets it only where a GPU can run its tests, rather than compiling
# the kernels a second time for nothing.
if ! nvidia-smi -L >/dev/null 2>&1; then
  export CMAKE_ARGS="${CMAKE_ARGS:+$CMAKE_ARGS }-DNORMKIT_CUDA=OFF"
fi
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation .
if [ "$stages" = build ]; then
  echo "test.sh: configured and built (NORMKIT_TEST_STAGES=build); no test was run"
  exit 0
fi
ctest --preset ci -j2

echo "== C++ suite under ASan + UBSan"
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j2 -LE no_sanitizer

# A fixed seed and run count make this stage reproducible: a failure here is
# the same failure on every machine. Exploring goes on in longer runs
# (docs/reliability.md); their findings join fuzz/corpus.
echo "== libFuzzer over the public API: 60000 runs from the seed corpus, seed 1"
bash scripts/fuzz.sh 300 -seed=1 -runs=60000

echo "== Python suite"
"$py" -m pytest -q tests/python
