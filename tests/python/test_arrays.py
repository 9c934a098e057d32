"""The array API on NumPy arrays against the fp64 oracle, with generated shapes,
dtypes, layouts and options; plus zero-copy and error behaviour."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import normkit
import reference as ref

DTYPES = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}
SENTINEL = 1536.0  # exact in every dtype; written to padding and to outputs that must stay untouched


def strided(buf: np.ndarray, lead: Tuple[int, ...], norm: Tuple[int, ...], row_stride: int) -> np.ndarray:
    """A view of `buf` with shape lead + norm whose rows are `row_stride` elements apart."""
    item = buf.itemsize
    inner, s = [], item
    for d in reversed(norm):
        inner.insert(0, s)
        s *= d
    outer, s = [], row_stride * item
    for d in reversed(lead):
        outer.insert(0, s)
        s *= max(d, 1)
    return np.lib.stride_tricks.as_strided(buf, shape=lead + norm, strides=tuple(outer + inner))


@dataclass
class Case:
    dtype: str
    lead: Tuple[int, ...]
    norm: Tuple[int, ...]
    weight: str  # "none", "same" (x's dtype) or "float32"
    bias: bool
    layout: str  # "contiguous", "padded", "every_other_row"
    eps: float
    scale: float
    shift: float
    seed: int

    @property
    def rows(self) -> int:
        return math.prod(self.lead)

    @property
    def D(self) -> int:
        return math.prod(self.norm)

    def array(self, rng, dtype: Optional[str] = None, shift: Optional[float] = None) -> np.ndarray:
        """An activation of this case's shape and layout (see `buffer`)."""
        return self.buffer(rng, dtype, shift)[0]

    def buffer(self, rng, dtype: Optional[str] = None, shift: Optional[float] = None):
        """(view, buffer): an activation of this case's shape and layout, and the
        flat buffer under it, whose elements outside the view are SENTINEL."""
        dt = DTYPES[dtype or self.dtype]
        row_stride = row_stride_of(self)
        buf = np.full(max(self.rows, 1) * row_stride, SENTINEL, dtype=dt)
        a = strided(buf, self.lead, self.norm, row_stride)
        vals = rng.standard_normal(self.lead + self.norm) * self.scale + (self.shift if shift is None else shift)
        a[...] = vals.astype(dt)
        return a, buf

    def params(self, rng) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
        wdt = DTYPES["float32" if self.weight == "float32" else self.dtype]
        w = None if self.weight == "none" else (1 + 0.5 * rng.standard_normal(self.norm)).astype(wdt)
        b = None if not self.bias else (0.5 * rng.standard_normal(self.norm)).astype(wdt)
        return w, b


