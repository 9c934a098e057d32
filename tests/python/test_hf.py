"""replace_norms on real Hugging Face models (small configs, random weights, nothing downloaded).

For each family the swapped model's logits and one training step's
gradients are compared with the unswapped model's. The tolerance is the
model's own rounding noise: the unswapped model in its dtype against a
float64 copy. Swapping normkit in may change the result by no more than twice
that noise (both are rounding errors of the same size, normkit's and
PyTorch's, and may add up), plus a floor of a few units of the dtype's
roundoff for outputs whose noise happens to be tiny.
"""

from __future__ import annotations

import copy
import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: nothing may be downloaded

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import normkit.torch as nkt  # noqa: E402

VOCAB, HIDDEN, LAYERS, HEADS = 128, 64, 2, 4


def _decoder(config_cls, model_cls, **extra):
    def make():
        cfg = config_cls(
            vocab_size=VOCAB,
            hidden_size=HIDDEN,
            intermediate_size=2 * HIDDEN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            num_key_value_heads=HEADS // 2,
            max_position_embeddings=64,
            attn_implementation="eager",
            **extra,
        )
        return model_cls(cfg)

    return make


def _gpt2():
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=64, bos_token_id=0, eos_token_id=0,
        attn_implementation="eager",
    )
    return transformers.GPT2LMHeadModel(cfg)


def _bert():
    cfg = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=2 * HIDDEN,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    return transformers.BertForMaskedLM(cfg)


def _t5():
    cfg = transformers.T5Config(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=2 * HIDDEN, num_layers=LAYERS, num_heads=HEADS,
        decoder_start_token_id=0, attn_implementation="eager",
    )
    return transformers.T5ForConditionalGeneration(cfg)


# family -> (builder, norm class, what it becomes, its weight_offset, output dtype rule, causal LM)
FAMILIES = {
    "llama": (_decoder(transformers.LlamaConfig, transformers.LlamaForCausalLM), "LlamaRMSNorm", nkt.MatchedRMSNorm, 0.0, "promote", True),
    "mistral": (_decoder(transformers.MistralConfig, transformers.MistralForCausalLM), "MistralRMSNorm", nkt.MatchedRMSNorm, 0.0, "promote", True),
    "qwen2": (_decoder(transformers.Qwen2Config, transformers.Qwen2ForCausalLM), "Qwen2RMSNorm", nkt.MatchedRMSNorm, 0.0, "promote", True),
    "gemma": (_decoder(transformers.GemmaConfig, transformers.GemmaForCausalLM, head_dim=HIDDEN // HEADS), "GemmaRMSNorm", nkt.MatchedRMSNorm, 1.0, "input", True),
    "gpt2": (_gpt2, "LayerNorm", nkt.LayerNorm, None, "input", True),
    "bert": (_bert, "LayerNorm", nkt.LayerNorm, None, "input", False),
    "t5": (_t5, "T5LayerNorm", nkt.MatchedRMSNorm, 0.0, "weight", False),
}

_UNIT = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8}


def build(family: str, dtype=torch.float32):
    """The family's model with random weights, norm parameters perturbed away from their 1/0 init
    (so a wrong gain offset or a dropped bias shows), in eval mode, in `dtype`."""
    torch.manual_seed(0)
    model = FAMILIES[family][0]()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.3 * torch.randn_like(p))
    return model.to(dtype).eval()


def inputs(family: str, batch=2, seq=12):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, VOCAB, (batch, seq), generator=g)
    kw = {"input_ids": ids, "labels": torch.randint(1, VOCAB, (batch, seq), generator=g)}
    if family == "t5":
        kw["decoder_input_ids"] = torch.randint(1, VOCAB, (batch, 5), generator=g)
        kw["labels"] = torch.randint(1, VOCAB, (batch, 5), generator=g)
    return kw


def logits_and_grads(model, kw):
    model.zero_grad(set_to_none=True)
    out = model(**kw)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.logits.detach(), grads


def assert_within_noise(got, want, ref64, dtype, what):
    """|got − want| ≤ 2·|want − ref64| + 8·u·max|ref64|, in the max norm over the tensor."""
    noise = (want.double() - ref64).abs().max().item()
    budget = 2.0 * noise + 8.0 * _UNIT[dtype] * ref64.abs().max().item()
    diff = (got.double() - want.double()).abs().max().item()
    assert diff <= budget, f"{what}: swapped differs by {diff:.3g}, budget {budget:.3g} (model noise {noise:.3g})"


