#!/usr/bin/env python3
"""Writes the seed corpus of the normkit fuzzer (fuzz/corpus/).

Each seed is one call in the byte layout that fuzz_ops.cc decodes (see the
comment at its top): a valid call of every op and dtype with every optional
argument, and from there one variation each — every way of breaking an
argument, bad eps and weight_offset, aliasing, the value classes (huge,
subnormal, offset, max finite), NaN/Inf injections, wide rows. libFuzzer
mutates from these. Deterministic: rerunning rewrites the same files.
"""
import hashlib
import os
import struct
import sys

OPS = ["layer", "rms", "add_layer", "add_rms", "layer_bwd", "rms_bwd", "add_layer_bwd", "add_rms_bwd"]
DTYPES = {"f32": 0, "f64": 1, "f16": 2, "bf16": 3}
ALL_PRESENT = 1 | 2 | 4 | 8 | 16 | 32 | 64  # weight bias mean rstd dweight dbias dh_out


def seed(op=0, rows=3, D=17, dtype=0, pres=ALL_PRESENT, extra=0, eps=0, offset=0, pads=0, which=0, how=0,
         alias_out=0, alias_into=0, alias_off=0, threads=1, cls=1, value_seed=1, inject=()):
    b = bytes([op, rows, D, dtype, pres, extra, eps, offset, pads, which, how, alias_out, alias_into, alias_off,
               threads, cls]) + struct.pack("<Q", value_seed)
    for slot, at, kind in inject:
        b += bytes([slot, at, kind])
    return b


def seeds():
    out = []
    # Every op and dtype, valid, all optionals; 16-bit also with f32 params
    # and f32 residual stream.
    for op in range(8):
        for name, t in DTYPES.items():
            out.append(seed(op=op, dtype=t, D=17 + op, pads=0x1b))
            if name == "bf16" and op in (2, 6):  # f32 parameters and residual stream
                out.append(seed(op=op, dtype=t, extra=3, D=33))
    # RMSNorm with Gemma's offset, and no optionals at all.
    out.append(seed(op=1, offset=3))
    out.append(seed(op=5, offset=3, pres=0))
    out.append(seed(op=0, pres=0))
    # Each way of breaking one argument, spread over the ops and arguments.
    for how in range(1, 15):
        out.append(seed(op=how % 8, how=how, which=how % 5, dtype=how % 4))
    # eps: NaN, Inf, negative, 0, denormal, raw bits; weight_offset NaN.
    for eps in (2, 3, 7, 8, 9, 10):
        out.append(seed(op=0, eps=eps))
    out.append(seed(op=1, offset=6))
    out.append(seed(op=1, offset=3, pres=0, extra=8))  # offset without a weight
    # Aliasing: several outputs into several targets, offsets 0, 1, a row, interleaved.
    for k, (ao, ai, off) in enumerate([(1, 0, 0), (1, 0, 1), (2, 1, 0), (3, 2, 0), (1, 0, 7), (1, 0, 128), (2, 4, 0)]):
        out.append(seed(op=k % 8, alias_out=ao, alias_into=ai, alias_off=off))
    # Value classes: offset, huge, max finite, subnormal, constant, tiny, mixed.
    for cls in range(2, 10):
        out.append(seed(op=cls % 8, cls=cls, dtype=cls % 4, D=40))
    # NaN / Inf / max / subnormal injected into x (slot order: x is argument 0).
    for kind in range(6):
        out.append(seed(op=kind, inject=[(0, 1, kind), (0, 5, kind)]))
    # Wide rows and more threads.
    out.append(seed(op=0, D=209, rows=2, threads=2))
    out.append(seed(op=4, D=206, rows=5, threads=3))
    # Zero rows; D = 0; eps = 0 on a zero row (constant class 0 is normal, so
    # inject zeros over a D = 4 row).
    out.append(seed(op=4, rows=0))
    out.append(seed(op=0, D=200))
    out.append(seed(op=1, D=4, rows=2, eps=2, inject=[(0, 0, 6), (0, 37, 6), (0, 74, 6), (0, 111, 6)]))
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    corpus = os.path.join(here, "corpus")
    os.makedirs(corpus, exist_ok=True)
    for old in os.listdir(corpus):
        os.remove(os.path.join(corpus, old))
    all_seeds = seeds()
    for b in all_seeds:
        with open(os.path.join(corpus, hashlib.sha1(b).hexdigest()[:16]), "wb") as f:
            f.write(b)
    print(f"{len(all_seeds)} seeds written to {corpus}", file=sys.stderr)


if __name__ == "__main__":
    main()
