#!/usr/bin/env bash
# Sets up a fresh machine, builds normkit, and runs the main job: the
# normalization lab, then a short benchmark against the bandwidth ceiling.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
build/release/tools/normkit/normkit lab
build/release/tools/normkit/normkit bench --quick
