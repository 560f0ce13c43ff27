"""HFEngine: exact sampling logprobs under dynamic batching, stops, seeds, weight updates."""

from __future__ import annotations

import asyncio

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym.core.aio import run_sync
from agentgym.error import ConfigError
from agentgym.inference import EngineClosedError, HFEngine, SamplingParams, sampling_logprobs
from agentgym.inference._batch import MIN_SHARED_PREFIX
from agentgym.models import load, tiny_config

torch.set_num_threads(1)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread for this module's tests, whatever a module run before set."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny():
    model, tok = load(seed=0)
    # Sharpen the random init (logit std ~0.2 -> ~2) so top-k / top-p cut real mass.
    with torch.no_grad():
        model.model.norm.weight.mul_(8)
    return model, tok


def teacher_forced(model, prompt, completion, sampling):
    """Per-token sampling logprobs of ``completion`` from one unbatched forward pass."""
    ids = torch.tensor([prompt + completion.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1]
    logp = sampling_logprobs(logits, sampling.temperature, sampling.top_k, sampling.top_p)
    return logp.gather(-1, torch.tensor(completion.token_ids)[:, None])[:, 0]


async def _staggered(engine, requests, delays):
    async def one(prompt, sampling, delay):
        for _ in range(delay):  # join the batch after `delay` decode steps have run
            await asyncio.sleep(0.002)
        return await engine.generate(prompt, sampling)

    return await asyncio.gather(*(one(p, s, d) for (p, s), d in zip(requests, delays, strict=True)))


_request = st.tuples(
    st.lists(st.integers(3, 1260), min_size=1, max_size=40),
    st.builds(
        SamplingParams,
        temperature=st.sampled_from([0.0, 0.6, 1.0, 1.4]),
        top_k=st.sampled_from([0, 3, 40]),
        top_p=st.sampled_from([1.0, 0.9, 0.5]),
        max_tokens=st.integers(1, 24),
        seed=st.integers(0, 2**31),
        ignore_eos=st.booleans(),
    ),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(requests=st.lists(_request, min_size=1, max_size=6), data=st.data())
def test_logprobs_match_a_teacher_forced_forward(tiny, requests, data):
    model, tok = tiny
    delays = data.draw(st.lists(st.integers(0, 6), min_size=len(requests), max_size=len(requests)))

    async def run():
        engine = HFEngine(model, tok, max_batch_size=4)
        try:
            return await _staggered(engine, requests, delays)
        finally:
            await engine.close()

    for (prompt, sampling), completion in zip(requests, asyncio.run(run()), strict=True):
        assert 1 <= len(completion.token_ids) <= sampling.max_tokens
        assert len(completion.logprobs) == len(completion.token_ids)
        expected = teacher_forced(model, prompt, completion, sampling)
        assert torch.isfinite(expected).all()  # every sampled token is in the filtered support
        torch.testing.assert_close(torch.tensor(completion.logprobs), expected, rtol=0, atol=1e-4)


def test_greedy_matches_model_generate(tiny):
    model, tok = tiny
    prompts = [tok.encode(t) for t in ("P F F\nF H G", "Hello", "def add(x, y):\n    return")]
    sampling = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)

    async def run():
        engine = HFEngine(model, tok)
        outs = await asyncio.gather(*(engine.generate(p, sampling) for p in prompts))
        await engine.close()
        return outs

    for prompt, out in zip(prompts, asyncio.run(run()), strict=True):
        ref = model.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            do_sample=False,
            max_new_tokens=12,
            min_new_tokens=12,
            pad_token_id=0,
        )
        assert out.token_ids == ref[0, len(prompt) :].tolist()
        assert out.finish_reason == "length"


