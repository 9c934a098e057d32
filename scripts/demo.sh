#!/usr/bin/env bash
# Sets up a fresh machine, builds normkit, and runs the main job: the
# normalization lab, then a short benchmark against the bandwidth ceiling.
# Prints a screenful; the details go to build/demo/, named at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/openblas-core.sh
out=build/demo
mkdir -p "$out"

echo "== building the normkit CLI (release; log: $out/build.log)"
if ! { cmake --preset release && cmake --build --preset release --target normkit_cli; } >"$out/build.log" 2>&1; then
  tail -n 30 "$out/build.log"
  echo "demo: the build failed; the whole log is $out/build.log" >&2
  exit 1
fi
nk=build/release/tools/normkit/normkit

echo
echo "== normkit lab: the texts' claims about normalization, checked through normkit's kernels"
"$nk" lab --report "$out/lab-report.md"

echo
echo "== normkit bench --quick: how fast, against this machine's memory bandwidth"
"$nk" bench --quick --out "$out/bench"
.venv/bin/python bench/plot_bench.py "$out/bench/records.json" -o "$out/bench/pct-of-ceiling.png" >/dev/null

cat <<MSG

Results in $out/:
  lab-report.md               every comparison the lab made, with its bound
  bench/tables.txt            the bench's full tables, ceilings and targets
  bench/records.json          every timing record
  bench/pct-of-ceiling.png    % of the bandwidth ceiling by op, dtype and D
Next:
  $nk lab -v                  every comparison on the terminal
  $nk bench                   the full benchmark (about 30 minutes)
  $nk study --quick           what placement, warmup and depth do to training (about 7 minutes)
  bash scripts/test.sh        every test; then 'source .venv/bin/activate' to use the Python package
MSG
