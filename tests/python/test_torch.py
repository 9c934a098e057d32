"""normkit on PyTorch tensors: against torch.nn.functional and the fp64 oracle,
autograd (gradcheck), the custom operators (opcheck), modules, state_dict
compatibility, zero-copy and errors."""

from __future__ import annotations

import inspect
import math
import threading
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import normkit
import normkit.torch as nkt
import reference as ref

TORCH_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def make(shape, dtype, *, scale=1.0, shift=0.0, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    t = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + shift).to(dtype)
    return t.requires_grad_(requires_grad)


@st.composite
def torch_cases(draw):
    dtype = draw(st.sampled_from(TORCH_DTYPES))
    k = draw(st.integers(1, 2))
    norm = tuple(draw(st.lists(st.sampled_from([1, 3, 8, 33, 128]), min_size=k, max_size=k)))
    lead = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=2)))
    w_dtype = draw(st.sampled_from([dtype, torch.float32] if dtype in (torch.float16, torch.bfloat16) else [dtype]))
    return dict(
        dtype=dtype,
        norm=norm,
        lead=lead,
        w_dtype=w_dtype,
        affine=draw(st.booleans()),
        eps=draw(st.sampled_from([1e-5, 1e-6, None])),
        scale=draw(st.sampled_from([1e-3, 1.0, 30.0])),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def _bound(y_ref_fwd, dtype):
    return ref.forward_tolerance(y_ref_fwd, dtype, dtype)


@given(torch_cases(), st.booleans())
def test_forward_agrees_with_torch_functional(c, rms) -> None:
    x = make(c["lead"] + c["norm"], c["dtype"], scale=c["scale"], shift=0.5, seed=c["seed"])
    w = make(c["norm"], c["w_dtype"], shift=1.0, seed=c["seed"] + 1) if c["affine"] else None
    b = make(c["norm"], c["w_dtype"], seed=c["seed"] + 2) if (c["affine"] and not rms) else None
    k = len(c["norm"])
    if rms:
        got = normkit.rms_norm(x, c["norm"], w, c["eps"])
        want_t = F.rms_norm(x, c["norm"], w, c["eps"])
        eps = c["eps"] if c["eps"] is not None else torch.finfo(torch.float64 if c["dtype"] == torch.float64 else torch.float32).eps
        oracle = ref.forward(ref.rows_view(x, k), w, None, eps, rms=True)
    else:
        eps = c["eps"] if c["eps"] is not None else 1e-5
        got = normkit.layer_norm(x, c["norm"], w, b, eps)
        want_t = F.layer_norm(x, c["norm"], w, b, eps)
        oracle = ref.forward(ref.rows_view(x, k), w, b, eps, rms=False)
    assert got.dtype == want_t.dtype == x.dtype and got.shape == x.shape
    tol = _bound(oracle, x.dtype)
    ref.assert_within("normkit vs fp64", ref.rows_view(got, k), oracle.y, tol)
    # PyTorch's own result is held to the same contract; two results each
    # within the bound of the exact value differ by at most twice the bound.
    ref.assert_within("normkit vs torch", ref.rows_view(got, k), ref.rows_view(want_t, k), 2 * tol)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_rms_eps_none_matches_torch(dtype) -> None:
    # Rows of 1e-4: mean(x^2) = 1e-8 is below float32's eps (1.2e-7), so
    # which eps is used changes the result by a factor ~3.6, not by rounding.
    x = torch.full((2, 16), 1e-4, dtype=dtype)
    got, want = normkit.rms_norm(x, 16), F.rms_norm(x, (16,))
    torch.testing.assert_close(got, want)
    m = nkt.RMSNorm(16, dtype=dtype)
    torch.testing.assert_close(m(x), torch.nn.RMSNorm(16, dtype=dtype)(x))


# --- autograd ----------------------------------------------------------------


def _grads(fn, *tensors):
    out = fn(*tensors)
    outs = out if isinstance(out, tuple) else (out,)
    g = torch.Generator().manual_seed(7)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.dtype)).sum() for o in outs)
    return torch.autograd.grad(loss, [t for t in tensors if t is not None and t.requires_grad])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rms", [False, True])
