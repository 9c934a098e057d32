"""An fp64 NumPy oracle for the tests, and the error bounds they assert.

The oracle is the textbook two-pass formula in float64 on the inputs as
stored (16-bit values widen exactly), like src/reference. The bounds are the
ones include/normkit/ops.hpp states, with

    u_out  unit roundoff of the output dtype (f32 2^-24, f64 2^-53,
           f16 2^-11, bf16 2^-8)
    u_acc  unit roundoff of the accumulation type (f64 for f64 inputs,
           else f32)
    e      = 4 (sqrt(n) + 2) u_acc, the contract's budget for a sum of n
           terms computed in the accumulation type

Forward (the header's bound, element by element):
    |y - y_exact| <= u_out |y_exact| + e_D (|g| (|xhat| + rstd mu_|x|) + |b|) + tiny_out

Backward, derived the same way. With X = |xhat| + rstd mu_|x| (the forward's
budget for the error of the kernel's xhat, in units of e_D) and
g = gain * dy, dx = rstd (g - mean(g) - xhat mean(g xhat)) picks up
    * e_D |dx|                               from the kernel's rstd,
    * e_D rstd |g|                           from forming g and the difference,
    * e_D rstd mean|g|                       from the row sum of g,
    * e_D rstd |xhat| mean(|g| X)            from the row sum of g xhat
                                             (its terms' own error included),
    * e_D rstd X |mean(g xhat)|              from the error of xhat itself,
so |dx - dx_exact| <= u_out |dx_exact| + e_D (|dx_exact| + rstd (|g| + mean|g|
    + |xhat| mean(|g| X) + X |mean(g xhat)|)) + tiny_out.
Parameter gradients are sums over rows:
    |dw - dw_exact| <= u_out |dw_exact| + e_rows sum|dy xhat| + e_D sum(|dy| X) + tiny
    |db - db_exact| <= u_out |db_exact| + e_rows sum|dy| + tiny
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import numpy as np

UNIT_ROUNDOFF = {"float32": 2.0**-24, "float64": 2.0**-53, "float16": 2.0**-11, "bfloat16": 2.0**-8}
# Smallest positive subnormal of each output dtype.
TINY = {"float32": 2.0**-149, "float64": 2.0**-1074, "float16": 2.0**-24, "bfloat16": 2.0**-133}


def dtype_name(dt) -> str:
    s = str(dt)
    return s[len("torch.") :] if s.startswith("torch.") else s


def u_acc(x_dtype) -> float:
    return 2.0**-53 if dtype_name(x_dtype) == "float64" else 2.0**-24


def budget(n: int, x_dtype) -> float:
    return 4.0 * (math.sqrt(n) + 2.0) * u_acc(x_dtype)


def f64(a) -> np.ndarray:
    """Any array (NumPy of any dtype incl. bfloat16, or a torch tensor) as float64."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().double().numpy()
    return np.asarray(a).astype(np.float64)


@dataclass
class Forward:
    y: np.ndarray  # (rows, D)
    mean: np.ndarray  # (rows)
    rstd: np.ndarray  # (rows)
    xhat: np.ndarray  # (rows, D)
    gain: np.ndarray  # (D)
    bias: np.ndarray  # (D)
    mu_abs: np.ndarray  # (rows), mean |x|


def forward(x2, weight, bias, eps, *, rms: bool, weight_offset: float = 0.0) -> Forward:
    """x2: (rows, D) float64 values of the stored input."""
    rows, D = x2.shape
    mean = np.zeros(rows) if rms else x2.mean(axis=1)
    c = x2 - mean[:, None]
    var = (c * c).mean(axis=1)
    with np.errstate(divide="ignore"):
        rstd = 1.0 / np.sqrt(var + eps)
    xhat = c * rstd[:, None]
    gain = np.ones(D) if weight is None else f64(weight).reshape(D) + weight_offset
    b = np.zeros(D) if bias is None else f64(bias).reshape(D)
    y = xhat * gain + b
    return Forward(y, mean, rstd, xhat, gain, b, np.abs(x2).mean(axis=1))


