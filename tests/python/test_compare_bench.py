"""bench/compare_bench.py, the comparison of two whole bench runs in
docs/benchmarks.md: a cell that lost more points of its ceiling than the
spread is named, one inside the spread is not, and a cell only one run has
is counted apart."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "compare_bench.py"


def record(op: str, D: int, pct: float, ms: float, impl: str = "normkit") -> dict:
    return {"impl": impl, "op": op, "dtype": "f32", "D": D, "threads": 1, "size_class": "dram",
            "pct_of_ceiling": pct, "median_ms": ms}


def run_on(tmp_path: Path, old: list, new: list) -> subprocess.CompletedProcess:
    """The script on the two runs, the old one gzipped as whole runs are kept in docs/bench."""
    with gzip.open(tmp_path / "old.json.gz", "wt") as f:
        json.dump(old, f)
    (tmp_path / "new.json").write_text(json.dumps(new))
    return subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "old.json.gz"), str(tmp_path / "new.json")],
                          capture_output=True, text=True, timeout=60)


def test_names_the_cells_slower_than_the_spread(tmp_path: Path) -> None:
    old = [record("layer_norm", 768, 90, 1.0), record("rms_norm", 768, 90, 1.0), record("layer_norm", 768, 50, 9.0, "naive")]
    new = [record("layer_norm", 768, 80, 1.1), record("rms_norm", 768, 87, 1.03), record("add_rms_norm_backward", 768, 70, 2.0)]
    r = run_on(tmp_path, old, new)
    assert r.returncode == 0, r.stderr
    assert "dram: 2 cells" in r.stdout
    assert "1 cells lost more than 5 points" in r.stdout
    assert "layer_norm f32 D=768 1 thread(s): 90% -> 80%" in r.stdout
    assert "rms_norm f32" not in r.stdout
    assert "cells only in the new run: 1 (add_rms_norm_backward)" in r.stdout


def test_says_when_the_runs_ran_different_kernels(tmp_path: Path) -> None:
    old, new = [record("layer_norm", 768, 90, 1.0)], [record("layer_norm", 768, 89, 3.0)]
    old[0]["simd"], new[0]["simd"] = "AVX3_ZEN4", "AVX2"
    r = run_on(tmp_path, old, new)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("different kernels: the old run ran AVX3_ZEN4, the new one AVX2")
    new[0]["simd"] = "AVX3_ZEN4"
    r = run_on(tmp_path, old, new)
    assert r.returncode == 0 and "different kernels" not in r.stdout and "SIMD target" not in r.stdout
    del old[0]["simd"]
    r = run_on(tmp_path, old, new)
    assert r.stdout.startswith("SIMD target: not recorded -> AVX3_ZEN4")