def test_gradients_agree_with_torch(dtype, rms) -> None:
    shape, D = (3, 5, 96), 96
    x = make(shape, dtype, shift=0.3, seed=1, requires_grad=True)
    w = make((D,), torch.float32 if dtype == torch.bfloat16 else dtype, shift=1.0, seed=2, requires_grad=True)
    b = make((D,), w.dtype, seed=3, requires_grad=True)
    if rms:
        got = _grads(lambda x, w: normkit.rms_norm(x, (D,), w, 1e-6), x, w)
        want = _grads(lambda x, w: F.rms_norm(x, (D,), w, 1e-6), x, w)
    else:
        got = _grads(lambda x, w, b: normkit.layer_norm(x, (D,), w, b), x, w, b)
        want = _grads(lambda x, w, b: F.layer_norm(x, (D,), w, b), x, w, b)
    for name, g, t in zip(("input", "weight", "bias"), got, want):
        assert g.dtype == t.dtype and g.shape == t.shape, name
        # Both are within a few roundings of the output dtype at this size
        # (D = 96, 15 rows): the contract's backward bound evaluated here is
        # below 0.02 relative for bf16 and 1e-5 for f32.
        rtol, atol = (2e-2, 2e-2) if dtype == torch.bfloat16 else (1e-5, 1e-5)
        torch.testing.assert_close(g, t, rtol=rtol, atol=atol, msg=name)


def _gradcheck_inputs(rms, fused, offset=0.0):
    D = 6
    x = make((2, 3, D), torch.float64, shift=0.2, seed=11, requires_grad=True)
    res = make((2, 3, D), torch.float64, seed=12, requires_grad=True)
    w = make((D,), torch.float64, shift=1.0, seed=13, requires_grad=True)
    b = make((D,), torch.float64, seed=14, requires_grad=True)
    return D, x, res, w, b


@pytest.mark.parametrize("route", ["eager", "custom_op"])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "rms_norm_offset", "add_layer_norm", "add_rms_norm"])
def test_gradcheck_float64(op, route) -> None:
    D, x, res, w, b = _gradcheck_inputs(None, None)
    ops = torch.ops.normkit
    fns = {
        ("layer_norm", "eager"): (lambda x, w, b: normkit.layer_norm(x, D, w, b, 1e-5), (x, w, b)),
        ("layer_norm", "custom_op"): (lambda x, w, b: ops.layer_norm(x, [D], w, b, 1e-5)[0], (x, w, b)),
        ("rms_norm", "eager"): (lambda x, w: normkit.rms_norm(x, D, w, 1e-5), (x, w)),
        ("rms_norm", "custom_op"): (lambda x, w: ops.rms_norm(x, [D], w, 1e-5, 0.0)[0], (x, w)),
        ("rms_norm_offset", "eager"): (lambda x, w: normkit.rms_norm(x, D, w, 1e-5, weight_offset=1.0), (x, w)),
        ("rms_norm_offset", "custom_op"): (lambda x, w: ops.rms_norm(x, [D], w, 1e-5, 1.0)[0], (x, w)),
        ("add_layer_norm", "eager"): (lambda x, r, w, b: normkit.add_layer_norm(x, r, D, w, b), (x, res, w, b)),
        ("add_layer_norm", "custom_op"): (
            lambda x, r, w, b: ops.add_layer_norm(x, r, [D], w, b, 1e-5)[:2],
            (x, res, w, b),
        ),
        ("add_rms_norm", "eager"): (lambda x, r, w: normkit.add_rms_norm(x, r, D, w, 1e-5), (x, res, w)),
        ("add_rms_norm", "custom_op"): (lambda x, r, w: ops.add_rms_norm(x, r, [D], w, 1e-5, 0.0)[:2], (x, res, w)),
    }
    fn, args = fns[(op, route)]
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_backward_with_an_expanded_gradient() -> None:
    # y.sum().backward() hands the backward a broadcast (stride-0) gradient.
    x = make((4, 32), torch.float32, seed=3, requires_grad=True)
    normkit.rms_norm(x, 32).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    F.rms_norm(x2, (32,)).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn", ["layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"])