def test_a_seed_gives_the_same_tokens_alone_or_in_a_batch(tiny):
    model, tok = tiny
    prompt = tok.encode("You are at row 1, column 1.")
    seeded = SamplingParams(temperature=1.0, max_tokens=16, seed=42, ignore_eos=True)

    async def run():
        engine = HFEngine(model, tok)
        alone = await engine.generate(prompt, seeded)
        others = [
            engine.generate(tok.encode("x" * n), SamplingParams(max_tokens=20)) for n in (1, 9)
        ]
        crowded = await asyncio.gather(engine.generate(prompt, seeded), *others)
        unseeded = await asyncio.gather(
            *(
                engine.generate(prompt, SamplingParams(max_tokens=16, ignore_eos=True))
                for _ in range(2)
            )
        )
        await engine.close()
        return alone, crowded[0], unseeded

    alone, crowded, unseeded = asyncio.run(run())
    assert alone.token_ids == crowded.token_ids
    assert unseeded[0].token_ids != unseeded[1].token_ids


def test_identical_prompts_joining_together_are_prefilled_once(tiny):
    model, tok = tiny
    prompt, other = tok.encode("You are at row 1, column 1."), tok.encode("Goal?")
    seeded = [
        SamplingParams(temperature=1.0, max_tokens=8, seed=seed, ignore_eos=True)
        for seed in range(4)
    ]

    async def run():
        engine = HFEngine(model, tok, prefix_cache_bytes=0)
        group = await asyncio.gather(
            *(engine.generate(prompt, s) for s in seeded), engine.generate(other, seeded[0])
        )
        prefilled = engine.stats.prefill_tokens
        alone = [await engine.generate(prompt, s) for s in seeded]
        await engine.close()
        return group, prefilled, alone

    group, prefilled, alone = asyncio.run(run())
    assert prefilled == len(prompt) + len(other)
    for together, by_itself, sampling in zip(group[:4], alone, seeded, strict=True):
        assert together.token_ids == by_itself.token_ids  # each row keeps its own generator
        torch.testing.assert_close(
            torch.tensor(together.logprobs),
            teacher_forced(model, prompt, together, sampling),
            rtol=0,
            atol=1e-4,
        )
    assert len({tuple(c.token_ids) for c in group[:4]}) > 1


def test_distinct_prompts_with_a_common_start_prefill_it_once(tiny):
    model, tok = tiny
    system = tok.encode("You are on a frozen lake. Reach the goal G without stepping in a hole.")
    boards = [tok.encode(board) for board in ("P F\nF G", "F P\nF G", "F F\nP G", "P")]
    prompts = [system + board for board in boards]
    seeded = [
        SamplingParams(temperature=1.0, max_tokens=8, seed=seed, ignore_eos=True)
        for seed in range(len(prompts))
    ]

    async def run():
        engine = HFEngine(model, tok, prefix_cache_bytes=0)
        together = await asyncio.gather(
            *(engine.generate(p, s) for p, s in zip(prompts, seeded, strict=True))
        )
        prefilled = engine.stats.prefill_tokens
        alone = [await engine.generate(p, s) for p, s in zip(prompts, seeded, strict=True)]
        await engine.close()
        return together, prefilled, alone

    together, prefilled, alone = asyncio.run(run())
    assert len(system) >= MIN_SHARED_PREFIX
    # the common start once, then each board; alone, each prompt in full
    assert prefilled == len(system) + sum(len(board) for board in boards)
    for prompt, joint, by_itself, sampling in zip(prompts, together, alone, seeded, strict=True):
        assert joint.token_ids == by_itself.token_ids
        torch.testing.assert_close(
            torch.tensor(joint.logprobs),
            teacher_forced(model, prompt, joint, sampling),
            rtol=0,
            atol=1e-4,
        )


