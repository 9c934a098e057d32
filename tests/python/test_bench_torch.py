"""bench/bench_torch.py, the PyTorch comparison of docs/python.md, still runs
against the installed package: every op, dtype and pass is checked against
the fp64 oracle inside the script before it is timed, and the JSON it writes
has a record for each. A smoke test: one small shape, short rounds, no timing
is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "bench_torch.py"


def test_bench_torch_runs_and_writes_every_record(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--threads", "1", "--shapes", "2x256,1x256", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    d = json.loads(out.read_text())
    seen = {(x["op"], x["dtype"], x["mode"]) for x in d["results"]}
    want = {(op, dt, mode) for op in ("rms_norm", "layer_norm") for dt in ("fp32", "bf16") for mode in ("fwd", "fwd+bwd")}
    assert seen == want
    for rec in d["results"]:
        impls = {"torch", "normkit", "normkit out="} | ({"composite"} if rec["op"] == "rms_norm" else set())
        if rec["rows"] == 1 and rec["mode"] == "fwd+bwd":
            impls |= {"normkit Function", "empty Function"}  # the Python route; the engine's floor
        assert set(rec["seconds"]) == impls, rec
        assert all(t > 0 for t in rec["seconds"].values()), rec
    assert len(d["accuracy"]) == 8  # one per op and dtype at each shape
    assert "target layer_norm fwd+bwd" in r.stdout
    assert "floor layer_norm fp32 1x256 fwd+bwd: empty Function" in r.stdout