def test_double_backward_is_refused(fn) -> None:
    x = make((2, 8), torch.float64, seed=4, requires_grad=True)
    args = (x, x.detach().clone()) if fn.startswith("add") else (x,)
    out = getattr(normkit, fn)(*args, 8)
    y = out[0] if isinstance(out, tuple) else out
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(y.square().sum(), x, create_graph=True)


def test_eager_and_custom_op_routes_agree_bitwise() -> None:
    D = 200
    x = make((3, 7, D), torch.bfloat16, shift=0.1, seed=5, requires_grad=True)
    res = make((3, 7, D), torch.float32, seed=6, requires_grad=True)
    w = make((D,), torch.float32, shift=1.0, seed=7, requires_grad=True)
    b = make((D,), torch.float32, seed=8, requires_grad=True)
    ops = torch.ops.normkit
    pairs = [
        (lambda: normkit.layer_norm(x, D, w, b), lambda: ops.layer_norm(x, [D], w, b, 1e-5)[0], (x, w, b)),
        (lambda: normkit.rms_norm(x, D, w, 1e-6), lambda: ops.rms_norm(x, [D], w, 1e-6, 0.0)[0], (x, w)),
        (lambda: normkit.add_layer_norm(x, res, D, w, b), lambda: ops.add_layer_norm(x, res, [D], w, b, 1e-5)[:2], (x, res, w, b)),
        (lambda: normkit.add_rms_norm(x, res, D, w, 1e-6), lambda: ops.add_rms_norm(x, res, [D], w, 1e-6, 0.0)[:2], (x, res, w)),
    ]
    for eager, op, leaves in pairs:
        ge, go = _grads(lambda *_: eager(), *leaves), _grads(lambda *_: op(), *leaves)
        ye, yo = eager(), op()
        ye, yo = (ye if isinstance(ye, tuple) else (ye,)), (yo if isinstance(yo, tuple) else (yo,))
        for a, c in zip(ye + ge, yo + go):
            assert a.dtype == c.dtype and torch.equal(a, c)


@pytest.mark.parametrize(
    "name",
    ["layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"],
)
def test_opcheck(name) -> None:
    D = 16
    x = make((2, 3, D), torch.float32, seed=9, requires_grad=True)
    res = make((2, 3, D), torch.float32, seed=10, requires_grad=True)
    w = make((D,), torch.float32, shift=1.0, seed=11, requires_grad=True)
    b = make((D,), torch.float32, seed=12, requires_grad=True)
    args = {
        "layer_norm": (x, [D], w, b, 1e-5),
        "rms_norm": (x, [D], w, 1e-6, 0.0),
        "add_layer_norm": (x, res, [D], w, b, 1e-5),
        "add_rms_norm": (x, res, [D], w, 1e-6, 0.0),
    }[name]
    op = getattr(torch.ops.normkit, name).default
    torch.library.opcheck(op, args)
    # Without weights, and with no input requiring grad.
    plain = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    plain = tuple(None if (isinstance(a, torch.Tensor) and a.dim() == 1) else a for a in plain)
    torch.library.opcheck(op, plain)


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"])
def test_opcheck_backward_ops(name) -> None:
    D = 16
    x = make((2, 3, D), torch.float32, seed=13)
    dy = make((2, 3, D), torch.float32, seed=14)
    w = make((D,), torch.float32, shift=1.0, seed=15)
    b = make((D,), torch.float32, seed=16)
    ops = torch.ops.normkit
    if name == "layer_norm":
        _, mean, rstd = ops.layer_norm(x, [D], w, b, 1e-5)
        op, args = ops.layer_norm_backward.default, (dy, x, [D], mean, rstd, w, b, [True, True, True])
    elif name == "rms_norm":
        _, rstd = ops.rms_norm(x, [D], w, 1e-5, 0.0)
        op, args = ops.rms_norm_backward.default, (dy, x, [D], rstd, w, 0.0, [True, True])
    elif name == "add_layer_norm":
        _, h, mean, rstd = ops.add_layer_norm(x, dy, [D], w, b, 1e-5)
        op, args = ops.add_layer_norm_backward.default, (dy, dy, h, [D], mean, rstd, w, b, [True, True, True])
    else:
        _, h, rstd = ops.add_rms_norm(x, dy, [D], w, 1e-5, 0.0)
        op, args = ops.add_rms_norm_backward.default, (dy, None, h, [D], rstd, w, 0.0, [True, True])
    torch.library.opcheck(op, args)


