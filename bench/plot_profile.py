#!/usr/bin/env python3
"""Draw the charts of a `normkit profile` run from its JSON.

    normkit profile --json > profile.json
    python3 bench/plot_profile.py profile.json shares.png roofline.png

shares.png: each class's share of the step's FLOPs beside its share of the
time. roofline.png: achieved GFLOP/s against arithmetic intensity (FLOP per
byte that must move), per class (large markers) and per operator (small),
under the sgemm and copy ceilings measured in the same run.
`normkit profile --report FILE.md` runs this itself when the project's .venv
has Python.
"""

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

COLOURS = {
    "matrix products": "tab:blue",
    "attention": "tab:purple",
    "normalization": "tab:red",
    "element-wise": "tab:orange",
    "embedding/head/loss": "tab:green",
}


def subtitle(p):
    c = p["config"]
    return (f"{c['placement']}-norm {c['norm']}, {'fused' if c['fused'] else 'unfused'} add+norm; depth {c['depth']}, "
            f"D {c['width']}, {c['heads']} heads, FFN {c['ffn']},\nbatch {c['batch']} × seq {c['seq']}; "
            f"{c['threads']} BLAS threads, {c['norm_threads']} normkit")


def shares(p, out):
    classes = p["classes"]
    names = [c["name"] for c in classes]
    y = range(len(names))
    fig, ax = plt.subplots(figsize=(9, 4.2))
    h = 0.38
    ax.barh([i - h / 2 for i in y], [100 * c["flop_share"] for c in classes], h, label="share of FLOPs",
            color="lightgrey", edgecolor="grey")
    ax.barh([i + h / 2 for i in y], [100 * c["time_share"] for c in classes], h, label="share of time",
            color=[COLOURS.get(n, "black") for n in names])
    for i, c in enumerate(classes):
        ax.text(100 * c["flop_share"] + 0.5, i - h / 2, f"{100 * c['flop_share']:.2f} %", va="center", fontsize=8)
        ax.text(100 * c["time_share"] + 0.5, i + h / 2, f"{100 * c['time_share']:.1f} %", va="center", fontsize=8)
    ax.set_yticks(list(y), names)
    ax.invert_yaxis()
    ax.set_xlabel("% of the step")
    ax.set_xlim(0, 105)
    ax.legend(loc="lower right")
    ax.set_title("FLOP share beside time share\n" + subtitle(p), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=130)


def roofline(p, out):
    c = p["ceilings"]
    peak, bw = c["gemm_gflops"], c["copy_gbps"]
    pts = [r for r in p["ops"] + p["classes"] if r["seconds"] > 0 and r["flops"] > 0]
    lo = min(r["flops_per_byte"] for r in pts) / 2
    hi = max(r["flops_per_byte"] for r in pts) * 2
    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(xs, [min(peak, x * bw) for x in xs], color="black", linewidth=1.2,
            label=f"ceiling: min(sgemm {peak:.0f} GFLOP/s, FLOP/B × copy {bw:.1f} GB/s)")
    for r in p["ops"]:
        if r["seconds"] > 0 and r["flops"] > 0:
            ax.scatter(r["flops_per_byte"], r["gflops"], s=12, alpha=0.5, color=COLOURS.get(r["class"], "black"))
    for r in p["classes"]:
        if r["seconds"] > 0 and r["flops"] > 0:
            ax.scatter(r["flops_per_byte"], r["gflops"], s=90, marker="D", color=COLOURS.get(r["name"], "black"),
                       edgecolor="black", label=r["name"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte that must move)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("roofline: classes (diamonds) and operators (dots)\n" + subtitle(p), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=130)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("shares_png")
    ap.add_argument("roofline_png")
    a = ap.parse_args()
    with open(a.json) as f:
        p = json.load(f)
    for key in ("config", "ceilings", "classes", "ops"):
        if key not in p:
            raise SystemExit(f"{a.json}: not a normkit profile JSON (no '{key}')")
    shares(p, a.shares_png)
    roofline(p, a.roofline_png)


if __name__ == "__main__":
    main()
