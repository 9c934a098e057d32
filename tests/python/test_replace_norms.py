"""replace_norms judges modules by what they compute: hand-written norm classes
(no transformers needed), near misses that must be left alone, and the report."""

from __future__ import annotations

import torch

import normkit.torch as nkt
from normkit import _swap

D = 32


class LlamaStyleRMSNorm(torch.nn.Module):
    """Hugging Face's LlamaRMSNorm, written out: f32 statistics, x̂ cast back, then times the weight."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.variance_epsilon = eps

    def forward(self, x):
        dt = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dt)


class EpsOutsideSqrt(LlamaStyleRMSNorm):
    """x / (rms + eps): a different function, equal to RMSNorm only where eps is negligible."""

    def forward(self, x):
        h = x.float()
        return (self.weight * h / (h.pow(2).mean(-1, keepdim=True).sqrt() + self.variance_epsilon)).to(x.dtype)


class OffsetNorm(torch.nn.Module):
    """(1 + w) gain, like Gemma, with the eps under the name `eps`."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * (1 + self.weight.float())).type_as(x)


class NoEpsNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * self.weight


def test_llama_style_module_is_swapped_with_promoting_output():
    torch.manual_seed(0)
    m = LlamaStyleRMSNorm(D)
    with torch.no_grad():
        m.weight.add_(torch.randn(D))
    report = nkt.replace_norms(m)
    new = report.model
    assert type(new) is nkt.MatchedRMSNorm and new.weight is m.weight
    assert new.output_dtype == "promote" and new.weight_offset == 0.0 and new.eps == 1e-6
    assert new.variance_epsilon == 1e-6
    assert report[0].swapped and "rms_norm(weight_offset=0)" in report[0].reason
    x = torch.randn(3, D, dtype=torch.bfloat16)
    assert m(x).dtype == new(x).dtype == torch.float32  # bf16 activations, f32 weight (autocast)
    torch.testing.assert_close(new(x), m(x), rtol=2**-7, atol=2**-7)


def test_gain_offset_and_eps_name_are_found():
    report = nkt.replace_norms(torch.nn.Sequential(torch.nn.Linear(D, D), OffsetNorm(D)))
    new = report.model[1]
    assert type(new) is nkt.MatchedRMSNorm
    assert new.weight_offset == 1.0 and new.eps == 1e-5 and new.output_dtype == "input"


def test_a_different_function_is_left_alone_with_the_reason():
    model = torch.nn.Sequential(EpsOutsideSqrt(D), NoEpsNorm(D))
    report = nkt.replace_norms(model)
    assert type(model[0]) is EpsOutsideSqrt and type(model[1]) is NoEpsNorm
    assert [r.swapped for r in report] == [False, False]
    assert report[0].reason.startswith("no normkit module matches") and "off by" in report[0].reason
    assert "eps" in report[1].reason
    text = str(report)
    assert "0 swapped, 2 left alone" in text and "EpsOutsideSqrt" in text and "NoEpsNorm" in text


def test_probe_leaves_the_model_untouched():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.LayerNorm(D), LlamaStyleRMSNorm(D))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        report = nkt.replace_norms(model)
    assert len(report.swapped) == 2
    assert all(p.grad is None for p in model.parameters())
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_shared_module_is_swapped_once():
    norm = LlamaStyleRMSNorm(D)
    model = torch.nn.ModuleDict({"a": torch.nn.Sequential(norm), "b": torch.nn.Sequential(norm)})
    report = nkt.replace_norms(model)
    assert len(report) == 1 and model["a"][0] is model["b"][0]


def test_tolerance_scales_with_dtype_and_width():
    f32, bf16 = torch.float32, torch.bfloat16
    assert _swap.tolerance([bf16, f32], 64, 6) > 100 * _swap.tolerance([f32], 64, 6)
    assert _swap.tolerance([f32], 4096, 6) > _swap.tolerance([f32], 64, 6)
    # A LayerNorm/RMSNorm mix-up or a lost (1 + w) is an O(1) difference; a
    # correct bf16 implementation is within a few 2^-8.
    assert 2**-7 < _swap.tolerance([bf16], 4096, 6) < 0.1


def test_parameters_on_a_device_normkit_cannot_use_are_left_alone_with_the_reason():
    # The meta device stands for any device without a normkit backend here.
    model = torch.nn.Sequential(LlamaStyleRMSNorm(D).to("meta"))
    report = nkt.replace_norms(model)
    assert type(model[0]) is LlamaStyleRMSNorm and not report[0].swapped
    assert report[0].reason.startswith("parameters are on meta; normkit runs on the CPU")