# --- modules -----------------------------------------------------------------


def test_module_constructors_match_torch() -> None:
    for ours, theirs in ((nkt.LayerNorm, torch.nn.LayerNorm), (nkt.RMSNorm, torch.nn.RMSNorm)):
        p_ours = list(inspect.signature(ours.__init__).parameters.values())
        p_theirs = list(inspect.signature(theirs.__init__).parameters.values())
        # Same positional/keyword parameters, same defaults; extras only keyword-only.
        assert [(p.name, p.default) for p in p_ours[: len(p_theirs)]] == [(p.name, p.default) for p in p_theirs]
        assert all(p.kind is p.KEYWORD_ONLY for p in p_ours[len(p_theirs) :])


@pytest.mark.parametrize(
    "ours,theirs,kwargs",
    [
        (nkt.LayerNorm, torch.nn.LayerNorm, {}),
        (nkt.LayerNorm, torch.nn.LayerNorm, {"bias": False}),
        (nkt.LayerNorm, torch.nn.LayerNorm, {"elementwise_affine": False}),
        (nkt.RMSNorm, torch.nn.RMSNorm, {"eps": 1e-6}),
        (nkt.RMSNorm, torch.nn.RMSNorm, {"elementwise_affine": False}),
        (nkt.FusedAddLayerNorm, torch.nn.LayerNorm, {}),
        (nkt.FusedAddRMSNorm, torch.nn.RMSNorm, {}),
    ],
)
def test_state_dict_round_trip_with_torch_modules(ours, theirs, kwargs) -> None:
    shape = (4, 24)
    t = theirs(shape, **kwargs)
    with torch.no_grad():
        for p in t.parameters():
            p.copy_(torch.randn_like(p))
    n = ours(shape, **kwargs)
    n.load_state_dict(t.state_dict())  # strict: same keys, same shapes
    assert list(n.state_dict()) == list(t.state_dict())
    back = theirs(shape, **kwargs)
    back.load_state_dict(n.state_dict())
    for (k1, v1), (k2, v2) in zip(back.state_dict().items(), t.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)
    x = make((3,) + shape, torch.float32, seed=17)
    got = n(x)[0] if isinstance(got_ := n(x), tuple) else got_
    torch.testing.assert_close(got, t(x), rtol=1e-5, atol=1e-5)
    assert isinstance(n, theirs)


def test_fused_modules_compute_the_pre_norm_step() -> None:
    D = 64
    x = make((2, 5, D), torch.bfloat16, seed=18)
    res = make((2, 5, D), torch.float32, seed=19)
    for fused, plain in ((nkt.FusedAddRMSNorm(D), F.rms_norm), (nkt.FusedAddLayerNorm(D), F.layer_norm)):
        y, h = fused(x, res)
        assert h.dtype == torch.float32 and y.dtype == torch.bfloat16
        torch.testing.assert_close(h, x.float() + res)
        torch.testing.assert_close(y, plain(h.to(torch.float32), (D,)).to(torch.bfloat16), rtol=2e-2, atol=2e-2)
        y0, h0 = fused(x)  # first block: no residual yet
        assert h0 is x