def forward_tolerance(ref: Forward, out_dtype, x_dtype) -> np.ndarray:
    D = ref.y.shape[1]
    n = dtype_name(out_dtype)
    X = np.abs(ref.xhat) + (ref.rstd * ref.mu_abs)[:, None]
    return (
        UNIT_ROUNDOFF[n] * np.abs(ref.y)
        + budget(D, x_dtype) * (np.abs(ref.gain) * X + np.abs(ref.bias))
        + TINY[n]
    )


@dataclass
class Backward:
    dx: np.ndarray
    dw: np.ndarray
    db: np.ndarray
    tol_dx: np.ndarray
    tol_dw: np.ndarray
    tol_db: np.ndarray


def backward(dy2, fwd: Forward, *, rms: bool, x_dtype, dx_dtype, w_dtype) -> Backward:
    """Exact gradients at the stored inputs, and the bounds above."""
    rows, D = dy2.shape
    g = dy2 * fwd.gain
    mg = np.zeros(rows) if rms else g.mean(axis=1)
    mgx = (g * fwd.xhat).mean(axis=1)
    dx = fwd.rstd[:, None] * (g - mg[:, None] - fwd.xhat * mgx[:, None])
    dw = (dy2 * fwd.xhat).sum(axis=0)
    db = dy2.sum(axis=0)

    eD, eR = budget(D, x_dtype), budget(max(rows, 1), x_dtype)
    X = np.abs(fwd.xhat) + (fwd.rstd * fwd.mu_abs)[:, None]
    mean_abs_g = np.abs(g).mean(axis=1)
    mean_gX = (np.abs(g) * X).mean(axis=1)
    nx, nw = dtype_name(dx_dtype), dtype_name(w_dtype)
    tol_dx = (
        UNIT_ROUNDOFF[nx] * np.abs(dx)
        + eD
        * (
            np.abs(dx)
            + fwd.rstd[:, None]
            * (np.abs(g) + mean_abs_g[:, None] + np.abs(fwd.xhat) * mean_gX[:, None] + X * np.abs(mgx)[:, None])
        )
        + TINY[nx]
    )
    tol_dw = (
        UNIT_ROUNDOFF[nw] * np.abs(dw)
        + eR * np.abs(dy2 * fwd.xhat).sum(axis=0)
        + eD * (np.abs(dy2) * X).sum(axis=0)
        + TINY[nw]
    )
    tol_db = UNIT_ROUNDOFF[nw] * np.abs(db) + eR * np.abs(dy2).sum(axis=0) + TINY[nw]
    return Backward(dx, dw, db, tol_dx, tol_dw, tol_db)


def assert_within(name: str, got, want: np.ndarray, tol: np.ndarray) -> None:
    """Assert |got - want| <= tol elementwise; on failure name the worst element."""
    got = f64(got).reshape(want.shape)
    err = np.abs(got - want)
    bad = ~(err <= tol)  # NaN in got counts as bad
    if bad.any():
        ratio = np.where(bad, np.nan_to_num(err / np.maximum(tol, 1e-300), nan=np.inf), 0)
        i = np.unravel_index(np.argmax(ratio), ratio.shape)
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {bad.size} elements out of bound; worst at {tuple(int(k) for k in i)}: "
            f"got {got[i]!r}, exact {want[i]!r}, |err| {err[i]:.3e} > bound {tol[i]:.3e} "
            f"({ratio[i]:.2f}x the budget)"
        )


def rows_view(a: np.ndarray, k: int) -> np.ndarray:
    """(rows, D) float64 copy of an array whose trailing k dims are normalized."""
    a = f64(a)
    lead = a.shape[: a.ndim - k]
    return a.reshape(int(np.prod(lead, dtype=np.int64)), int(np.prod(a.shape[a.ndim - k :], dtype=np.int64)))

