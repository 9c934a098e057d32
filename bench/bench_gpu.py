"""normkit's CUDA kernels against PyTorch's on one GPU.

Each op, dtype and shape is timed with CUDA events; the figures are medians
over rounds that interleave the contenders, so a clock or thermal drift
moves every contender alike. Bandwidth is the bytes the op must move
(every input read once, every output written once) over the median time,
and the ceiling is a device-to-device copy of the same bytes, measured in
the same run.

    .venv/bin/python bench/bench_gpu.py --out build/gpu-check

writes results.json and results.md into --out and prints the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

import normkit

WIDTHS = [768, 2048, 4096, 8192, 16384, 65536]
BIG_BYTES = 256 << 20  # "at >= 256 MiB moved": the bandwidth targets' size


def gpu_time(fn, repeats: int) -> list[float]:
    """Per-call seconds of `fn`, each sample the mean of a batch of calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()  # warm: allocator, autotuning, lazy module loads
    torch.cuda.synchronize()
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    once = max(start.elapsed_time(end) / 1e3, 1e-6)
    batch = max(1, min(200, int(2e-3 / once)))  # about 2 ms a sample
    out = []
    for _ in range(repeats):
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / 1e3 / batch)
    return out


def composite_rms(x, w, eps):
    """RMSNorm as many models still write it: in f32, cast back."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def contenders(op: str, x, w, b, res, dy):
    """name -> (callable, bytes moved) for one op on these tensors."""
    D = x.shape[-1]
    e = x.element_size()
    n = x.numel()
    eps = 1e-6
    if op == "layer_norm":
        moved = 2 * n * e
        return {
            "normkit": (lambda: normkit.layer_norm(x, (D,), w, b, eps), moved),
            "torch": (lambda: torch.nn.functional.layer_norm(x, (D,), w, b, eps), moved),
        }
    if op == "rms_norm":
        moved = 2 * n * e
        return {
            "normkit": (lambda: normkit.rms_norm(x, (D,), w, eps), moved),
            "torch": (lambda: torch.nn.functional.rms_norm(x, (D,), w, eps), moved),
            "torch composite": (lambda: composite_rms(x, w, eps), moved),
        }
    if op == "add_rms_norm":
        moved = 4 * n * e  # x, residual in; h, y out
        def torch_add():
            h = x + res
            return h, torch.nn.functional.rms_norm(h, (D,), w, eps)
        return {
            "normkit": (lambda: normkit.add_rms_norm(x, res, (D,), w, eps), moved),
            "torch": (torch_add, moved),
        }
    if op in ("layer_norm_backward", "rms_norm_backward"):
        moved = 3 * n * e  # dy, x in; dx out (statistics and dweight partials are O(rows + D))
        if op == "layer_norm_backward":
            _, mean, rstd = normkit.layer_norm(x, (D,), w, b, eps, return_stats=True)
            nk = lambda: normkit.layer_norm_backward(dy, x, (D,), mean, rstd, w)
            tfn = lambda t: torch.nn.functional.layer_norm(t, (D,), wt, bt, eps)
        else:
            _, rstd = normkit.rms_norm(x, (D,), w, eps, return_stats=True)
            nk = lambda: normkit.rms_norm_backward(dy, x, (D,), rstd, w)
            tfn = lambda t: torch.nn.functional.rms_norm(t, (D,), wt, eps)
        xt = x.detach().requires_grad_(True)
        wt = w.detach().requires_grad_(True)
        bt = b.detach().requires_grad_(True) if b is not None else None
        yt = tfn(xt)
        params = [xt, wt] + ([bt] if bt is not None and op == "layer_norm_backward" else [])
        return {
            "normkit": (nk, moved),
            "torch": (lambda: torch.autograd.grad(yt, params, dy, retain_graph=True), moved),
        }
    raise ValueError(op)


def copy_ceiling(nbytes: int, repeats: int) -> float:
    """Device-to-device copy bandwidth (read + write bytes / s) at this size."""
    n = max(1, nbytes // 2 // 4)
    a = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    c = torch.empty_like(a)
    t = statistics.median(gpu_time(lambda: c.copy_(a), repeats))
    return 2 * n * 4 / t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("build/gpu-check"))
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA device; nothing measured", file=sys.stderr)
        return 1
    if normkit.cuda_device_count() == 0:
        print("bench_gpu: this normkit build has no CUDA backend", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.cuda.get_device_name(0)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    torch.manual_seed(0)
    ops = ["layer_norm", "rms_norm", "add_rms_norm", "layer_norm_backward", "rms_norm_backward"]
    records = []
    for dtype in (torch.float32, torch.bfloat16):
        esize = torch.tensor([], dtype=dtype).element_size()
        for D in WIDTHS:
            for rows in sorted({4096, max(1, BIG_BYTES // (2 * D * esize))}):
                x = torch.randn(rows, D, device="cuda", dtype=dtype)
                res = torch.randn_like(x)
                dy = torch.randn_like(x)
                w = torch.rand(D, device="cuda", dtype=dtype) + 0.5
                b = torch.randn(D, device="cuda", dtype=dtype)
                for op in ops:
                    cs = contenders(op, x, w, b, res, dy)
                    moved = next(iter(cs.values()))[1]
                    samples = {name: [] for name in cs}
                    ceil = []
                    for _ in range(args.rounds):
                        ceil.append(copy_ceiling(moved, args.repeats))
                        for name, (fn, _) in cs.items():
                            samples[name] += gpu_time(fn, args.repeats)
                    ceiling = statistics.median(ceil)
                    for name, ts in samples.items():
                        t = statistics.median(ts)
                        records.append(dict(op=op, dtype=str(dtype).removeprefix("torch."), rows=rows, D=D,
                                            impl=name, seconds=t, bytes=moved, gbps=moved / t / 1e9,
                                            pct_of_copy=100 * moved / t / ceiling, copy_gbps=ceiling / 1e9))
                del x, res, dy
                torch.cuda.empty_cache()
    result = dict(device=dev, commit=commit, torch=torch.__version__, records=records)
    (args.out / "results.json").write_text(json.dumps(result, indent=1))

    # One line per (op, dtype, shape): normkit's GB/s and % of the copy, and
    # its speed-up over each other contender.
    lines = [f"# normkit CUDA vs PyTorch on {dev} (commit {commit}, torch {torch.__version__})", "",
             "| op | dtype | rows × D | MiB moved | normkit GB/s | % of copy | × torch | × composite |",
             "|---|---|---|---|---|---|---|---|"]
    key = lambda r: (r["op"], r["dtype"], r["rows"], r["D"])
    groups: dict = {}
    for r in records:
        groups.setdefault(key(r), {})[r["impl"]] = r
    for (op, dt, rows, D), g in groups.items():
        nk = g["normkit"]
        vs = lambda name: f"{g[name]['seconds'] / nk['seconds']:.2f}" if name in g else "-"
        lines.append(f"| {op} | {dt} | {rows} × {D} | {nk['bytes'] / 2**20:.0f} | {nk['gbps']:.0f} | "
                     f"{nk['pct_of_copy']:.0f} % | {vs('torch')} | {vs('torch composite')} |")
    md = "\n".join(lines) + "\n"
    (args.out / "results.md").write_text(md)
    print(md)
    print(f"results: {args.out / 'results.json'}, {args.out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