def test_rms_norm_weight_offset_module() -> None:
    m = nkt.RMSNorm(32, eps=1e-6, weight_offset=1.0)
    assert torch.all(m.weight == 0)  # the gain 1 + w starts at 1
    x = make((3, 32), torch.float32, seed=20)
    torch.testing.assert_close(m(x), F.rms_norm(x, (32,), None, 1e-6))
    assert "weight_offset=1.0" in repr(m)


def test_modules_accept_any_layout() -> None:
    m = nkt.LayerNorm(16)
    x = make((16, 6), torch.float32, seed=21).t()  # last dim not contiguous
    torch.testing.assert_close(m(x), F.layer_norm(x, (16,), m.weight, m.bias))


def test_replace_norms_keeps_parameters_and_outputs() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 16),
        torch.nn.LayerNorm(16),
        torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.RMSNorm(16, eps=1e-6)),
        torch.nn.LayerNorm(16, elementwise_affine=False),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.eval()
    x = make((4, 16), torch.float32, seed=22)
    want = model(x)
    params = {k: id(v) for k, v in model.named_parameters()}
    keys = list(model.state_dict())
    report = nkt.replace_norms(model)
    assert report.model is model
    assert [(r.name, r.swapped) for r in report] == [("1", True), ("2.1", True), ("3", True)]
    assert type(model[1]) is nkt.LayerNorm and type(model[2][1]) is nkt.RMSNorm and type(model[3]) is nkt.LayerNorm
    assert {k: id(v) for k, v in model.named_parameters()} == params
    assert list(model.state_dict()) == keys and not model[1].training
    torch.testing.assert_close(model(x), want, rtol=1e-5, atol=1e-5)


# --- zero-copy ----------------------------------------------------------------


def test_tensor_out_is_written_in_place() -> None:
    x = make((4, 64), torch.float32, seed=23)
    out = torch.empty_like(x)
    v = out._version
    y = normkit.rms_norm(x, 64, out=out)
    assert y is out and y.data_ptr() == out.data_ptr()
    assert out._version > v  # autograd sees the write, as with any in-place op


def test_tensor_input_memory_is_shared_with_numpy() -> None:
    # One buffer seen by NumPy and by torch: in-place on the torch view of a
    # strided slice changes the NumPy array's memory and nothing else.
    a = np.random.default_rng(0).standard_normal((6, 40)).astype(np.float32)
    before = a.copy()
    t = torch.from_numpy(a)[::2, 4:36]
    want = F.rms_norm(t.clone(), (32,), eps=1e-6)
    got = normkit.rms_norm(t, 32, eps=1e-6, out=t)
    assert got.data_ptr() == t.data_ptr() == a.ctypes.data + 4 * 4
    torch.testing.assert_close(torch.from_numpy(a[::2, 4:36]), want, rtol=1e-5, atol=1e-6)
    mask = np.ones(a.shape, bool)
    mask[::2, 4:36] = False
    np.testing.assert_array_equal(a[mask], before[mask])


def test_out_with_autograd_is_refused() -> None:
    x = make((2, 8), torch.float32, seed=24, requires_grad=True)
    out = torch.full((2, 8), 7.0)
    with pytest.raises(ValueError, match="out="):
        normkit.layer_norm(x, 8, out=out)
    assert torch.all(out == 7.0)
    with torch.no_grad():
        assert normkit.layer_norm(x, 8, out=out) is out


# --- errors ---------------------------------------------------------------------