def test_a_common_start_is_kept_for_prompts_that_join_later(tiny):
    """Prompts that arrive after the batch that shared their start (a server's requests, one at a
    time) prefill only their own tokens, and sample exactly what a full prefill gives."""
    model, tok = tiny
    system = tok.encode("You are on a frozen lake. Reach the goal G without stepping in a hole.")
    boards = [tok.encode(board) for board in ("P F\nF G", "F P\nF G", "F F\nP G", "F F\nG P")]
    first, later = [system + b for b in boards[:2]], [system + b for b in boards[2:]]
    seeded = [
        SamplingParams(temperature=1.0, max_tokens=6, seed=s, ignore_eos=True) for s in (3, 4)
    ]

    async def run(cache_bytes):
        engine = HFEngine(model, tok, prefix_cache_bytes=cache_bytes)
        await asyncio.gather(*(engine.generate(p, seeded[0]) for p in first))
        before = engine.stats.prefill_tokens
        joined = [await engine.generate(p, s) for p, s in zip(later, seeded, strict=True)]
        prefilled = engine.stats.prefill_tokens - before
        await engine.close()
        return joined, prefilled

    joined, prefilled = asyncio.run(run(256 * 2**20))
    full, full_prefilled = asyncio.run(run(0))
    assert len(system) >= MIN_SHARED_PREFIX
    assert full_prefilled == sum(len(p) for p in later)
    assert prefilled == sum(len(b) for b in boards[2:])  # the kept start is not run again
    for prompt, kept, plain, sampling in zip(later, joined, full, seeded, strict=True):
        assert kept.token_ids == plain.token_ids
        torch.testing.assert_close(
            torch.tensor(kept.logprobs),
            teacher_forced(model, prompt, kept, sampling),
            rtol=0,
            atol=1e-4,
        )


def test_stop_strings_stop_tokens_and_max_tokens(tiny):
    model, tok = tiny
    prompt = tok.encode("P F F F\nF H F G")
    greedy = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True)

    async def run():
        engine = HFEngine(model, tok)
        free = await engine.generate(prompt, greedy)
        text = tok.decode(free.token_ids[:8])
        stop = text[-3:] if text[-3:].strip() else text[-4:]
        by_string = await engine.generate(
            prompt, SamplingParams(temperature=0, max_tokens=20, stop=[stop], ignore_eos=True)
        )
        by_token = await engine.generate(
            prompt,
            SamplingParams(
                temperature=0, max_tokens=20, stop_token_ids=[free.token_ids[5]], ignore_eos=True
            ),
        )
        short = await engine.generate(
            prompt, SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
        )
        await engine.close()
        return free, stop, by_string, by_token, short

    free, stop, by_string, by_token, short = asyncio.run(run())
    assert by_string.finish_reason == "stop"
    assert by_string.stop == stop
    assert by_string.token_ids == free.token_ids[: len(by_string.token_ids)]
    assert stop in tok.decode(by_string.token_ids)
    assert stop not in tok.decode(by_string.token_ids[:-1])
    assert stop not in by_string.text
    first = free.token_ids.index(free.token_ids[5])
    assert by_token.token_ids == free.token_ids[: first + 1]
    assert by_token.stop == free.token_ids[5]
    assert short.token_ids == free.token_ids[:3]
    assert short.finish_reason == "length"


def test_eos_ends_a_completion_and_is_kept(tiny):
    _, tok = tiny
    eos_model, _ = load(seed=0)
    head = torch.nn.Linear(eos_model.config.hidden_size, len(tok))  # always prefers <|im_end|>
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[tok.eos_token_id] = 10.0
    eos_model.lm_head = head

    async def run():
        engine = HFEngine(eos_model, tok)
        out = await engine.generate(tok.encode("hi"), SamplingParams(temperature=0, max_tokens=5))
        await engine.close()
        return out

    out = asyncio.run(run())
    assert out.finish_reason == "stop"
    assert out.token_ids[-1] == tok.eos_token_id == out.stop


def test_requests_arriving_mid_batch_join_it(tiny):
    model, tok = tiny

    async def run():
        engine = HFEngine(model, tok, max_batch_size=8)
        long = asyncio.ensure_future(
            engine.generate(tok.encode("a"), SamplingParams(max_tokens=60, ignore_eos=True))
        )
        while engine.stats.steps < 3:
            await asyncio.sleep(0.001)
        shorts = await asyncio.gather(
            *(
                engine.generate(tok.encode("b" * n), SamplingParams(max_tokens=4, ignore_eos=True))
                for n in (1, 5, 9)
            )
        )
        assert not long.done()  # the short ones ran alongside the long one, not after it
        result = await long
        await engine.close()
        return engine.stats, shorts, result

    stats, shorts, result = asyncio.run(run())
    assert stats.joins >= 1
    assert stats.max_rows >= 2
    assert [len(s.token_ids) for s in shorts] == [4, 4, 4]
    assert len(result.token_ids) == 60


