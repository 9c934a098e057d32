"""Draws the plots of `normkit study` from its JSON.

    python3 bench/plot_study.py study/study.json -o study/

writes one PNG per table (the names study.md links to): gradients_at_init,
warmup, unnormalized_stack, final_norm, layernorm_vs_rmsnorm, placements.
Loss curves are the median over seeds of the training loss, smoothed over
10 steps; a diverged run's curve stops where it diverged.
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import numpy as np  # noqa: E402


def smooth(y, k=10):
    y = np.asarray(y, dtype=float)
    if len(y) < k:
        return y
    return np.convolve(y, np.ones(k) / k, mode="valid")


def select(runs, **want):
    return [r for r in runs if all(r[k] == v for k, v in want.items())]


def median_curve(runs):
    """The median over seeds, step by step, as far as the shortest run."""
    curves = [smooth(r["loss"]) for r in runs if r["loss"]]
    if not curves:
        return np.array([])
    n = min(len(c) for c in curves)
    return np.median(np.stack([c[:n] for c in curves]), axis=0)


def curves(ax, groups, title, ylim=None):
    for label, runs in groups:
        if not runs:
            continue
        y = median_curve(runs)
        diverged = sum(r["diverged"] for r in runs)
        suffix = f" ({diverged}/{len(runs)} diverged)" if diverged else ""
        ax.plot(np.arange(len(y)), y, label=label + suffix)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (median over seeds)")
    ax.set_title(title)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("-o", "--out", default=".")
    args = ap.parse_args()
    with open(args.json) as f:
        s = json.load(f)
    p, runs = s["preset"], s["runs"]
    base = dict(depth=p["depth"], steps=p["steps"], qk_norm=False, final_norm=True, norm="layernorm", init="gpt2")
    ylim = (1.0, float(np.log(s["data"]["vocab"])) + 0.5)
    os.makedirs(args.out, exist_ok=True)

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, name), dpi=110)
        plt.close(fig)

    # Gradients at initialization: a row per init scheme, a panel per depth.
    depths = sorted({g["depth"] for g in s["gradients"]})
    inits = sorted({g["init"] for g in s["gradients"]})
    fig, axes = plt.subplots(len(inits), len(depths), figsize=(4.2 * len(depths), 3.4 * len(inits)), squeeze=False)
    for row, init in zip(axes, inits):
        for ax, d in zip(row, depths):
            for g in (g for g in s["gradients"] if g["depth"] == d and g["init"] == init):
                ax.semilogy(np.arange(1, d + 1), g["per_block"], marker=".", label=g["placement"])
            ax.set_title(f"{init} init, depth {d}")
            ax.set_xlabel("block")
            ax.set_ylabel("‖∇‖ of the block's parameters")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"Gradients at initialization (geometric mean over {p['grad_seeds']} seeds)")
    save(fig, "gradients_at_init.png")

    # Warmup.
    lr = s["stress_lr"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    curves(ax, [(f"{pl}, warmup {w}", select(runs, placement=pl, lr=lr, warmup=w, **base))
                for pl in ("pre", "post") for w in (0, p["warmup"])],
           f"pre- and post-norm at lr {lr:g}", ylim)
    save(fig, "warmup.png")

    # The unnormalized stack: RMS by sublayer at init and after training.
    fig, (a0, a1) = plt.subplots(1, 2, figsize=(11, 4.4))
    color = {"gpt2": "tab:blue", "xavier": "tab:red"}
    deepest = max(sp["depth"] for sp in s["stack_init"])
    for sp in (sp for sp in s["stack_init"] if sp["depth"] == deepest):
        a0.semilogy(np.arange(len(sp["stream_rms"])) / 2, sp["stream_rms"], color=color[sp["init"]],
                    linestyle="-" if sp["placement"] == "none" else "--",
                    label=f"{sp['placement']}, {sp['init']} init")
    a0.set_title(f"at initialization, depth {deepest}")
    trained = [r for r in runs if r["depth"] == p["stack_train_depth"] and r["lr"] == p["base_lr"]
               and r["steps"] == p["stack_steps"] and r["warmup"] == 0 and r["placement"] in ("none", "pre")
               and not r["qk_norm"] and r["final_norm"] and r["norm"] == "layernorm" and r["stream_rms"]]
    for r in trained:
        a1.semilogy(np.arange(len(r["stream_rms"])) / 2, r["stream_rms"], color=color[r["init"]],
                    linestyle="-" if r["placement"] == "none" else "--",
                    label=f"{r['placement']}, {r['init']} init" if r["seed"] == 1 else None)
    a1.set_title(f"after {p['stack_steps']} steps, depth {p['stack_train_depth']} (each seed)")
    for a in (a0, a1):
        a.set_xlabel("block (half steps: after attention)")
        a.set_ylabel("RMS of the residual stream")
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    save(fig, "unnormalized_stack.png")

    # The final norm.
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    curves(ax, [(f"final norm: {'yes' if fn else 'no'}",
                 select(runs, placement="pre", lr=p["base_lr"], warmup=0,
                        **{**base, "final_norm": fn})) for fn in (True, False)],
           f"pre-norm with and without the final norm, lr {p['base_lr']:g}", ylim)
    save(fig, "final_norm.png")

    # LayerNorm against RMSNorm.
    fig, (a0, a1) = plt.subplots(1, 2, figsize=(10, 4))
    groups = [(k, select(runs, placement="pre", lr=p["base_lr"], warmup=0, **{**base, "norm": k}))
              for k in ("layernorm", "rmsnorm")]
    curves(a0, groups, f"pre-norm, lr {p['base_lr']:g}", ylim)
    for i, (k, rs) in enumerate(groups):
        ms = [r["median_step_ms"] for r in rs]
        a1.scatter([i] * len(ms), ms, label=k)
    a1.set_xticks([0, 1], [k for k, _ in groups])
    a1.set_ylabel("median step time per run, ms")
    a1.set_title("step time, each seed")
    a1.grid(alpha=0.3)
    save(fig, "layernorm_vs_rmsnorm.png")

    # Placements at the warmup table's learning rate.
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    groups = [(pl, select(runs, placement=pl, lr=lr, warmup=0, **base))
              for pl in ("pre", "post", "sandwich", "output", "deepnorm")]
    groups.append(("pre+qk-norm", select(runs, placement="pre", lr=lr, warmup=0, **{**base, "qk_norm": True})))
    curves(ax, groups, f"placements at lr {lr:g}, no warmup", ylim)
    save(fig, "placements.png")


if __name__ == "__main__":
    main()