def test_tensor_errors_are_clear_and_write_nothing() -> None:
    x = make((3, 8), torch.float32, seed=25)
    out = torch.full((3, 8), 7.0)
    cases = [
        (lambda: normkit.rms_norm(x.to(torch.int32), 8, out=out), TypeError, "int32"),
        (lambda: normkit.rms_norm(x, 8, torch.ones(8, dtype=torch.float64), out=out), TypeError, "weight"),
        (lambda: normkit.layer_norm(x, (2, 4), out=out), ValueError, "normalized_shape"),
        (lambda: normkit.rms_norm(x, 8, torch.ones(8, device="meta"), out=out), TypeError, "weight"),
        (lambda: normkit.rms_norm(x, 8, out=torch.empty(3, 8, device="meta")), TypeError, "out"),
        (lambda: normkit.rms_norm(x, 8, torch.ones(8).to_sparse(), out=out), TypeError, "weight"),
        (lambda: normkit.layer_norm(x.t(), 3, out=out.t()), ValueError, "contiguous"),
    ]
    for call, exc, frag in cases:
        with pytest.raises(exc, match=frag):
            call()
        assert torch.all(out == 7.0)


class _Wrapper(torch.Tensor):
    """A wrapper subclass: no storage of its own, unwraps in __torch_dispatch__."""

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device)

    def __init__(self, elem):
        self.elem = elem

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t.elem if isinstance(t, _Wrapper) else t  # noqa: E731
        return func(*torch.utils._pytree.tree_map(unwrap, args), **torch.utils._pytree.tree_map(unwrap, kwargs or {}))


def test_tensor_subclasses_go_through_the_operators() -> None:
    # A wrapper subclass has no data pointer for the kernels; the call goes
    # through torch.ops.normkit, whose dispatch unwraps it.
    x = make((3, 16), torch.float32, seed=26)
    w = make((16,), torch.float32, shift=1.0, seed=27)
    torch.testing.assert_close(normkit.rms_norm(_Wrapper(x), 16, w, 1e-6), normkit.rms_norm(x, 16, w, 1e-6))
    # Fake tensors (shape propagation, tracing) get the fake implementation.
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        f = torch.empty(2, 5, 16, dtype=torch.bfloat16)
        y, mean, rstd = normkit.layer_norm(f, 16, return_stats=True)
        assert y.shape == f.shape and y.dtype == torch.bfloat16
        assert mean.shape == rstd.shape == (2, 5) and rstd.dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_get_a_clear_error() -> None:
    x = torch.randn(2, 8, device="cuda")
    with pytest.raises(ValueError, match="cuda"):
        normkit.rms_norm(x, 8)
    cpu = torch.randn(2, 8)
    out = torch.full((2, 8), 7.0)
    with pytest.raises(ValueError, match="cuda"):
        normkit.rms_norm(cpu, 8, torch.ones(8, device="cuda"), out=out)
    assert torch.all(out == 7.0)


# --- the GIL ------------------------------------------------------------------


def test_gil_is_released_while_kernels_run() -> None:
    # While one thread is inside a long normkit call, another thread keeps
    # running Python. Each kernel call runs single-threaded on a large input
    # (~0.1-0.3 s); we count the main thread's loop iterations that happen in
    # the middle half of the call. Holding the GIL would make that zero.
    x = torch.randn(4096, 4096, dtype=torch.float64)
    y = torch.empty_like(x)
    span = {}

    def work():
        span["start"] = time.perf_counter()
        normkit.layer_norm(x, 4096, out=y)
        span["end"] = time.perf_counter()

    old = normkit.get_num_threads()
    normkit.set_num_threads(1)
    try:
        stamps = []
        t = threading.Thread(target=work)
        t.start()
        while t.is_alive():
            stamps.append(time.perf_counter())
        t.join()
    finally:
        normkit.set_num_threads(old)
    s, e = span["start"], span["end"]
    q = (e - s) / 4
    inside = sum(1 for v in stamps if s + q < v < e - q)
    assert inside > 0, f"no Python ran during a {e - s:.3f} s kernel call"