def test_max_batch_size_queues_the_rest(tiny):
    model, tok = tiny

    async def run():
        engine = HFEngine(model, tok, max_batch_size=2)
        outs = await asyncio.gather(
            *(
                engine.generate(tok.encode("q"), SamplingParams(max_tokens=3, ignore_eos=True))
                for _ in range(5)
            )
        )
        await engine.close()
        return engine.stats, outs

    stats, outs = asyncio.run(run())
    assert stats.max_rows == 2
    assert all(len(o.token_ids) == 3 for o in outs)


def test_update_weights_in_place_after_the_running_batch(tiny):
    _, tok = tiny
    fresh, _ = load(seed=0)
    other, _ = load(seed=1)
    prompt = tok.encode("P F\nF G")
    greedy = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)

    async def run(engine_model, update):
        engine = HFEngine(engine_model, tok)
        param = engine_model.model.embed_tokens.weight
        running = asyncio.ensure_future(engine.generate(prompt, greedy))
        await asyncio.sleep(0.005)
        if update:
            await engine.update_weights(other.state_dict())
            assert engine_model.model.embed_tokens.weight is param  # copied in place
        after = await engine.generate(prompt, greedy)
        before = await running
        await engine.close()
        return before, after

    old_then, new = asyncio.run(run(fresh, update=True))
    reference_old, _ = asyncio.run(run(load(seed=0)[0], update=False))
    reference_new, _ = asyncio.run(run(load(seed=1)[0], update=False))
    assert old_then.token_ids == reference_old.token_ids
    assert old_then.weight_version == 0
    assert new.token_ids == reference_new.token_ids
    assert new.weight_version == 1


def test_update_weights_rejects_foreign_keys(tiny):
    _, tok = tiny

    async def run():
        engine = HFEngine(load()[0], tok)
        try:
            await engine.update_weights({"no.such.weight": torch.zeros(1)})
        finally:
            await engine.close()

    with pytest.raises(ConfigError, match=r"no\.such\.weight"):
        asyncio.run(run())


def test_update_weights_from_a_safetensors_checkpoint(tiny, tmp_path):
    _, tok = tiny
    other, _ = load(seed=3)
    other.save_pretrained(tmp_path)
    model, _ = load(seed=0)

    async def run():
        engine = HFEngine(model, tok)
        await engine.update_weights(tmp_path)
        await engine.close()

    asyncio.run(run())
    assert torch.equal(
        model.model.layers[0].mlp.up_proj.weight, other.model.layers[0].mlp.up_proj.weight
    )


def test_cancelled_and_closed_requests(tiny):
    model, tok = tiny

    async def run():
        engine = HFEngine(model, tok)
        doomed = asyncio.ensure_future(
            engine.generate(tok.encode("z"), SamplingParams(max_tokens=200, ignore_eos=True))
        )
        kept = asyncio.ensure_future(
            engine.generate(tok.encode("y"), SamplingParams(max_tokens=10, ignore_eos=True))
        )
        await asyncio.sleep(0.01)
        doomed.cancel()
        done = await kept
        pending = asyncio.ensure_future(
            engine.generate(tok.encode("w"), SamplingParams(max_tokens=500, ignore_eos=True))
        )
        await asyncio.sleep(0.01)
        await engine.close()
        aborted = await pending
        with pytest.raises(EngineClosedError):
            await engine.generate(tok.encode("v"), SamplingParams())
        return done, aborted

    done, aborted = asyncio.run(run())
    assert len(done.token_ids) == 10
    assert aborted.finish_reason == "abort"
    assert len(aborted.token_ids) < 500