def swapped_copy(model):
    """A deep copy of `model` with its norms swapped; the swap keeps every Parameter object."""
    new = copy.deepcopy(model)
    params = {k: id(p) for k, p in new.named_parameters()}
    report = nkt.replace_norms(new)
    assert report.model is new
    assert {k: id(p) for k, p in new.named_parameters()} == params
    return new, report


def norm_modules(model, cls_name):
    return [n for n, m in model.named_modules() if type(m).__name__ == cls_name]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_norm_is_swapped_with_the_right_module(family):
    _, cls_name, new_cls, offset, rule, _ = FAMILIES[family]
    model = build(family)
    names = norm_modules(model, cls_name)
    assert names, f"{family}: no {cls_name} in the model"
    new, report = swapped_copy(model)
    assert [r.name for r in report.swapped] == names, str(report)
    assert not report.left_alone, str(report)
    for name in names:
        m = new.get_submodule(name)
        assert type(m) is new_cls
        assert torch.equal(m.weight, model.get_submodule(name).weight)
        if offset is not None:
            assert m.weight_offset == offset
        if isinstance(m, (nkt.MatchedRMSNorm, nkt.MatchedLayerNorm)):
            assert m.output_dtype == rule
    assert list(new.state_dict()) == list(model.state_dict())
    assert cls_name in str(report)


# Every family in float32; bfloat16 on one model per kind of norm.
@pytest.mark.parametrize(
    "family,dtype",
    [(f, torch.float32) for f in sorted(FAMILIES)] + [(f, torch.bfloat16) for f in ("llama", "gemma", "gpt2", "t5")],
)
def test_logits_and_gradients_match(family, dtype):
    model = build(family, dtype)
    kw = inputs(family)
    ref_logits, ref_grads = logits_and_grads(copy.deepcopy(model).double(), kw)
    want_logits, want_grads = logits_and_grads(model, kw)
    new, _ = swapped_copy(model)
    got_logits, got_grads = logits_and_grads(new, kw)
    assert got_logits.dtype == want_logits.dtype
    assert_within_noise(got_logits, want_logits, ref_logits, dtype, f"{family} logits")
    assert got_grads.keys() == want_grads.keys()
    flat = lambda g: torch.cat([t.double().flatten() for t in g.values()])  # noqa: E731
    assert_within_noise(flat(got_grads), flat(want_grads), flat(ref_grads), dtype, f"{family} gradients")


@pytest.mark.parametrize("family", [f for f in sorted(FAMILIES) if FAMILIES[f][5]])
def test_generate_runs_and_agrees(family):
    model = build(family)
    new, _ = swapped_copy(model)
    ids = inputs(family)["input_ids"][:1, :6]
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0)
        got = new.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert got.shape == (1, 12)
    assert torch.equal(got, want)


@pytest.mark.parametrize("family", ["llama", "gemma", "gpt2"])
def test_save_and_load_pretrained(family, tmp_path):
    model = build(family)
    new, _ = swapped_copy(model)
    new.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path, attn_implementation="eager").eval()  # plain HF norms again
    for (n1, a), (n2, b) in zip(new.state_dict().items(), loaded.state_dict().items()):
        assert n1 == n2 and torch.equal(a, b), n1
    kw = inputs(family)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**kw).logits, model(**kw).logits, rtol=0, atol=0)
    report = nkt.replace_norms(loaded)
    assert not report.left_alone and report.swapped
    with torch.no_grad():
        torch.testing.assert_close(loaded(**kw).logits, new(**kw).logits, rtol=0, atol=0)


def test_training_step_updates_the_shared_parameters():
    model = build("llama").train()
    new, _ = swapped_copy(model)
    opt = torch.optim.AdamW(new.parameters(), lr=1e-2)
    norm = new.model.norm
    before = norm.weight.detach().clone()
    kw = inputs("llama")
    new(**kw).loss.backward()
    opt.step()
    assert norm.weight is new.model.norm.weight and not torch.equal(norm.weight, before)


def test_autocast_bfloat16_matches_unswapped():
    # Under CPU autocast linear layers run in bfloat16 and the norms see
    # whatever reaches them; the swapped model must give the same dtypes and
    # values within the bfloat16 noise of the unswapped one.
    model = build("llama")
    new, _ = swapped_copy(model)
    kw = inputs("llama")
    ref_logits, _ = logits_and_grads(copy.deepcopy(model).double(), kw)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, want_g = logits_and_grads(model, kw)
        got, got_g = logits_and_grads(new, kw)
    assert got.dtype == want.dtype
    assert_within_noise(got, want, ref_logits, torch.bfloat16, "llama autocast logits")
    for n in want_g:
        assert got_g[n].dtype == want_g[n].dtype, n
