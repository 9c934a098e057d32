#!/usr/bin/env bash
# Builds the libFuzzer harness (preset "asan": clang-14, AddressSanitizer +
# UndefinedBehaviorSanitizer, the same instrumented library the sanitizer
# test suite uses) and runs it from the committed seed corpus for a bounded
# time. New inputs go to build/asan/fuzz-corpus, never into fuzz/corpus; a
# failing input is written to build/asan/fuzz-artifacts/ and the script fails.
#   scripts/fuzz.sh [seconds, default 60] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true

cmake --preset asan >/dev/null
cmake --build --preset asan --target normkit_fuzz
mkdir -p build/asan/fuzz-corpus build/asan/fuzz-artifacts
# libomp's thread descriptors outlive LeakSanitizer's check (tests/sanitizers/lsan.supp).
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
# -rss_limit_mb: the widest inputs need well under 1 GiB; -timeout: a single
# call taking 10 s is a hang.
build/asan/fuzz/normkit_fuzz build/asan/fuzz-corpus fuzz/corpus \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix=build/asan/fuzz-artifacts/ "$@"
