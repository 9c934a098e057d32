"""normkit under torch.autocast("cpu", dtype=torch.bfloat16) behaves as PyTorch's norms do.

PyTorch registers no CPU autocast kernel for aten::layer_norm or aten::rms_norm
(its CPU lists leave them out), so under CPU autocast they run in the dtypes of
the tensors they are given: a float32 input gives a float32 output, a
bfloat16 one a bfloat16 output, with float32 weights either way. normkit's
eager functions, modules and ``torch.ops.normkit`` operators must do the same.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import normkit
import normkit.torch as nkt

D = 48
AUTOCAST = dict(device_type="cpu", dtype=torch.bfloat16)


def make(shape, dtype, seed, requires_grad=True):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 2 + 0.5).to(dtype).requires_grad_(requires_grad)


def _has_autocast_cpu_kernel(op: str) -> bool:
    return any(line.startswith("AutocastCPU:") for line in torch._C._dispatch_dump(op).splitlines())


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
def test_autocast_registration_is_torchs(name):
    # If a PyTorch release puts its norms on a CPU autocast list, normkit's
    # operators must be registered to match (torch.library.register_autocast).
    assert _has_autocast_cpu_kernel(f"aten::{name}") == _has_autocast_cpu_kernel(f"normkit::{name}")


def _torch_norm(name, x, w, b):
    return F.layer_norm(x, (D,), w, b, 1e-5) if name == "layer_norm" else F.rms_norm(x, (D,), w, 1e-5)


def _normkit_norm(route, name, x, w, b):
    if route == "function":
        return normkit.layer_norm(x, (D,), w, b, 1e-5) if name == "layer_norm" else normkit.rms_norm(x, (D,), w, 1e-5)
    if route == "op":
        if name == "layer_norm":
            return torch.ops.normkit.layer_norm(x, [D], w, b, 1e-5)[0]
        return torch.ops.normkit.rms_norm(x, [D], w, 1e-5, 0.0)[0]
    m = nkt.LayerNorm(D) if name == "layer_norm" else nkt.RMSNorm(D, eps=1e-5)
    with torch.no_grad():
        m.weight.copy_(w)
        if name == "layer_norm":
            m.bias.copy_(b)
    return m(x)


@pytest.mark.parametrize("route", ["function", "op", "module"])
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
def test_autocast_dtypes_and_values_match_torch(name, x_dtype, route):
    x = make((3, 5, D), x_dtype, seed=1)
    w, b = make((D,), torch.float32, seed=2), make((D,), torch.float32, seed=3)
    dy = make((3, 5, D), x_dtype, seed=4, requires_grad=False)
    with torch.autocast(**AUTOCAST):
        want = _torch_norm(name, x, w, b)
        (want_dx,) = torch.autograd.grad(want, x, dy)
        got = _normkit_norm(route, name, x, w, b)
        (got_dx,) = torch.autograd.grad(got, x, dy)
    assert got.dtype == want.dtype == x_dtype
    assert got_dx.dtype == want_dx.dtype == x_dtype
    # Both compute in float32 and round once (torch) or once (normkit) to x's
    # dtype: 2 units of roundoff of the output relative to the row's scale.
    u = 2.0**-8 if x_dtype == torch.bfloat16 else 2.0**-24 * D
    scale = want.double().abs().max().item()
    assert (got.double() - want.double()).abs().max().item() <= 2 * u * scale
    dscale = want_dx.double().abs().max().item()
    assert (got_dx.double() - want_dx.double()).abs().max().item() <= 4 * u * dscale


def test_autocast_under_compile_matches_eager():
    x = make((4, D), torch.bfloat16, seed=5, requires_grad=False)
    m = nkt.RMSNorm(D, eps=1e-6)
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
    with torch.autocast(**AUTOCAST):
        want = m(x)
        got = compiled(x)
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.equal(got, want)
