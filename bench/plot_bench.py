#!/usr/bin/env python3
"""Plot `normkit bench --json` records: % of the bandwidth ceiling against D.

One panel per op (LayerNorm ops on the top row, RMSNorm ops below). Colour
is the dtype, line style the implementation, marker the thread count.

    normkit bench --json > bench.json
    python3 bench/plot_bench.py bench.json -o docs/bench.png
"""

import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

OPS = [
    ["layer_norm", "layer_norm_backward", "add_layer_norm", "add_then_layer_norm"],
    ["rms_norm", "rms_norm_backward", "add_rms_norm", "add_then_rms_norm"],
]
COLOURS = {"f32": "tab:blue", "bf16": "tab:orange", "f16": "tab:green"}
STYLES = {"normkit": "-", "naive": ":", "onednn": "--"}
MARKERS = {1: "o", 2: "s"}
REQUIRED = ("impl", "op", "dtype", "rows", "D", "threads", "pct_of_ceiling", "size_class")


def load(path):
    with open(path) if path != "-" else sys.stdin as f:
        records = json.load(f)
    if not isinstance(records, list):
        raise SystemExit(f"{path}: expected a JSON list of records")
    for i, r in enumerate(records):
        missing = [k for k in REQUIRED if k not in r]
        if missing:
            raise SystemExit(f"{path}: record {i} lacks {', '.join(missing)}")
    return records


def plot(records, size_class, out, title):
    series = defaultdict(list)  # (op, impl, dtype, threads) -> [(D, pct)]
    for r in records:
        if r["size_class"] != size_class or r["impl"] == "ceiling":
            continue
        series[(r["op"], r["impl"], r["dtype"], r["threads"])].append((r["D"], r["pct_of_ceiling"]))
    if not series:
        raise SystemExit(f"no records of size class '{size_class}' to plot")

    fig, axes = plt.subplots(2, 4, figsize=(18, 8.5), sharex=True, sharey=True)
    for row, ops in enumerate(OPS):
        for col, op in enumerate(ops):
            ax = axes[row][col]
            for (s_op, impl, dtype, threads), pts in sorted(series.items()):
                if s_op != op:
                    continue
                pts.sort()
                ax.plot([d for d, _ in pts], [p for _, p in pts],
                        color=COLOURS.get(dtype, "black"), linestyle=STYLES.get(impl, "-."),
                        marker=MARKERS.get(threads, "^"), markersize=4, linewidth=1.2)
            ax.set_title(op, fontsize=10)
            ax.set_xscale("log", base=2)
            widths = sorted({d for (o, *_), pts in series.items() if o == op for d, _ in pts})
            ax.set_xticks(widths, [str(d) for d in widths], rotation=45, fontsize=8)
            ax.minorticks_off()
            ax.axhline(100, color="grey", linewidth=0.8)
            ax.grid(True, which="both", alpha=0.3)
            if row == 1:
                ax.set_xlabel("D (features per row)")
            if col == 0:
                ax.set_ylabel("% of bandwidth ceiling")

    # One legend for the three encodings.
    handles = []
    for dtype, c in COLOURS.items():
        handles.append(plt.Line2D([], [], color=c, label=dtype))
    for impl, s in STYLES.items():
        handles.append(plt.Line2D([], [], color="black", linestyle=s, label=impl))
    for t, m in MARKERS.items():
        handles.append(plt.Line2D([], [], color="black", marker=m, linestyle="",
                                  label=f"{t} thread{'s' if t > 1 else ''}"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="records from `normkit bench --json` (or --output); - for stdin")
    ap.add_argument("-o", "--output", default="bench.png", help="PNG to write [bench.png]")
    ap.add_argument("--size-class", default="dram", choices=["dram", "cache", "row"],
                    help="which size class to plot [dram]")
    args = ap.parse_args()
    titles = {
        "dram": "normkit bench: % of the copy/read ceiling, buffers rotated beyond cache",
        "cache": "normkit bench: % of the copy/read ceiling, cache-resident",
        "row": "normkit bench: % of the copy/read ceiling, one row",
    }
    plot(load(args.json), args.size_class, args.output, titles[args.size_class])


if __name__ == "__main__":
    main()