def test_context_limit_and_bad_prompts(tiny):
    _, tok = tiny
    small, _ = load(config=tiny_config(max_position_embeddings=16))

    async def run():
        engine = HFEngine(small, tok)
        ends = await engine.generate(
            list(range(3, 13)), SamplingParams(max_tokens=50, ignore_eos=True)
        )
        full = await engine.generate(list(range(3, 19)), SamplingParams(max_tokens=50))
        with pytest.raises(ConfigError, match="empty"):
            await engine.generate([], SamplingParams())
        with pytest.raises(ConfigError, match="vocabulary"):
            await engine.generate([10**6], SamplingParams())
        await engine.close()
        return ends, full

    ends, full = asyncio.run(run())
    assert ends.finish_reason == "length"
    assert len(ends.token_ids) == 6
    assert full.finish_reason == "length"
    assert full.token_ids == []


def test_usable_from_sync_code_through_run_sync(tiny):
    model, tok = tiny
    engine = HFEngine(model, tok)
    out = run_sync(engine.generate(tok.encode("hi"), SamplingParams(max_tokens=2, ignore_eos=True)))
    again = run_sync(
        engine.generate(tok.encode("hi"), SamplingParams(max_tokens=2, ignore_eos=True))
    )
    run_sync(engine.close())
    assert len(out.token_ids) == len(again.token_ids) == 2


def _choice_logits(model, prompt, prefix):
    """The model's logits ``[V]`` for the token after ``prompt + prefix`` (unbatched)."""
    with torch.no_grad():
        return model(torch.tensor([prompt + prefix])).logits[0, -1].float()


def _four_choices(tok):
    """Four choices sharing their first token, decided by the second, ending with EOS."""
    first, seconds = 609, (274, 354, 467, 512)  # ordinary (non-special) tokens of the tiny vocab
    return [(first, second, tok.eos_token_id) for second in seconds]


def _generate_all(model, tok, requests, **engine_kwargs):
    async def run():
        engine = HFEngine(model, tok, **engine_kwargs)
        try:
            return await asyncio.gather(*(engine.generate(p, s) for p, s in requests))
        finally:
            await engine.close()

    return asyncio.run(run())


def test_choices_constrain_every_completion_with_renormalised_logprobs(tiny):
    model, tok = tiny
    prompt = tok.encode("You are at row 1, column 1.")
    choices = _four_choices(tok)
    assert len(choices) == 4
    samplings = [
        SamplingParams(temperature=t, seed=seed, choices=choices, max_tokens=3)
        for t in (0.7, 1.3)
        for seed in range(60)
    ]
    outs = _generate_all(model, tok, [(prompt, s) for s in samplings], max_batch_size=32)

    deciding = torch.tensor(sorted({c[1] for c in choices}))
    logits = _choice_logits(model, prompt, [choices[0][0]])[deciding]
    for sampling, out in zip(samplings, outs, strict=True):
        assert tuple(out.token_ids) in choices
        assert out.finish_reason == "stop"
        assert out.stop == tok.eos_token_id
        assert out.logprobs[0] == 0.0  # forced: the only allowed first token
        assert out.logprobs[2] == 0.0
        expected = torch.log_softmax(logits / sampling.temperature, 0)
        index = deciding.tolist().index(out.token_ids[1])
        assert out.logprobs[1] == pytest.approx(expected[index].item(), abs=1e-5)
    # Seeded draws follow the renormalised distribution (loose: 60 draws per temperature).
    hot = torch.tensor([deciding.tolist().index(o.token_ids[1]) for o in outs[60:]])
    freq = torch.bincount(hot, minlength=4).float() / 60
    torch.testing.assert_close(freq, torch.softmax(logits / 1.3, 0), rtol=0, atol=0.15)
    assert len({tuple(o.token_ids) for o in outs}) > 1


def test_greedy_choice_is_the_best_allowed_deciding_token(tiny):
    model, tok = tiny
    prompts = [tok.encode(t) for t in ("Hello", "P F F\nF H G", "def add(x, y):")]
    choices = _four_choices(tok)
    greedy = SamplingParams(temperature=0, choices=choices, max_tokens=3)
    outs = _generate_all(model, tok, [(p, greedy) for p in prompts])

    deciding = [c[1] for c in choices]
    for prompt, out in zip(prompts, outs, strict=True):
        logits = _choice_logits(model, prompt, [choices[0][0]])[deciding]
        best = deciding[int(logits.argmax())]
        assert out.token_ids == [choices[0][0], best, tok.eos_token_id]
        assert out.logprobs[1] == pytest.approx(logits.log_softmax(0).max().item(), abs=1e-5)
        assert out.logprobs[0] == out.logprobs[2] == 0.0


