"""The fixed-shape decode step (what CUDA graphs replay on a GPU) run eagerly on the CPU: exact
logprobs through joins, retirements, bucket changes and slab growth; the prefix cache and
weight updates keep working; its modes are validated."""

from __future__ import annotations

import asyncio

import pytest
import torch

from agentgym.error import ConfigError
from agentgym.inference import HFEngine, SamplingParams
from agentgym.inference._static import _COLUMNS
from agentgym.models import load

from .test_hf_engine import _staggered, teacher_forced

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    model, tok = load(seed=0)
    with torch.no_grad():
        model.model.norm.weight.mul_(8)  # sharper distributions: top-k / top-p cut real mass
    return model, tok


def _requests(count: int, seed: int = 0) -> list[tuple[list[int], SamplingParams]]:
    generator = torch.Generator().manual_seed(seed)
    settings = [(1.0, 0, 1.0), (0.7, 40, 1.0), (1.3, 0, 0.9), (0.0, 0, 1.0)]
    requests = []
    for i in range(count):
        length = int(torch.randint(1, 40, (1,), generator=generator))
        prompt = torch.randint(3, 1260, (length,), generator=generator).tolist()
        temperature, top_k, top_p = settings[i % len(settings)]
        sampling = SamplingParams(
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            max_tokens=3 + (5 * i) % 17,
            seed=i,
            ignore_eos=True,
        )
        requests.append((prompt, sampling))
    return requests


def _run(model, tok, requests, delays, **options):
    async def go():
        engine = HFEngine(model, tok, **options)
        try:
            outs = await _staggered(engine, requests, delays)
            return outs, engine.stats
        finally:
            await engine.close()

    return asyncio.run(go())


def _assert_exact(model, requests, completions):
    for (prompt, sampling), completion in zip(requests, completions, strict=True):
        assert len(completion.token_ids) == sampling.max_tokens
        expected = teacher_forced(model, prompt, completion, sampling)
        torch.testing.assert_close(torch.tensor(completion.logprobs), expected, rtol=0, atol=1e-4)


def test_static_logprobs_match_a_teacher_forced_pass_through_joins_and_leaves(tiny):
    model, tok = tiny
    requests = _requests(11)
    delays = [0, 0, 1, 2, 2, 3, 5, 5, 6, 9, 12]  # joins mid-batch; rows leave at their max
    static, stats = _run(model, tok, requests, delays, max_batch_size=5, decode="static")
    assert stats.decode == "static"
    assert stats.joins > 0
    _assert_exact(model, requests, static)
    eager, _ = _run(model, tok, requests, delays, max_batch_size=5, decode="eager")
    # same seeds, same distributions to float rounding: the same tokens
    assert [c.token_ids for c in static] == [c.token_ids for c in eager]


def test_the_slab_grows_past_its_columns_and_stays_exact(tiny):
    model, tok = tiny
    long_prompt = torch.randint(3, 1260, (_COLUMNS - 5,), generator=torch.Generator()).tolist()
    sampling = SamplingParams(temperature=1.0, max_tokens=12, seed=3, ignore_eos=True)
    requests = [(long_prompt, sampling), ([5, 6, 7], sampling)]
    outs, _ = _run(model, tok, requests, [0, 0], decode="static")
    _assert_exact(model, requests, outs)


def test_the_prefix_cache_and_weight_updates_work_with_static_decode(tiny):
    model, tok = tiny
    first = SamplingParams(temperature=1.0, max_tokens=6, seed=1, ignore_eos=True)
    engine_model, _ = load(seed=0)
    engine_model.load_state_dict(model.state_dict())

    async def go():
        engine = HFEngine(engine_model, tok, decode="static")
        try:
            one = await engine.generate([5, 6, 7, 8], first)
            prompt = [5, 6, 7, 8, *one.token_ids, 9, 10]
            two = await engine.generate(prompt, first)
            hits = engine.stats.prefix_hits
            with torch.no_grad():  # the trainer's in-place step, then the push
                for p in engine_model.parameters():
                    p.mul_(1.01)
            await engine.update_weights(engine_model.state_dict())
            three = await engine.generate(prompt, first)
            return prompt, two, hits, three, engine.stats.weights_copied
        finally:
            await engine.close()

    prompt, two, hits, three, copied = asyncio.run(go())
    assert hits == 1
    assert copied == 0  # the model's own tensors: a version bump
    torch.testing.assert_close(
        torch.tensor(three.logprobs),
        teacher_forced(engine_model, prompt, three, first),
        rtol=0,
        atol=1e-4,
    )
    assert three.weight_version == 1
    assert two.logprobs != three.logprobs


@pytest.mark.parametrize(
    ("decode", "match"),
    [("fast", "is not one of"), ("graphs", "CUDA device"), ("compiled", "CUDA device")],
)
def test_decode_modes_are_validated(tiny, decode, match):
    model, tok = tiny
    with pytest.raises(ConfigError, match=match):
        HFEngine(model, tok, decode=decode)


def test_auto_on_a_cpu_keeps_the_fused_eager_step(tiny):
    model, tok = tiny
    outs, stats = _run(model, tok, _requests(2), [0, 0])
    assert stats.decode == "fused"
    assert all(outs)
