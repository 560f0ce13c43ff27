"""The fused decode step gives transformers' logits and cache for the models it accepts, follows
weights changed in place, and declines the models it does not compute exactly."""

from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from agentgym.inference import HFEngine, SamplingParams
from agentgym.inference._fused import FusedDecoder
from agentgym.inference.kvcache import cache_keyword
from agentgym.models import load, tiny_config

torch.set_num_threads(1)


def _llama(**overrides):
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=96,
        intermediate_size=160,
        num_hidden_layers=3,
        num_attention_heads=6,
        num_key_value_heads=1,
        head_dim=24,  # not hidden_size / heads
        max_position_embeddings=512,
        tie_word_embeddings=False,
        **overrides,
    )
    torch.manual_seed(3)
    return LlamaForCausalLM(config).eval()


def _qwen2():
    model, _ = load(seed=0)
    return model


def _cache(model, cache):
    """The forward's keyword argument for ``cache``."""
    return {cache_keyword(model): cache}


def _prefilled(model, rows=5, width=23):
    """A left-padded batch prefilled by the model: its cache, mask and next positions."""
    torch.manual_seed(1)
    vocab = model.config.vocab_size
    ids = torch.randint(3, vocab, (rows, width))
    mask = torch.ones(rows, width, dtype=torch.long)
    for row in range(rows):
        mask[row, : 3 * row] = 0  # row r has 3r padding columns
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    cache = DynamicCache()
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask, position_ids=positions, **_cache(model, cache))
    return cache, mask, positions[:, -1:] + 1


def _copy(cache):
    return DynamicCache(
        ddp_cache_data=[(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
    )


def _compare(model, steps=4):
    """Decode ``steps`` tokens both ways from the same cache; the largest logit difference."""
    decoder = FusedDecoder.build(model)
    assert decoder is not None
    ours, _, _ = _prefilled(model)
    theirs, mask, positions = _prefilled(model)
    worst = 0.0
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for step in range(steps):
            if step == 3:  # the batch reorders its rows: same shape, new tensors
                order = torch.arange(mask.shape[0]).flip(0)
                for cache in (ours, theirs):
                    cache.batch_select_indices(order)
                mask, positions = mask[order], positions[order]
            ids = torch.randint(3, model.config.vocab_size, (mask.shape[0], 1), generator=generator)
            mask = torch.cat([mask, torch.ones(mask.shape[0], 1, dtype=torch.long)], dim=1)
            expected = model(
                input_ids=ids, attention_mask=mask, position_ids=positions, **_cache(model, theirs)
            ).logits[:, -1]
            got = decoder(ids, mask, positions, ours)
            assert got.shape == expected.shape
            worst = max(worst, float((got - expected).abs().max()))
            positions = positions + 1
    for a, b in zip(ours.layers, theirs.layers, strict=True):
        torch.testing.assert_close(a.keys, b.keys, atol=1e-5, rtol=0)
        torch.testing.assert_close(a.values, b.values, atol=1e-5, rtol=0)
    return worst, float(expected.abs().max())


def test_qwen2_logits_and_cache_match_transformers():
    model = _qwen2()
    with torch.no_grad():
        model.model.norm.weight.mul_(8)  # logits of a useful size, not ~0.2
    worst, scale = _compare(model, steps=70)  # past a cache buffer's spare columns
    assert scale > 1.0
    assert worst < 1e-5


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"attention_bias": True, "mlp_bias": True},
        {
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            }
        },
    ],
    ids=["plain", "biases", "llama3-rope"],
)
def test_llama_logits_and_cache_match_transformers(overrides):
    worst, scale = _compare(_llama(**overrides))
    assert scale > 0.1
    assert worst < 1e-5


def test_weights_changed_in_place_are_used_at_the_next_step():
    model = _qwen2()
    decoder = FusedDecoder.build(model)
    cache, mask, positions = _prefilled(model)
    ids = torch.full((mask.shape[0], 1), 7)
    mask = torch.cat([mask, torch.ones(mask.shape[0], 1, dtype=torch.long)], dim=1)
    with torch.inference_mode():
        before = decoder(ids, mask, positions, _copy(cache))
    # An optimizer step in place, as a trainer sharing the engine's model takes one.
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    for layer in model.model.layers:
        layer.self_attn.k_proj.weight.grad = torch.ones_like(layer.self_attn.k_proj.weight)
        layer.mlp.up_proj.weight.grad = torch.ones_like(layer.mlp.up_proj.weight)
    optimizer.step()
    with torch.inference_mode():
        after = decoder(ids, mask, positions, _copy(cache))
        expected = model(
            input_ids=ids, attention_mask=mask, position_ids=positions, **_cache(model, cache)
        ).logits[:, -1]
    assert float((after - before).abs().max()) > 1e-3
    torch.testing.assert_close(after, expected, atol=1e-5, rtol=0)


def test_models_it_does_not_compute_exactly_keep_transformers_forward():
    assert FusedDecoder.build(_qwen2()) is not None
    assert FusedDecoder.build(_llama()) is not None
    # Sliding-window attention on every layer.
    sliding, _ = load(config=tiny_config(use_sliding_window=True, sliding_window=8), seed=0)
    assert FusedDecoder.build(sliding) is None
    # An activation other than SiLU.
    assert FusedDecoder.build(_llama(hidden_act="gelu")) is None

    # A layer wrapped by an adapter computes something else than its weight.
    class LoRALinear(torch.nn.Linear):
        pass

    adapted = _llama()
    old = adapted.model.layers[1].self_attn.v_proj
    adapted.model.layers[1].self_attn.v_proj = LoRALinear(old.in_features, old.out_features)
    assert FusedDecoder.build(adapted) is None
    # Weights made under inference mode: no version counter to follow in-place changes.
    with torch.inference_mode():
        frozen, _ = load(seed=0)
    assert FusedDecoder.build(frozen) is None
    # Another architecture.
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100))
    assert FusedDecoder.build(gpt2) is None


def test_the_engine_samples_the_same_tokens_with_and_without_it():
    model, tok = load(seed=0)
    with torch.no_grad():
        model.model.norm.weight.mul_(8)
    prompts = [list(range(5, 5 + n)) for n in (3, 9, 17, 9)]
    # Rows that leave at different steps (the cache's rows are selected, its columns trimmed)
    # and more steps than a cache buffer's spare columns (it is remade when full).
    lengths = (12, 70, 30, 81)
    sampling = [
        SamplingParams(max_tokens=n, seed=s, ignore_eos=True) for s, n in enumerate(lengths)
    ]

    async def run(fused: bool):
        engine = HFEngine(model, tok, fused_decode=fused, prefix_cache_bytes=0)
        assert (engine._batch.fused is not None) is fused
        try:
            return await asyncio.gather(
                *(engine.generate(p, s) for p, s in zip(prompts, sampling, strict=True))
            )
        finally:
            await engine.close()

    fused, plain = asyncio.run(run(True)), asyncio.run(run(False))
    for a, b, n in zip(fused, plain, lengths, strict=True):
        assert a.token_ids == b.token_ids
        assert len(a.token_ids) == n
        torch.testing.assert_close(
            torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0
        )
