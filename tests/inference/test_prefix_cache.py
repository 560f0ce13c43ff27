"""HFEngine's prefix cache: a conversation's next turn prefills only its new tokens, and the
logprobs stay those of a full teacher-forced forward pass."""

from __future__ import annotations

import asyncio
import random

import pytest
import torch

from agentgym.error import ConfigError
from agentgym.inference import HFEngine, SamplingParams, sampling_logprobs
from agentgym.inference._prefix import PrefixCache
from agentgym.models import load

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    model, tok = load(seed=0)
    with torch.no_grad():  # sharper logits, as in test_hf_engine
        model.model.norm.weight.mul_(8)
    return model, tok


def teacher_forced(model, prompt, completion, temperature):
    ids = torch.tensor([prompt + completion.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1]
    logp = sampling_logprobs(logits, temperature, 0, 1.0)
    return logp.gather(-1, torch.tensor(completion.token_ids)[:, None])[:, 0]


async def _conversations(engine, starts, turns, sampling, delta):
    """Each conversation: prompt -> completion -> prompt + completion + delta -> ..."""

    async def one(index, prompt):
        out = []
        for turn in range(turns):
            for _ in range((index + turn) % 3):  # stagger: rows join running batches
                await asyncio.sleep(0.001)
            completion = await engine.generate(prompt, sampling)
            out.append((list(prompt), completion))
            prompt = prompt + completion.token_ids + delta
        return out

    return await asyncio.gather(*(one(i, p) for i, p in enumerate(starts)))


def _run(model, tok, cache_bytes, seed_base=0):
    starts = [tok.encode(text) for text in ("P F\nF G", "F F H\nG", "hello there", "H")]
    sampling = [
        SamplingParams(temperature=1.0, max_tokens=6 + i, seed=seed_base + i, ignore_eos=True)
        for i in range(len(starts))
    ]

    async def run():
        engine = HFEngine(model, tok, prefix_cache_bytes=cache_bytes)
        results = await asyncio.gather(
            *(
                _conversations(engine, [start], 4, params, tok.encode("\nok:"))
                for start, params in zip(starts, sampling, strict=True)
            )
        )
        await engine.close()
        return [turns for (turns,) in results], engine.stats

    return asyncio.run(run())


def test_later_turns_reuse_the_cache_and_keep_exact_logprobs(tiny):
    model, tok = tiny
    conversations, stats = _run(model, tok, 64 * 2**20)
    assert stats.prefix_hits == 4 * 3  # every turn after the first continued a kept cache
    assert stats.prefix_tokens > 0
    for turns in conversations:
        for prompt, completion in turns:
            expected = teacher_forced(model, prompt, completion, 1.0)
            got = torch.tensor(completion.logprobs)
            assert torch.allclose(got, expected, atol=1e-4), (got, expected)


def test_same_seeds_give_the_same_tokens_with_or_without_the_cache(tiny):
    model, tok = tiny
    cached, _ = _run(model, tok, 64 * 2**20)
    uncached, stats = _run(model, tok, 0)
    assert stats.prefix_hits == 0
    tokens = [[c.token_ids for _, c in turns] for turns in cached]
    assert tokens == [[c.token_ids for _, c in turns] for turns in uncached]


def test_a_weight_update_drops_the_kept_caches(tiny):
    _, tok = tiny
    model, _ = load(seed=0)
    other, _ = load(seed=1)
    prompt = tok.encode("P F\nF G")
    sampling = SamplingParams(temperature=1.0, max_tokens=8, seed=3, ignore_eos=True)

    async def run():
        engine = HFEngine(model, tok)
        first = await engine.generate(prompt, sampling)
        await engine.update_weights(other.state_dict())
        follow = prompt + first.token_ids + tok.encode(" next")
        second = await engine.generate(follow, sampling)
        await engine.close()
        return follow, second, engine.stats

    follow, second, stats = asyncio.run(run())
    assert stats.prefix_hits == 0  # the first turn's cache was computed by the old weights
    expected = teacher_forced(other, follow, second, 1.0)
    assert torch.allclose(torch.tensor(second.logprobs), expected, atol=1e-4)


def test_a_prompt_seen_before_prefills_only_its_last_token_with_exact_logprobs(tiny):
    # FrozenLake without history: a square visited again is the same prompt. The prompt's cache
    # is kept when its row finishes, and every later request with that prompt (or one that
    # starts with it) reuses it, not once only.
    model, tok = tiny
    prompt = tok.encode("P F\nF G\nwhere now?")
    longer = prompt + tok.encode(" and then")
    requests = [(prompt, 1), (prompt, 2), (longer, 3), (prompt, 4)]

    async def run(cache_bytes):
        engine = HFEngine(model, tok, prefix_cache_bytes=cache_bytes)
        out = []
        for ids, seed in requests:  # one after another: each finds the ones before kept
            params = SamplingParams(temperature=1.0, max_tokens=5, seed=seed, ignore_eos=True)
            out.append(await engine.generate(ids, params))
        await engine.close()
        return out, engine.stats

    cached, stats = asyncio.run(run(64 * 2**20))
    plain, plain_stats = asyncio.run(run(0))
    assert stats.prefix_hits == 3  # all but the first
    assert stats.prefill_tokens == len(prompt) + 1 + (len(longer) - len(prompt) + 1) + 1
    assert plain_stats.prefill_tokens == 3 * len(prompt) + len(longer)
    for (ids, _), got, ref in zip(requests, cached, plain, strict=True):
        assert got.token_ids == ref.token_ids  # same seeds, same samples
        expected = teacher_forced(model, ids, got, 1.0)
        assert torch.allclose(torch.tensor(got.logprobs), expected, atol=1e-4)


def test_a_reusable_entry_stays_when_taken():
    cache = PrefixCache(max_bytes=10**6)
    cache.put([1, 2, 3], _kv(3), reusable=True)
    cache.put([5, 6], _kv(2))
    for _ in range(3):
        assert cache.take([1, 2, 3, 4])[0] == 3
    assert cache.take([5, 6, 7])[0] == 2
    assert cache.take([5, 6, 7]) is None  # the other kind is used once
    assert len(cache) == 1
    assert cache.hits == 4


def _kv(tokens: int, heads: int = 2, dim: int = 4):
    return [(torch.zeros(1, heads, tokens, dim), torch.zeros(1, heads, tokens, dim))]


def test_prefix_cache_takes_the_longest_proper_prefix_once():
    cache = PrefixCache(max_bytes=10**6)
    cache.put([1, 2], _kv(2))
    cache.put([1, 2, 3, 4], _kv(4))
    cache.put([9, 9, 9], _kv(3))
    assert cache.take([1, 2, 3, 4]) is not None  # [1, 2]: an equal-length match leaves nothing
    assert cache.take([1, 2, 3, 4, 5])[0] == 4
    assert cache.take([1, 2, 3, 4, 5]) is None  # each entry is used once
    assert cache.take([7, 1, 2, 3]) is None
    assert len(cache) == 1
    assert cache.hits == 2


def test_prefix_cache_evicts_the_oldest_past_its_budget():
    one = 2 * 2 * 10 * 4 * 4  # keys + values of 10 tokens, float32
    cache = PrefixCache(max_bytes=2 * one)
    for start in range(3):
        cache.put(list(range(start, start + 10)), _kv(10))
    assert len(cache) == 2
    assert cache.bytes == 2 * one
    assert cache.take(list(range(0, 11))) is None  # the oldest went first
    assert cache.take(list(range(2, 13))) is not None
    cache.put(list(range(100)), _kv(100))  # larger than the whole budget: not kept
    assert cache.bytes <= cache.max_bytes


def test_prefix_cache_bytes_is_validated(tiny):
    model, tok = tiny
    with pytest.raises(ConfigError, match="prefix_cache_bytes"):
        HFEngine(model, tok, prefix_cache_bytes=-1)


def test_prefix_cache_lookups_match_a_scan_of_every_entry_through_puts_takes_and_evictions():
    # The index by (length, last token) must find what a plain scan finds: the longest proper
    # prefix still kept, through evictions, re-puts of the same tokens and takes.
    rng = random.Random(0)
    one = 2 * 2 * 4 * 4  # bytes per token of _kv
    cache = PrefixCache(max_bytes=40 * 8 * one)  # ~40 entries of 8 tokens
    kept: dict[tuple[int, ...], int] = {}  # tokens -> insertion order (the reference)
    order = 0
    for _ in range(2000):
        tokens = tuple(rng.randrange(3) for _ in range(rng.randrange(1, 12)))
        if rng.random() < 0.5:
            cache.put(list(tokens), _kv(len(tokens)))
            kept.pop(tokens, None)
            kept[tokens] = order = order + 1
            while sum(len(t) for t in kept) * one > cache.max_bytes:
                del kept[min(kept, key=kept.__getitem__)]
        else:
            proper = [t for t in kept if len(t) < len(tokens) and tokens[: len(t)] == t]
            expected = max(proper, key=len) if proper else None
            found = cache.take(list(tokens))
            assert (found and found[0]) == (expected and len(expected))
            if expected is not None:
                assert found[1][0][0].shape[2] == len(expected)
                del kept[expected]
        assert len(cache) == len(kept)
        assert cache.bytes == sum(len(t) for t in kept) * one
