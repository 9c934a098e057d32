#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: the C++ suite (warnings as
# errors), the same suite under AddressSanitizer + UndefinedBehaviorSanitizer,
# a bounded libFuzzer run, and the Python suite. Ends with pytest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== C++ suite (release, -Werror)"
cmake --preset ci >/dev/null
cmake --build --preset ci
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
python3 -m pip install -q --disable-pip-version-check --no-build-isolation .
python3 -m pytest -q tests/python
