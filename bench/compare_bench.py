#!/usr/bin/env python3
"""Compare two whole `normkit bench` runs, cell by cell, for normkit.

    python3 bench/compare_bench.py docs/bench/full-run.json.gz run/records.json

A cell is one (op, dtype, D, threads, size class). Two measures per cell:
  * points: the change in % of the ceiling measured in each run (the host's
    bandwidth drifts between runs, and each run's ceiling is taken beside
    its own timings, so this is the comparison that drift leaves standing);
  * time: new median time / old median time (> 1: slower).
A cell counts as slower when it lost more points than --spread (default 5:
docs/benchmarks.md reads a single cell as ±5 points). Prints the counts, the
median change, and every slower cell. Runs whose records name different
SIMD targets (the "simd" field) ran different kernels: the script says so
first, since such a comparison is one of two CPUs, not of two commits.
"""

import argparse
import gzip
import json
import statistics


def load(path):
    """The run's normkit cells, and its SIMD target ("" for a run that predates the field)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        records = [r for r in json.load(f) if r["impl"] == "normkit"]
    targets = {r.get("simd", "") for r in records}
    if len(targets) > 1:
        raise SystemExit(f"compare_bench: {path} mixes SIMD targets {sorted(targets)}")
    cells = {(r["op"], r["dtype"], r["D"], r["threads"], r["size_class"]): r for r in records}
    return cells, targets.pop() if targets else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--spread", type=float, default=5.0, help="points of the ceiling a cell may lose [5]")
    args = ap.parse_args()
    (old, old_simd), (new, new_simd) = load(args.old), load(args.new)
    if old_simd and new_simd and old_simd != new_simd:
        print(f"different kernels: the old run ran {old_simd}, the new one {new_simd}; "
              "the times below compare the two CPUs as much as the two commits")
    elif not (old_simd and new_simd):
        print(f"SIMD target: {old_simd or 'not recorded'} -> {new_simd or 'not recorded'}")
    common = sorted(set(old) & set(new))
    only_new = sorted(set(new) - set(old))
    if not common:
        raise SystemExit("compare_bench: the runs have no cell in common")
    for cls in ("dram", "cache", "row"):
        keys = [k for k in common if k[4] == cls]
        if not keys:
            continue
        points = [new[k]["pct_of_ceiling"] - old[k]["pct_of_ceiling"] for k in keys]
        times = [new[k]["median_ms"] / old[k]["median_ms"] for k in keys]
        slower = [k for k, p in zip(keys, points) if p < -args.spread]
        print(f"{cls}: {len(keys)} cells; change in points of the ceiling: median {statistics.median(points):+.1f}, "
              f"min {min(points):+.1f}, max {max(points):+.1f}; time new/old: median {statistics.median(times):.3f}; "
              f"{len(slower)} cells lost more than {args.spread:g} points")
        for k in slower:
            o, n = old[k], new[k]
            print(f"  {k[0]} {k[1]} D={k[2]} {k[3]} thread(s): {o['pct_of_ceiling']:.0f}% -> {n['pct_of_ceiling']:.0f}%, "
                  f"{o['median_ms'] * 1e3:.4g} -> {n['median_ms'] * 1e3:.4g} µs")
    if only_new:
        ops = sorted({k[0] for k in only_new})
        print(f"cells only in the new run: {len(only_new)} ({', '.join(ops)})")


if __name__ == "__main__":
    main()
