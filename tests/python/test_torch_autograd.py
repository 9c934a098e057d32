"""The C++ autograd functions (normkit._torch_autograd) against the Python
Functions they stand in for: the same kernels with the same arguments, so
every output and gradient must be bitwise identical; and the calls they do
not take must reach the Python Functions."""

from __future__ import annotations

import pytest
import torch

import normkit as nkt
from normkit import _torch_ops

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def make(shape, dtype, seed, requires_grad=True):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) + 0.3).to(dtype).requires_grad_(requires_grad)


def native_name(y):
    return type(y.grad_fn).__name__


def test_built_and_used():
    # scripts/test.sh builds the package against the venv's PyTorch; an
    # isolated build would silently fall back to the Python Functions.
    assert _torch_ops._N is not None, "normkit._torch_autograd was not built (build with --no-build-isolation)"
    x = make((2, 8), torch.float32, 0)
    assert native_name(nkt.layer_norm(x, 8)) == "CppFunction"
    assert native_name(nkt.rms_norm(x, 8)) == "CppFunction"


def run(fn, x, params, dy):
    for t in (x, *params):
        if t is not None:
            t.grad = None
    outs = fn()
    y = outs[0] if isinstance(outs, tuple) else outs
    y.backward(dy)
    return outs, [None if t is None else t.grad for t in (x, *params)]


def same(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            same(u, v)
        return
    if a is None or b is None:
        assert a is None and b is None
        return
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, ns", [((1, 2048), [2048]), ((3, 5, 64), [64]), ((2, 4, 6), [4, 6])])
@pytest.mark.parametrize("params", ["none", "weight", "all"])
@pytest.mark.parametrize("return_stats", [False, True])
def test_layer_norm_bitwise(dtype, shape, ns, params, return_stats):
    p_dtype = torch.float32 if dtype in (torch.float16, torch.bfloat16) and params == "all" else dtype
    x = make(shape, dtype, 1)
    w = make(ns, p_dtype, 2) if params != "none" else None
    b = make(ns, p_dtype, 3) if params == "all" else None
    dy = make(shape, dtype, 4, requires_grad=False)
    eps = 1e-5
    got = run(lambda: nkt.layer_norm(x, ns, w, b, eps, return_stats=return_stats), x, (w, b), dy)
    want = run(lambda: _torch_ops._LayerNormFn.apply(x, ns, w, b, eps, return_stats), x, (w, b), dy)
    same(got, want)
    assert native_name(got[0][0] if return_stats else got[0]) == "CppFunction"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, ns", [((1, 4096), [4096]), ((3, 5, 64), [64])])
@pytest.mark.parametrize("weight_offset", [0.0, 1.0])
@pytest.mark.parametrize("return_stats", [False, True])
def test_rms_norm_bitwise(dtype, shape, ns, weight_offset, return_stats):
    x = make(shape, dtype, 5)
    w = make(ns, dtype, 6)
    dy = make(shape, dtype, 7, requires_grad=False)
    eps = 1e-6
    got = run(lambda: nkt.rms_norm(x, ns, w, eps, weight_offset=weight_offset, return_stats=return_stats), x, (w,), dy)
    want = run(lambda: _torch_ops._RMSNormFn.apply(x, ns, w, eps, weight_offset, return_stats), x, (w,), dy)
    same(got, want)


def test_only_the_gradients_asked_for():
    x = make((4, 32), torch.float32, 8, requires_grad=False)
    w = make((32,), torch.float32, 9)
    b = make((32,), torch.float32, 10, requires_grad=False)
    y = nkt.layer_norm(x, 32, w, b)
    assert native_name(y) == "CppFunction"
    y.sum().backward()
    assert w.grad is not None and b.grad is None and x.grad is None
    want = _torch_ops._LayerNormFn.apply(x, [32], w.detach().requires_grad_(), b, 1e-5, False)
    same(y, want)


def test_non_contiguous_gradient():
    x = make((4, 32), torch.float32, 11)
    y = nkt.rms_norm(x, 32)
    dy = make((32, 4), torch.float32, 12, requires_grad=False).t()
    assert not dy.is_contiguous()
    y.backward(dy)
    x2 = x.detach().clone().requires_grad_()
    _torch_ops._RMSNormFn.apply(x2, [32], None, _torch_ops._F32_EPS, 0.0, False).backward(dy.contiguous())
    same(x.grad, x2.grad)


@pytest.mark.parametrize(
    "case",
    [
        "strided input",  # a column block: the Python Function views it, the C++ one does not
        "eps as a string",  # refused by the Python Function, with its message
        "negative eps",
        "weight of another width",
        "input the output cache serves",
    ],
)
def test_calls_the_python_function_takes(case):
    x = make((4, 64), torch.float32, 13)
    if case == "strided input":
        xs = make((4, 128), torch.float32, 14)[:, :64]
        y = nkt.layer_norm(xs, 64)
        assert native_name(y) == "_LayerNormFnBackward"
        return
    if case == "input the output cache serves":  # 1 MiB and more: the Function's outputs come from the cache
        y = nkt.rms_norm(make((64, 4096), torch.float32, 17), 4096)
        assert native_name(y) == "_RMSNormFnBackward"
        assert native_name(nkt.rms_norm(make((63, 4096), torch.float32, 17), 4096)) == "CppFunction"
        return
    if case == "eps as a string":
        with pytest.raises(TypeError, match="layer_norm: eps must be a float"):
            nkt.layer_norm(x, 64, None, None, "0.1")
    elif case == "negative eps":
        with pytest.raises(ValueError, match="eps"):
            nkt.layer_norm(x, 64, None, None, -1.0)
    else:
        with pytest.raises(ValueError, match="weight"):
            nkt.rms_norm(x, 64, make((63,), torch.float32, 15))


def test_double_backward_refused():
    x = make((2, 16), torch.float32, 16)
    y = nkt.layer_norm(x, 16)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(y.square().sum(), x, create_graph=True)