@st.composite
def cases(draw) -> Case:
    dtype = draw(st.sampled_from(list(DTYPES)))
    k = draw(st.integers(1, 2))
    widths = [1, 2, 3, 7, 16, 33, 111, 256]
    norm = (draw(st.sampled_from(widths)),) + ((draw(st.sampled_from(widths[:5])),) if k == 2 else ())
    lead = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    weight = draw(st.sampled_from(["none", "same", "float32"] if dtype in ("float16", "bfloat16") else ["none", "same"]))
    return Case(
        dtype=dtype,
        lead=lead,
        norm=norm,
        weight=weight,
        bias=draw(st.booleans()),
        layout=draw(st.sampled_from(["contiguous", "padded", "every_other_row"])),
        eps=draw(st.sampled_from([1e-5, 1e-6, 0.1])),
        scale=draw(st.sampled_from([1e-3, 1.0, 100.0])),
        shift=draw(st.sampled_from([0.0, 3.0])),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


def row_stride_of(case: Case) -> int:
    return {"contiguous": case.D, "padded": case.D + 3, "every_other_row": 2 * case.D}[case.layout]


def assert_padding_untouched(buf: np.ndarray, case: Case) -> None:
    """Every element of `buf` outside the case's (rows, D) view is still SENTINEL."""
    rs = row_stride_of(case)
    inside = (np.arange(case.rows)[:, None] * rs + np.arange(case.D)[None, :]).reshape(-1)
    outside = np.ones(buf.size, bool)
    outside[inside] = False
    assert np.all(ref.f64(buf[outside]) == SENTINEL), "an element outside the view was written"


@given(cases(), st.booleans(), st.booleans())
def test_forward_matches_fp64_oracle(case: Case, rms: bool, in_place: bool) -> None:
    rng = np.random.default_rng(case.seed)
    x, xbuf = case.buffer(rng)
    w, b = case.params(rng)
    x2 = ref.rows_view(x, len(case.norm))
    out, obuf = (x, xbuf) if in_place else case.buffer(rng)  # out in the same padded/strided layout
    if rms:
        y, rstd = normkit.rms_norm(x, case.norm, w, case.eps, out=out, return_stats=True)
        want = ref.forward(x2, w, None, case.eps, rms=True)
    else:
        y, mean, rstd = normkit.layer_norm(x, case.norm, w, b, case.eps, out=out, return_stats=True)
        want = ref.forward(x2, w, b, case.eps, rms=False)
    assert y is out
    assert y.dtype == x.dtype and y.shape == x.shape
    ref.assert_within("y", ref.rows_view(y, len(case.norm)), want.y, ref.forward_tolerance(want, x.dtype, x.dtype))
    assert_padding_untouched(obuf, case)

    # Statistics: rstd relative error within e_D (1 + (rstd mu_|x|)^2), which
    # covers a one-pass variance's cancellation as well as a two-pass one.
    stat_dtype = np.float64 if case.dtype == "float64" else np.float32
    assert rstd.dtype == stat_dtype and rstd.shape == case.lead
    e = ref.budget(case.D, x.dtype)
    tol = e * want.rstd * (1 + (want.rstd * want.mu_abs) ** 2)
    ref.assert_within("rstd", rstd.reshape(-1), want.rstd, tol)
    if not rms:
        ref.assert_within("mean", mean.reshape(-1), want.mean, e * want.mu_abs + ref.TINY["float32"])


@given(cases(), st.booleans())
def test_backward_matches_fp64_oracle(case: Case, rms: bool) -> None:
    rng = np.random.default_rng(case.seed)
    x = case.array(rng)
    dy = case.array(rng, shift=0.0)
    w, b = case.params(rng)
    k = len(case.norm)
    x2, dy2 = ref.rows_view(x, k), ref.rows_view(dy, k)
    if rms:
        _, rstd = normkit.rms_norm(x, case.norm, w, case.eps, return_stats=True)
        dx, dw = normkit.rms_norm_backward(dy, x, case.norm, rstd, w)
        db = None
    else:
        _, mean, rstd = normkit.layer_norm(x, case.norm, w, b, case.eps, return_stats=True)
        dx, dw, db = normkit.layer_norm_backward(dy, x, case.norm, mean, rstd, w)
    fwd = ref.forward(x2, w, None if rms else b, case.eps, rms=rms)
    w_dtype = w.dtype if w is not None else x.dtype
    want = ref.backward(dy2, fwd, rms=rms, x_dtype=x.dtype, dx_dtype=x.dtype, w_dtype=w_dtype)
    assert dx.dtype == x.dtype and dx.shape == x.shape
    ref.assert_within("dx", ref.rows_view(dx, k), want.dx, want.tol_dx)
    if w is None:
        assert dw is None and db is None
    else:
        assert dw.dtype == w.dtype and dw.shape == w.shape
        ref.assert_within("dweight", dw.reshape(-1), want.dw, want.tol_dw)
        if not rms:
            ref.assert_within("dbias", db.reshape(-1), want.db, want.tol_db)


@given(cases(), st.booleans(), st.booleans())
def test_fused_add_matches_fp64_oracle(case: Case, rms: bool, f32_residual: bool) -> None:
    rng = np.random.default_rng(case.seed)
    x = case.array(rng)
    res_dtype = "float32" if (f32_residual and case.dtype in ("float16", "bfloat16")) else case.dtype
    res = case.array(rng, dtype=res_dtype)
    w, b = case.params(rng)
    k = len(case.norm)
    if rms:
        y, h, rstd = normkit.add_rms_norm(x, res, case.norm, w, case.eps, return_stats=True)
    else:
        y, h, mean, rstd = normkit.add_layer_norm(x, res, case.norm, w, b, case.eps, return_stats=True)
    assert h.dtype == res.dtype and y.dtype == x.dtype
    # h is the sum rounded to h's dtype; a kernel that adds in the
    # accumulation type first may round twice: u_h + u_acc.
    s = ref.rows_view(x, k) + ref.rows_view(res, k)
    hn = ref.dtype_name(h.dtype)
    h2 = ref.rows_view(h, k)
    ref.assert_within("h", h2, s, (ref.UNIT_ROUNDOFF[hn] + ref.u_acc(x.dtype)) * np.abs(s) + ref.TINY[hn])
    # y is the norm of h as stored.
    want = ref.forward(h2, w, None if rms else b, case.eps, rms=rms)
    ref.assert_within("y", ref.rows_view(y, k), want.y, ref.forward_tolerance(want, x.dtype, x.dtype))

    # Backward: dh = norm_backward(dy) + dh_out.
    dy = case.array(rng, shift=0.0)
    dh_out = case.array(rng, dtype=res_dtype, shift=0.0)
    if rms:
        dh, dw = normkit.add_rms_norm_backward(dy, dh_out, h, case.norm, rstd, w)
    else:
        dh, dw, db = normkit.add_layer_norm_backward(dy, dh_out, h, case.norm, mean, rstd, w)
    w_dtype = w.dtype if w is not None else x.dtype
    g = ref.backward(ref.rows_view(dy, k), want, rms=rms, x_dtype=x.dtype, dx_dtype=h.dtype, w_dtype=w_dtype)
    # dh = dh_out + rstd (g - mean(g) - xhat mean(g xhat)): besides dx's own
    # error, each of the (up to 3) operations that add a term to dh_out
    # rounds at dh_out's magnitude, then the result rounds to h's dtype.
    d_out = ref.rows_view(dh_out, k)
    tol = g.tol_dx + (ref.UNIT_ROUNDOFF[hn] + 3 * ref.u_acc(x.dtype)) * np.abs(d_out)
    ref.assert_within("dh", ref.rows_view(dh, k), g.dx + d_out, tol)
    if w is not None:
        ref.assert_within("dweight", dw.reshape(-1), g.dw, g.tol_dw)


def test_worked_example_from_the_texts() -> None:
    # LN(1, 2, 3) = (-1, 0, 1)/sqrt(2/3); RMS(1, 2, 3) = sqrt(14/3).
    x = np.array([[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(normkit.layer_norm(x, 3, eps=0.0), [[-math.sqrt(1.5), 0.0, math.sqrt(1.5)]], rtol=1e-15)
    np.testing.assert_allclose(normkit.rms_norm(x, 3, eps=0.0), x / math.sqrt(14 / 3), rtol=1e-15)


def test_float16_statistics_do_not_overflow() -> None:
    # 4000^2 overflows float16 (max 65504); statistics in f32 do not.
    x = np.array([[1000, 2000, 3000, 4000]], np.float16)
    y = normkit.rms_norm(x, 4, eps=1e-6)
    exact = np.array([1000, 2000, 3000, 4000]) / math.sqrt(7.5e6)
    np.testing.assert_allclose(y[0].astype(np.float64), exact, rtol=2.0**-11)


def test_weight_offset_is_a_gain_of_one_plus_weight() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    w = (0.1 * rng.standard_normal(64)).astype(np.float32)
    a = normkit.rms_norm(x, 64, w, 1e-6, weight_offset=1.0)
    b = normkit.rms_norm(x, 64, (1 + w.astype(np.float64)).astype(np.float32), 1e-6)
    np.testing.assert_allclose(a, b, rtol=4e-7, atol=1e-7)


def test_default_rms_eps_follows_pytorch() -> None:
    assert normkit.default_rms_eps(np.float64) == np.finfo(np.float64).eps
    for dt in (np.float32, np.float16, ml_dtypes.bfloat16):
        assert normkit.default_rms_eps(np.dtype(dt)) == np.finfo(np.float32).eps
    # The value is used: a tiny row is scaled by 1/sqrt(mean(x^2) + eps).
    x = np.full((1, 8), 1e-4, np.float32)
    got = normkit.rms_norm(x, 8)
    np.testing.assert_allclose(got, x / np.sqrt(1e-8 + np.finfo(np.float32).eps), rtol=1e-5)


# --- zero-copy -------------------------------------------------------------


def test_out_is_written_in_place_and_returned() -> None:
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    out = np.empty_like(x)
    y = normkit.layer_norm(x, 32, out=out)
    assert y is out


def test_input_is_read_in_place_through_its_strides() -> None:
    # In-place on a strided view of a larger buffer: correct values in the
    # view and nothing written outside it proves the kernel worked on the
    # caller's memory (a copy in between could not produce both).
    rng = np.random.default_rng(2)
    buf = rng.standard_normal((6, 40)).astype(np.float32)
    before = buf.copy()
    view = buf[::2, 4:36]
    want = normkit.rms_norm(np.ascontiguousarray(view), 32, eps=1e-6)
    got = normkit.rms_norm(view, 32, eps=1e-6, out=view)
    assert np.shares_memory(got, buf)
    np.testing.assert_array_equal(buf[::2, 4:36], want)
    untouched = np.ones(buf.shape, bool)
    untouched[::2, 4:36] = False
    np.testing.assert_array_equal(buf[untouched], before[untouched])


def test_bfloat16_numpy_arrays_are_not_copied() -> None:
    x = np.random.default_rng(3).standard_normal((3, 16)).astype(ml_dtypes.bfloat16)
    y = normkit.rms_norm(x, 16, out=x)
    assert y is x and x.dtype == ml_dtypes.bfloat16


def test_other_dlpack_producers_are_accepted() -> None:
    class Producer:  # exposes only the DLPack protocol of an underlying array
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.random.default_rng(4).standard_normal((2, 8))
    np.testing.assert_array_equal(normkit.rms_norm(Producer(a), 8, eps=1e-6), normkit.rms_norm(a, 8, eps=1e-6))


def test_empty_rows_are_a_no_op() -> None:
    x = np.empty((0, 16), np.float32)
    assert normkit.layer_norm(x, 16).shape == (0, 16)
    x = np.empty((2, 0, 16), np.float32)
    assert normkit.rms_norm(x, 16).shape == (2, 0, 16)


# --- errors: clear Python exceptions, outputs untouched --------------------


def _outputs_untouched(fn, *outs) -> None:
    for o in outs:
        o[...] = SENTINEL
    fn()
    for o in outs:
        assert np.all(ref.f64(o) == SENTINEL), "an output was written before the error"


BAD_CALLS = [
    # (description, call(x, out), exception, message fragment)
    ("list input", lambda x, o: normkit.rms_norm([[1.0, 2.0]], 2, out=o), TypeError, "must be an array"),
    ("int dtype", lambda x, o: normkit.rms_norm(x.astype(np.int32), 8, out=o), TypeError, "dtype int32"),
    ("complex dtype", lambda x, o: normkit.layer_norm(x.astype(np.complex64), 8, out=o), TypeError, "complex64"),
    ("shape mismatch", lambda x, o: normkit.rms_norm(x, 7, out=o), ValueError, "normalized_shape (7,)"),
    ("bad normalized_shape", lambda x, o: normkit.rms_norm(x, "8", out=o), TypeError, "normalized_shape"),
    ("weight size", lambda x, o: normkit.layer_norm(x, 8, np.ones(7, np.float32), out=o), ValueError, "weight"),
    ("weight dtype", lambda x, o: normkit.layer_norm(x, 8, np.ones(8, np.float64), out=o), TypeError, "weight"),
    ("negative eps", lambda x, o: normkit.layer_norm(x, 8, eps=-1.0, out=o), ValueError, "eps"),
    ("nan eps", lambda x, o: normkit.rms_norm(x, 8, eps=float("nan"), out=o), ValueError, "eps"),
    ("eps type", lambda x, o: normkit.rms_norm(x, 8, eps="small", out=o), TypeError, "eps"),
    ("out shape", lambda x, o: normkit.rms_norm(x, 8, out=np.zeros((4, 8), np.float32)), ValueError, "out"),
    ("out dtype", lambda x, o: normkit.rms_norm(x, 8, out=np.zeros((3, 8), np.float64)), TypeError, ""),
    ("transposed", lambda x, o: normkit.rms_norm(np.ones((8, 3), np.float32).T, 8, out=o), ValueError, "contiguous"),
    ("offset without weight", lambda x, o: normkit.rms_norm(x, 8, weight_offset=1.0, out=o), ValueError, "weight"),
    ("residual shape", lambda x, o: normkit.add_rms_norm(x, x[:2], 8, out=o), ValueError, "residual"),
]


@pytest.mark.parametrize("desc,call,exc,frag", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments_raise_clear_errors(desc, call, exc, frag) -> None:
    x = np.random.default_rng(5).standard_normal((3, 8)).astype(np.float32)
    out = np.empty((3, 8), np.float32)

    def run():
        with pytest.raises(exc) as info:
            call(x, out)
        msg = str(info.value)
        assert frag in msg, msg
        assert msg.split(":")[0] in ("rms_norm", "layer_norm", "add_rms_norm", "add_layer_norm"), msg

    _outputs_untouched(run, out)


def test_overlapping_output_is_refused_before_writing() -> None:
    buf = np.random.default_rng(6).standard_normal(40).astype(np.float32)
    before = buf.copy()
    x = buf[:32].reshape(4, 8)
    y = buf[4:36].reshape(4, 8)  # overlaps x, but is not x
    with pytest.raises(ValueError):
        normkit.rms_norm(x, 8, out=y)
    np.testing.assert_array_equal(buf, before)


def test_read_only_output_is_refused() -> None:
    x = np.ones((2, 8), np.float32)
    out = np.zeros((2, 8), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        normkit.rms_norm(x, 8, out=out)
    assert np.all(out == 0)


def test_read_only_input_is_accepted() -> None:
    x = np.ones((2, 8), np.float32)
    x.flags.writeable = False
    assert normkit.rms_norm(x, 8).shape == (2, 8)


def test_threads_setting_round_trips() -> None:
    old = normkit.get_num_threads()
    try:
        normkit.set_num_threads(1)
        assert normkit.get_num_threads() == 1
    finally:
        normkit.set_num_threads(0)
    assert normkit.get_num_threads() == old
