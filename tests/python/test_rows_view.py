"""The (rows, D) rule is written once, in the binding (python/src/rows_view.hpp).
The PyTorch layer asks it through ``_normkit.needs_copy`` before it copies a
tensor; these tests check that the answer is exactly what the kernels accept,
that a tensor they accept reaches them uncopied, and that the others are
copied and give PyTorch's result."""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F

import normkit
import normkit._normkit as _C
import normkit.torch as nkt


def layouts():
    """(name, tensor, normalized_shape) for views of every kind, shape (..., 8) or (..., 2, 4)."""
    g = torch.Generator().manual_seed(0)
    buf = torch.randn(6, 20, generator=g)
    base = torch.randn(3, 4, 8, generator=g)
    return [
        ("contiguous", base, (8,)),
        ("two normalized dims", base.reshape(3, 4, 2, 4), (2, 4)),
        ("every other row", buf[::2, :8], (8,)),
        ("column block", buf[:, 4:12], (8,)),
        ("padded rows, two lead dims", buf[:, :8].unflatten(0, (3, 2)), (8,)),
        ("one row, odd stride", buf[:1, 3:11], (8,)),
        ("size-1 normalized dim, any stride", torch.randn(5, 3, generator=g).t()[:, :1], (1,)),
        ("transposed", torch.randn(8, 5, generator=g).t(), (8,)),
        ("strided normalized dim", buf[:, ::2], (10,)),
        ("broadcast rows", torch.randn(8, generator=g).expand(4, 8), (8,)),
        ("rows no single stride reaches", base[:, :3, :], (8,)),
        ("permuted lead", base.transpose(0, 1), (8,)),
        ("empty", base[:0], (8,)),
    ]


def kernels_take(t: torch.Tensor, ns) -> bool:
    try:
        normkit.layer_norm(t, ns)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name,t,ns", layouts(), ids=[c[0] for c in layouts()])
def test_needs_copy_is_what_the_kernels_refuse(name, t, ns) -> None:
    assert _C.needs_copy(t, ns) == (not kernels_take(t, ns))


@pytest.mark.parametrize("name,t,ns", layouts(), ids=[c[0] for c in layouts()])
def test_modules_copy_only_what_the_kernels_refuse(name, t, ns, monkeypatch) -> None:
    seen = []

    def layer_norm(x, *args):
        seen.append(x.data_ptr())
        return _C.layer_norm(x, *args)

    monkeypatch.setattr(normkit._torch_ops, "_C", types.SimpleNamespace(layer_norm=layer_norm, needs_copy=_C.needs_copy))
    m = nkt.LayerNorm(ns)
    with torch.no_grad():
        y = m(t)
    torch.testing.assert_close(y, F.layer_norm(t, ns, m.weight, m.bias))
    assert (seen[0] == t.data_ptr()) == (not _C.needs_copy(t, ns) or t.numel() == 0)


def test_needs_copy_leaves_refused_arguments_to_the_op() -> None:
    x = torch.zeros(4, 6, dtype=torch.int64).t()
    assert not _C.needs_copy(x, 4)  # the op reports the dtype, in its own words
    with pytest.raises(TypeError, match="layer_norm: input has dtype int64"):
        nkt.LayerNorm(4)(x)
    assert not _C.needs_copy(torch.randn(4, 6).t(), 5)  # wrong trailing shape: no copy helps
