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

echo "== libFuzzer over the public API, 60 s from the seed corpus"
bash scripts/fuzz.sh 60

echo "== Python suite"
python3 -m pip install -q --disable-pip-version-check --no-build-isolation .
python3 -m pytest -q tests/python
