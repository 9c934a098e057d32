#!/usr/bin/env python3
"""Markdown summary tables of `normkit bench --json` records (for docs/benchmarks.md).

    normkit bench --output bench.json > bench.txt
    python3 bench/summarize_bench.py bench.json > summary.md

Tables, for each size class and thread count present:
  * normkit's % of the bandwidth ceiling, op x dtype against D;
  * normkit's speed-up over oneDNN and over the naive loops (their time / normkit's);
  * RMSNorm time / LayerNorm time, fused speed-up (add then norm / fused,
    backward then add / fused backward), and what the parameter gradients
    cost (backward / backward of dx alone);
and, for the one-row class, normkit's time against the time to copy the row.
"""

import argparse
import json
import sys
from collections import defaultdict

OPS = ["layer_norm", "rms_norm", "layer_norm_backward", "rms_norm_backward",
       "layer_norm_backward_dx", "rms_norm_backward_dx",
       "add_layer_norm", "add_rms_norm", "add_then_layer_norm", "add_then_rms_norm",
       "add_layer_norm_backward", "add_rms_norm_backward",
       "layer_norm_backward_then_add", "rms_norm_backward_then_add"]
DTYPES = ["f32", "bf16", "f16"]
CLASS_TITLES = {"dram": "beyond cache", "cache": "cache-resident", "row": "one row"}


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    args = ap.parse_args()
    with open(args.json) if args.json != "-" else sys.stdin as f:
        records = json.load(f)

    by = {}
    for r in records:
        by[(r["impl"], r["op"], r["dtype"], r["D"], r["threads"], r["size_class"])] = r

    def get(impl, op, dt, D, t, c):
        return by.get((impl, op, dt, D, t, c))

    def ratio(a, b):
        return None if a is None or b is None else a["median_ms"] / b["median_ms"]

    classes = [c for c in ("dram", "cache", "row") if any(r["size_class"] == c for r in records)]
    threads = sorted({r["threads"] for r in records})
    for c in classes:
        widths = sorted({r["D"] for r in records if r["size_class"] == c})
        for t in threads:
            recs = [r for r in records if r["size_class"] == c and r["threads"] == t and r["impl"] == "normkit"]
            if not recs:
                continue
            title = f"{CLASS_TITLES[c]}, {t} thread{'s' if t > 1 else ''}"
            rows_of = {r["D"]: r["rows"] for r in recs}
            dcols = [f"D={D} ({rows_of.get(D, '?')} rows)" for D in widths]

            print(f"\n#### normkit % of ceiling — {title}\n")
            rows = []
            for op in OPS:
                for dt in DTYPES:
                    cells = [fmt(get("normkit", op, dt, D, t, c) and get("normkit", op, dt, D, t, c)["pct_of_ceiling"], ".0f")
                             for D in widths]
                    if any(x != "–" for x in cells):
                        rows.append([op, dt] + cells)
            print(table(["op", "dtype"] + dcols, rows))

            for other in ("onednn", "naive"):
                rows = []
                for op in OPS:
                    for dt in DTYPES:
                        cells = [fmt(ratio(get(other, op, dt, D, t, c), get("normkit", op, dt, D, t, c)), ".2f")
                                 for D in widths]
                        if any(x != "–" for x in cells):
                            rows.append([op, dt] + cells)
                if rows:
                    print(f"\n#### {other} time / normkit time (> 1: normkit faster) — {title}\n")
                    print(table(["op", "dtype"] + dcols, rows))

            print(f"\n#### RMSNorm time / LayerNorm time, fused speed-up, parameter gradients' cost (normkit) — {title}\n")
            pairs = [("forward", "layer_norm", "rms_norm"),
                     ("backward", "layer_norm_backward", "rms_norm_backward"),
                     ("fused add+norm", "add_layer_norm", "add_rms_norm"),
                     ("fused backward", "add_layer_norm_backward", "add_rms_norm_backward")]
            rows = []
            for name, ln, rms in pairs:
                for dt in DTYPES:
                    cells = [fmt(ratio(get("normkit", rms, dt, D, t, c), get("normkit", ln, dt, D, t, c)), ".2f")
                             for D in widths]
                    if any(x != "–" for x in cells):
                        rows.append([f"RMS/LN {name}", dt] + cells)
            for norm, fused, unfused in (("LayerNorm", "add_layer_norm", "add_then_layer_norm"),
                                         ("RMSNorm", "add_rms_norm", "add_then_rms_norm"),
                                         ("LayerNorm backward", "add_layer_norm_backward",
                                          "layer_norm_backward_then_add"),
                                         ("RMSNorm backward", "add_rms_norm_backward",
                                          "rms_norm_backward_then_add")):
                for dt in DTYPES:
                    cells = [fmt(ratio(get("normkit", unfused, dt, D, t, c), get("normkit", fused, dt, D, t, c)), ".2f")
                             for D in widths]
                    if any(x != "–" for x in cells):
                        rows.append([f"fused speed-up {norm}", dt] + cells)
            for norm, full, dx_only in (("LayerNorm", "layer_norm_backward", "layer_norm_backward_dx"),
                                        ("RMSNorm", "rms_norm_backward", "rms_norm_backward_dx")):
                for dt in DTYPES:
                    cells = [fmt(ratio(get("normkit", full, dt, D, t, c), get("normkit", dx_only, dt, D, t, c)), ".2f")
                             for D in widths]
                    if any(x != "–" for x in cells):
                        rows.append([f"parameter gradients {norm} (bwd / dx alone)", dt] + cells)
            print(table(["ratio", "dtype"] + dcols, rows))

            if c == "row":
                print(f"\n#### one row: normkit forward time against copying the row — {title}\n")
                rows = []
                for op in ("layer_norm", "rms_norm", "add_rms_norm"):
                    for dt in DTYPES:
                        cells = []
                        for D in widths:
                            n, cp = get("normkit", op, dt, D, t, c), get("ceiling", "copy_row", dt, D, t, c)
                            cells.append("–" if n is None or cp is None else
                                         f"{n['median_ms'] * 1e3:.3g} µs / {cp['median_ms'] * 1e3:.2g} µs")
                        if any(x != "–" for x in cells):
                            rows.append([op, dt] + cells)
                print(table(["op", "dtype"] + [f"D={D}" for D in widths], rows))


if __name__ == "__main__":
    main()