def test_top_k_applies_to_the_allowed_tokens_only(tiny):
    model, tok = tiny
    prompt = tok.encode("You are at row 1, column 1.")
    choices = _four_choices(tok)
    samplings = [
        SamplingParams(temperature=1.0, top_k=2, seed=seed, choices=choices, max_tokens=3)
        for seed in range(30)
    ]
    outs = _generate_all(model, tok, [(prompt, s) for s in samplings])

    deciding = torch.tensor([c[1] for c in choices])
    logits = _choice_logits(model, prompt, [choices[0][0]])[deciding]
    top2 = logits.topk(2).indices
    expected = dict(zip(deciding[top2].tolist(), logits[top2].log_softmax(0).tolist(), strict=True))
    for out in outs:
        assert out.token_ids[1] in expected  # the two best allowed, not the two best overall
        assert out.logprobs[1] == pytest.approx(expected[out.token_ids[1]], abs=1e-5)


def test_a_choice_runs_past_eos_inside_it_and_stops_at_its_end(tiny):
    model, tok = tiny
    only = (tok.eos_token_id, 17, 4)  # every token forced, EOS first
    sampling = SamplingParams(temperature=1.0, seed=3, choices=[only], max_tokens=8)
    (out,) = _generate_all(model, tok, [(tok.encode("hi"), sampling)])
    assert out.token_ids == list(only)
    assert out.logprobs == [0.0, 0.0, 0.0]
    assert out.finish_reason == "stop"
    assert out.stop == 4


def test_a_row_without_choices_samples_freely_beside_a_constrained_row(tiny):
    model, tok = tiny
    prompt = tok.encode("P F F F\nF H F G")
    free = [
        SamplingParams(temperature=0, max_tokens=12, ignore_eos=True),
        SamplingParams(temperature=1.0, seed=11, max_tokens=12, ignore_eos=True),
    ]
    constrained = SamplingParams(temperature=1.0, seed=2, choices=_four_choices(tok), max_tokens=3)
    alone = _generate_all(model, tok, [(prompt, s) for s in free])
    mixed = _generate_all(model, tok, [(prompt, constrained)] + [(prompt, s) for s in free])
    assert tuple(mixed[0].token_ids) in constrained.choices
    for by_itself, beside, sampling in zip(alone, mixed[1:], free, strict=True):
        assert beside.token_ids == by_itself.token_ids
        assert beside.finish_reason == "length"
        torch.testing.assert_close(
            torch.tensor(beside.logprobs),
            teacher_forced(model, prompt, beside, sampling),
            rtol=0,
            atol=1e-4,
        )


def test_choices_outside_the_vocabulary_are_rejected(tiny):
    model, tok = tiny
    sampling = SamplingParams(choices=[[3, 10**6]], max_tokens=2)

    async def run():
        engine = HFEngine(model, tok)
        try:
            await engine.generate(tok.encode("hi"), sampling)
        finally:
            await engine.close()

    with pytest.raises(ConfigError, match="vocabulary") as error:
        asyncio.run(run())
    assert error.value.name == "choices"


def test_threads_sets_the_workers_torch_threads(tiny):
    model, tok = tiny

    async def worker_threads(**kwargs):
        engine = HFEngine(model, tok, **kwargs)
        done = await engine.generate([5, 6, 7], SamplingParams(max_tokens=2, seed=0))
        # The worker runs every step; ask it from that same thread.
        threads = await asyncio.get_running_loop().run_in_executor(
            engine._executor, torch.get_num_threads
        )
        await engine.close()
        assert len(done.token_ids) == 2
        return threads

    assert torch.get_num_threads() == 1  # this module's setting
    assert asyncio.run(worker_threads()) == 1
    assert asyncio.run(worker_threads(threads=2)) == 2
    for bad in (0, 1.5, True):
        with pytest.raises(ConfigError, match="threads"):
            HFEngine(model, tok, threads=bad)
