"""Checking that one of normkit's modules computes what a given norm module does.

:func:`normkit.torch.replace_norms` asks two things of every module:
:func:`describe` — is it shaped like a norm (parameters ``weight`` and
optionally ``bias`` of shape ``(D,)``, an ``eps``) — and :func:`match` — which
normkit module, if any, gives the same output dtype, output and gradients on
probe inputs. Nothing is swapped on the strength of a class name: a module is
judged by what it computes.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from ._normkit import cuda_device_count

# Output dtype rules a normkit module can follow. Hugging Face RMSNorms
# compute in float32 and differ in the dtype they hand back: Llama-style
# ``weight * x_hat.to(input_dtype)`` promotes to the wider of the input and
# the weight, Gemma's ``(...).type_as(x)`` keeps the input's, T5's
# ``weight * x_hat.to(weight.dtype)`` takes the weight's (for float32 and
# 16-bit inputs); torch's own norms keep the input's.
OUTPUT_DTYPE_RULES: Dict[str, Callable[[torch.dtype, torch.dtype], torch.dtype]] = {
    "input": lambda x, w: x,
    "promote": torch.promote_types,
    "weight": lambda x, w: w,
}

# Unit roundoff (half an ulp of 1) of each dtype a probe runs in.
_UNIT_ROUNDOFF = {
    torch.float64: 2.0**-53,
    torch.float32: 2.0**-24,
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
}

# (input dtype, parameter dtype) pairs every candidate is probed with: the
# plain ones, and the two mixed ones a model meets (16-bit activations with
# float32 parameters under autocast; float32 inputs to a model cast to
# bfloat16). Together they tell the output dtype rules apart.
PROBE_DTYPES: Tuple[Tuple[torch.dtype, torch.dtype], ...] = (
    (torch.float32, torch.float32),
    (torch.bfloat16, torch.bfloat16),
    (torch.bfloat16, torch.float32),
    (torch.float32, torch.bfloat16),
)

_PROBE_ROWS = 6


@dataclasses.dataclass
class Candidate:
    """A module shaped like a norm: what a normkit module needs to stand in for it."""

    normalized_shape: Tuple[int, ...]
    eps: Optional[float]
    weight: Optional[torch.nn.Parameter]
    bias: Optional[torch.nn.Parameter]


def describe(m: torch.nn.Module) -> Union[Candidate, str]:
    """`m` as a :class:`Candidate`, or the reason it is not one."""
    exact_rms = type(m) is torch.nn.RMSNorm
    if next(m.children(), None) is not None:
        return "has submodules"
    params = dict(m.named_parameters(recurse=False))
    extra = sorted(set(params) - {"weight", "bias"})
    if extra:
        return f"has parameters other than weight and bias: {extra}"
    buffers = [n for n, _ in m.named_buffers(recurse=False)]
    if buffers:
        return f"has buffers {buffers}, which a normkit module would not keep"
    eps = None
    for attr in ("variance_epsilon", "eps"):
        v = getattr(m, attr, None)
        if isinstance(v, (float, int)) and not isinstance(v, bool):
            eps = float(v)
            break
    if eps is None and not exact_rms:  # nn.RMSNorm(eps=None): the dtype's epsilon, as normkit's
        return "no float eps or variance_epsilon attribute"
    w, b = params.get("weight"), params.get("bias")
    ns = getattr(m, "normalized_shape", None)
    if ns is not None:
        ns = tuple(ns)
    elif w is not None:
        if w.dim() != 1:
            return f"weight has shape {tuple(w.shape)}, not (D,)"
        ns = tuple(w.shape)
    else:
        return "neither a weight nor normalized_shape: D is unknown"
    if w is not None and tuple(w.shape) != ns:
        return f"weight has shape {tuple(w.shape)}, expected {ns}"
    if b is not None and (w is None or tuple(b.shape) != ns):
        return "bias without a weight of the same shape"
    for p in (w, b):
        if p is not None and p.dtype not in _UNIT_ROUNDOFF:
            return f"parameters are {p.dtype}; normkit's modules take float32, float64, float16 or bfloat16"
        if p is not None and not _runs_on(p.device):
            n = cuda_device_count()
            where = f"the CPU and CUDA devices 0..{n - 1}" if n else "the CPU (no CUDA device in this build or machine)"
            return f"parameters are on {p.device}; normkit runs on {where}"
    if any(d <= 0 for d in ns) or (eps is not None and not (eps >= 0 and math.isfinite(eps))):
        return f"normalized_shape {ns} or eps {eps} outside what normkit accepts"
    return Candidate(ns, eps, w, b)


def _runs_on(device: torch.device) -> bool:
    if device.type == "cpu":
        return True
    return device.type == "cuda" and (device.index or 0) < cuda_device_count()


def tolerance(dtypes: Sequence[torch.dtype], D: int, rows: int) -> float:
    """The largest difference between two correct implementations, relative to the largest reference element.

    Both compute in float32 (or float64) from the same rounded inputs. Each
    rounds an element at most twice to the coarsest type involved, unit
    roundoff u (Hugging Face's Llama RMSNorm rounds x̂ to the input dtype and
    then the product with the weight; the backward likewise), and sums D
    (statistics, dx's mean term) or rows (dweight) terms in float32, at most
    (D + rows)·u32 relative to the terms' magnitudes (Higham's γ_n). A
    gradient element is a difference of such sums, with no small relative
    error of its own, so differences are measured against the largest
    reference element. Twice one side's bound covers both:
    ``2·(4u + (D + rows)·u32)``.
    """
    u = max(_UNIT_ROUNDOFF[d] for d in dtypes)
    return 2.0 * (4.0 * u + (D + rows) * _UNIT_ROUNDOFF[torch.float32])


def _probe_tensors(ns: Tuple[int, ...], eps: Optional[float]) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """x, dy of shape (2, 3, *ns) and random weight, bias (float64, fixed seed).

    The rows differ in scale and mean so that a wrong formula shows: a row
    with mean 3 separates LayerNorm from RMSNorm, a row whose mean square is
    about eps shows a wrong or misplaced eps, a large row shows overflow.
    """
    D = math.prod(ns)
    g = torch.Generator().manual_seed(0x5EED)
    base = torch.randn(_PROBE_ROWS, D, generator=g, dtype=torch.float64)
    small = math.sqrt(eps) if eps else 1e-3
    scale = torch.tensor([1.0, small, 30.0, 1.0, 1.0, 0.2], dtype=torch.float64)[:, None]
    shift = torch.tensor([0.0, 0.0, 0.0, 3.0, -1.0, 0.0], dtype=torch.float64)[:, None]
    x = (base * scale + shift).reshape(2, 3, *ns)
    dy = torch.randn(x.shape, generator=g, dtype=torch.float64)
    w = 1.0 + 0.5 * torch.randn(ns, generator=g, dtype=torch.float64)
    b = 0.5 * torch.randn(ns, generator=g, dtype=torch.float64)
    return x, dy, w, b


def _run(module: torch.nn.Module, x: Tensor, dy: Tensor, params: dict) -> Tuple[Tensor, List[Tensor]]:
    """Forward and backward of `module` with `params` in place of its own (left untouched)."""
    x = x.detach().clone().requires_grad_()
    ps = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
    y = torch.func.functional_call(module, ps, (x,))
    if not isinstance(y, Tensor):
        raise TypeError(f"returned {type(y).__name__}, not a tensor")
    grads = torch.autograd.grad(y, [x, *ps.values()], dy.to(y.dtype), allow_unused=True)
    return y.detach(), [g if g is not None else torch.zeros_like(p) for g, p in zip(grads, [x, *ps.values()])]


def _rel_err(got: Tensor, want: Tensor) -> float:
    want64, got64 = want.double(), got.double()
    if not (torch.isfinite(want64).all() and torch.isfinite(got64).all()):
        return math.inf
    scale = want64.abs().max().item() if want64.numel() else 0.0
    return (got64 - want64).abs().max().item() / max(scale, torch.finfo(torch.float32).tiny) if got64.numel() else 0.0


def _kinds(m: torch.nn.Module, cand: Candidate) -> List[Tuple[str, float]]:
    if type(m) is torch.nn.LayerNorm:
        return [("layer_norm", 0.0)]
    if type(m) is torch.nn.RMSNorm:
        return [("rms_norm", 0.0)]
    if cand.bias is not None:
        return [("layer_norm", 0.0)]
    if cand.weight is not None:
        return [("rms_norm", 0.0), ("rms_norm", 1.0), ("layer_norm", 0.0)]
    return [("rms_norm", 0.0), ("layer_norm", 0.0)]


def match(
    m: torch.nn.Module,
    cand: Candidate,
    build: Callable[[str, float, str], torch.nn.Module],
    normkit_dtype_rules: Optional[Sequence[str]] = None,
) -> Tuple[Optional[torch.nn.Module], str, float]:
    """The first normkit module `build(kind, weight_offset, rule)` that matches `m`, why, and its margin.

    The margin is the largest difference on the probes as a fraction of the
    tolerance. Without a match: None, why not, NaN.

    `normkit_dtype_rules` limits the output dtype rules (and so the probe
    dtypes) to what the built module implements; None means all of
    ``OUTPUT_DTYPE_RULES``.
    """
    rules = list(normkit_dtype_rules or OUTPUT_DTYPE_RULES)
    # The probes run where the parameters are (a module without any runs
    # anywhere: the CPU).
    device = next((p.device for p in (cand.weight, cand.bias) if p is not None), torch.device("cpu"))
    x64, dy64, w64, b64 = (t.to(device) for t in _probe_tensors(cand.normalized_shape, cand.eps))
    D = math.prod(cand.normalized_shape)

    def params(p_dtype: torch.dtype) -> dict:
        out = {}
        if cand.weight is not None:
            out["weight"] = w64.to(p_dtype)
        if cand.bias is not None:
            out["bias"] = b64.to(p_dtype)
        return out

    # Probes: the dtype pairs, with random parameters, and the module's own
    # parameters at its own dtype. With only "input" allowed, a 16-bit weight
    # with a float32 input is left out: torch's own modules and normkit's
    # plain ones take weights in the input's dtype or float32.
    own_dtype = cand.weight.dtype if cand.weight is not None else torch.float32
    probes = [(xd, pd, params(pd)) for xd, pd in PROBE_DTYPES if rules != ["input"] or pd in (xd, torch.float32)]
    own = {k: v for k, v in (("weight", cand.weight), ("bias", cand.bias)) if v is not None}
    probes.append((own_dtype, own_dtype, own))

    # Grad mode on and autocast off whatever the caller's context; warnings the
    # module gives on a mixed-dtype probe are about the probe, not the model.
    with torch.enable_grad(), torch.autocast(device.type, enabled=False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ran, errors = [], []
        for xd, pd, ps in probes:
            try:
                ran.append((xd, pd, ps, _run(m, x64.to(xd), dy64, ps)))
            except Exception as e:  # noqa: BLE001 - a probe the module itself refuses is no evidence
                errors.append(f"{type(e).__name__}: {e}")
        if not ran:
            return None, f"raised on every probe input ({errors[0]})", math.nan

        has_w = cand.weight is not None
        seen = {(xd, pd): ref[0].dtype for xd, pd, _, ref in ran}
        consistent = [
            r for r in rules if all(OUTPUT_DTYPE_RULES[r](xd, pd if has_w else xd) == yd for (xd, pd), yd in seen.items())
        ]
        if not consistent:
            pairs = ", ".join(f"({_short(xd)}, {_short(pd)}) -> {_short(yd)}" for (xd, pd), yd in seen.items())
            return None, f"output dtype (input, weight -> output: {pairs}) follows none of the rules {rules}", math.nan
        rule = consistent[0]

        misses = []
        for kind, offset in _kinds(m, cand):
            new = build(kind, offset, rule)
            worst, why = 0.0, ""
            for xd, pd, ps, (y_ref, g_ref) in ran:
                try:
                    y, g = _run(new, x64.to(xd), dy64, ps)
                except Exception as e:  # noqa: BLE001
                    why = f"raised {type(e).__name__} on ({_short(xd)}, {_short(pd)})"
                    break
                if y.dtype != y_ref.dtype:
                    why = f"output {_short(y.dtype)}, expected {_short(y_ref.dtype)}"
                    break
                tol = tolerance({xd, pd, y.dtype}, D, _PROBE_ROWS)
                names = ["output", "grad input"] + [f"grad {k}" for k in ps]
                for name, got, want in zip(names, [y, *g], [y_ref, *g_ref]):
                    ratio = _rel_err(got, want) / tol
                    if ratio > worst:
                        worst = ratio
                        if ratio > 1.0:
                            why = f"{name} off by {ratio * tol:.2g} of its largest element on ({_short(xd)}, {_short(pd)}), tolerance {tol:.2g}"
                if why:
                    break
            label = f"{kind}" + (f"(weight_offset={offset:g})" if kind == "rms_norm" else "")
            if not why:
                return new, f"matches {label}, output dtype '{rule}', on {len(ran)} probes", worst
            misses.append(f"{label}: {why}")
    return None, "no normkit module matches: " + "; ".join(misses), math.nan


def _short(d: torch.dtype) -> str:
    return str(d).replace("torch.", "").replace("float", "f")
