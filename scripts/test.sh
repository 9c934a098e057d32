#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: the C++ suite (warnings as
# errors), the same suite under AddressSanitizer + UndefinedBehaviorSanitizer,
# a bounded libFuzzer run, and the Python suite. Ends with pytest's summary line.
#
# NORMKIT_TEST_STAGES=install stops after what a new machine's install steps
# decide: setup, configuring both C++ presets (every package they look up is
# found, clang-14 included) and building the Python package into .venv. It is
# what scripts/check-fresh.sh runs on a bare Debian root after the demo, which
# has built the library and the CLI there already; compiling the suite again
# and running it would only repeat this machine's stages.
set -euo pipefail
cd "$(dirname "$0")/.."
stages="${NORMKIT_TEST_STAGES:-all}"
case "$stages" in
  all|install) ;;
  *) echo "NORMKIT_TEST_STAGES must be 'all' or 'install', got '$stages'" >&2; exit 2 ;;
esac
bash scripts/setup.sh --test
source scripts/openblas-core.sh
py=.venv/bin/python

if [ "$stages" = install ]; then
  echo "== configuring the C++ presets (ci, asan)"
  cmake --preset ci >/dev/null
  cmake --preset asan >/dev/null
else
  echo "== C++ suite (release, -Werror)"
  cmake --preset ci >/dev/null
  cmake --build --preset ci
fi
echo "== Python package into .venv"
# The C++ suite above proves that the CUDA backend compiles and links; the
# package gets it only where a GPU can run its tests, rather than compiling
# the kernels a second time for nothing.
if ! nvidia-smi -L >/dev/null 2>&1; then
  export CMAKE_ARGS="${CMAKE_ARGS:+$CMAKE_ARGS }-DNORMKIT_CUDA=OFF"
fi
# scikit-build-core would compile with Python's own CXX (g++); the presets'
# compiler (CMake's default, c++) lets ccache give the package the library
# objects the other builds of these sources made.
CXX="${CXX:-c++}" "$py" -m pip install -q --disable-pip-version-check --no-build-isolation .
if [ "$stages" = install ]; then
  echo "test.sh: set up, both presets configured, the Python package installed (NORMKIT_TEST_STAGES=install); no test was run"
  exit 0
fi
ctest --preset ci -j2

echo "== C++ suite under ASan + UBSan"
cmake --preset asan >/dev/null
cmake --build --preset asan
# Left out under the sanitizers: tests of results, not of memory, that
# repeat at full size code the rest of this suite runs under them (the
# kernels across thread counts, the model, the lab's checks one by one),
# and which are among the slowest here.
asan_skip='^(Determinism\.BitwiseAcrossThreadCounts|Training\.LossFallsWellBelowLnVocabOnShippedText|LabCli\.SummaryIsOneLinePerCheckWithItsHeadline|lab\.cli_json)$'
ctest --preset asan -j2 -LE no_sanitizer -E "$asan_skip"

# A fixed seed and run count bound this stage; its path still varies from run
# to run (threads race on coverage counters; docs/reliability.md). Exploring
# goes on in longer runs; their findings join fuzz/corpus.
echo "== libFuzzer over the public API: 60000 runs from the seed corpus, seed 1"
bash scripts/fuzz.sh 300 -seed=1 -runs=60000

echo "== Python suite"
"$py" -m pytest -q tests/python
