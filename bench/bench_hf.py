#!/usr/bin/env python3
"""A small Hugging Face Llama on the CPU, with and without normkit.torch.replace_norms.

Times what a user feels: a training step (forward, backward, AdamW step) on a
batch, and a prefill (forward under torch.no_grad over a prompt), for the
unswapped model and for a copy whose norms replace_norms swapped, and prints
the whole-step speedup. The norms' share of each step is estimated by timing
the model's norm modules alone on the model's activation shape (rows = batch ×
sequence, D = hidden size), as many times as the model has them, against the
step: hooks inside the model would add their own cost to what they measure.
Both models are checked to give the same loss before anything is timed. Times
are medians of interleaved rounds; the machine may be shared.

Usage: python bench/bench_hf.py [--threads N] [--dtype fp32|bf16] [--hidden 512] [--layers 4]
       [--batch 4] [--seq 256] [--prefill 512] [--rounds 7]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from typing import Callable, List

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import normkit  # noqa: E402
import normkit.torch as nkt  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def median_times(fns: List[Callable[[], None]], rounds: int) -> List[float]:
    """Seconds per call of each fn: one warm-up each, then `rounds` interleaved rounds, medians."""
    for f in fns:
        f()
    samples: List[List[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            samples[i].append(time.perf_counter() - t0)
    return [statistics.median(s) for s in samples]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256, help="training sequence length")
    ap.add_argument("--prefill", type=int, default=512, help="prefill prompt length (batch 1)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    normkit.set_num_threads(args.threads)
    dtype = DTYPES[args.dtype]
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=4096,
        hidden_size=args.hidden,
        intermediate_size=int(args.hidden * 8 / 3) // 64 * 64,
        num_hidden_layers=args.layers,
        num_attention_heads=max(1, args.hidden // 64),
        num_key_value_heads=max(1, args.hidden // 128),
        max_position_embeddings=max(args.seq, args.prefill),
    )
    base = transformers.LlamaForCausalLM(cfg).to(dtype).train()
    swapped = copy.deepcopy(base)
    report = nkt.replace_norms(swapped)
    print(report)
    if report.left_alone or not report.swapped:
        print("not every norm was swapped; the comparison would not mean what it says")
        return 1

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), generator=g)
    prompt = torch.randint(0, cfg.vocab_size, (1, args.prefill), generator=g)
    opts = {id(m): torch.optim.AdamW(m.parameters(), lr=1e-5) for m in (base, swapped)}

    with torch.no_grad():
        l0 = base(input_ids=ids, labels=ids).loss.item()
        l1 = swapped(input_ids=ids, labels=ids).loss.item()
    print(f"loss unswapped {l0:.6f}, swapped {l1:.6f}")
    # The two differ only by rounding: a few units of the dtype's roundoff.
    if abs(l0 - l1) > 64 * torch.finfo(dtype).eps * abs(l0):
        print("the swapped model's loss differs beyond rounding; not timing it")
        return 1

    def train_step(model):
        def run():
            opt = opts[id(model)]
            opt.zero_grad(set_to_none=True)
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()

        return run

    def prefill(model):
        def run():
            with torch.no_grad():
                model(input_ids=prompt, use_cache=True)

        return run

    # The norms alone, on the activation shape they see in each step.
    hf_norm = base.model.norm
    nk_norm = swapped.model.norm
    n_norms = len(report.swapped)
    D = args.hidden

    def norm_train(m):
        x = torch.randn(args.batch, args.seq, D, dtype=dtype, requires_grad=True)
        dy = torch.randn_like(x)

        def run():
            for _ in range(n_norms):
                torch.autograd.grad(m(x), [x, m.weight], dy)

        return run

    def norm_prefill(m):
        x = torch.randn(1, args.prefill, D, dtype=dtype)

        def run():
            with torch.no_grad():
                for _ in range(n_norms):
                    m(x)

        return run

    t_train = median_times([train_step(base), train_step(swapped)], args.rounds)
    t_pre = median_times([prefill(base), prefill(swapped)], args.rounds)
    t_nt = median_times([norm_train(hf_norm), norm_train(nk_norm)], args.rounds)
    t_np = median_times([norm_prefill(hf_norm), norm_prefill(nk_norm)], args.rounds)

    print(
        f"\nLlama, hidden {D}, {args.layers} layers ({n_norms} norms), {args.dtype}, "
        f"{args.threads} threads, torch {torch.__version__}, transformers {transformers.__version__}"
    )
    print("| step | shape | unswapped ms | swapped ms | speedup | norms' share unswapped | swapped |")
    print("|---|---|---:|---:|---:|---:|---:|")
    rows = [
        ("train (fwd+bwd+AdamW)", f"{args.batch}×{args.seq}", t_train, t_nt),
        ("prefill (no_grad)", f"1×{args.prefill}", t_pre, t_np),
    ]
    for name, shape, (a, b), (na, nb) in rows:
        print(
            f"| {name} | {shape} | {a * 1e3:.1f} | {b * 1e3:.1f} | {a / b:.3f}× | "
            f"{100 * na / a:.1f}% | {100 * nb / b:.1f}% |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
