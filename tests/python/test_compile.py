"""torch.compile of models built on normkit: one graph (no breaks), same results.

Compilation is slow, so the model is tiny and most checks use the aot_eager
backend, which exercises everything normkit provides for compilation (fake
implementations, the registered autograd, the functional ops in the graph);
one test runs inductor end to end.
"""

from __future__ import annotations

import pytest
import torch

import normkit
import normkit.torch as nkt

D = 32


class Block(torch.nn.Module):
    """A pre-norm residual block: every normkit module and a functional call."""

    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nkt.FusedAddRMSNorm(D, eps=1e-6)
        self.proj = torch.nn.Linear(D, D)
        self.norm2 = nkt.FusedAddLayerNorm(D)
        self.norm3 = nkt.RMSNorm(D, weight_offset=1.0)
        self.norm4 = nkt.LayerNorm(D)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        y, h = self.norm1(x, residual)
        y, h = self.norm2(self.proj(y), h)
        z = self.norm3(y) + self.norm4(h)
        return normkit.rms_norm(z, D, None, 1e-5)


def _inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, D, generator=g, requires_grad=True)
    r = torch.randn(2, 5, D, generator=g, requires_grad=True)
    return x, r


def _run(model, x, r):
    out = model(x, r)
    out.square().sum().backward()
    grads = [x.grad.clone(), r.grad.clone()] + [p.grad.clone() for p in model.parameters()]
    x.grad = r.grad = None
    model.zero_grad(set_to_none=True)
    return out.detach(), grads


def _model():
    torch.manual_seed(0)
    m = Block()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


def test_no_graph_breaks() -> None:
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(_model())(*_inputs())
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_model_matches_eager(backend) -> None:
    torch._dynamo.reset()
    model = _model()
    x, r = _inputs()
    want_out, want_grads = _run(model, x, r)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    got_out, got_grads = _run(compiled, x, r)
    # The same kernels run in both; only the graph around them differs
    # (inductor may fuse the surrounding adds and matmul differently).
    torch.testing.assert_close(got_out, want_out, rtol=1e-5, atol=1e-5)
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_compiled_out_argument_writes_through() -> None:
    torch._dynamo.reset()

    @torch.compile(backend="aot_eager", fullgraph=True)
    def f(x, out):
        return normkit.layer_norm(x, D, out=out)

    x = torch.randn(3, D)
    out = torch.zeros(3, D)
    with torch.no_grad():
        y = f(x, out)
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (D,)), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y, out)
