"""SamplingParams validation and the sampling distribution, against hand-computed values."""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest
import torch

from agentgym.error import ConfigError
from agentgym.inference import (
    OpenAIEngine,
    SamplingParams,
    SGLangEngine,
    choice_next_tokens,
    sample_rows,
    sampling_logprobs,
)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": math.inf}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -2}, "top_k"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stop": ["ok", ""]}, "stop"),
        ({"stop_token_ids": [-1]}, "stop_token_ids"),
    ],
)
def test_bad_values_are_rejected_at_construction(kwargs, name):
    with pytest.raises(ConfigError) as error:
        SamplingParams(**kwargs)
    assert error.value.name == name
    assert "Fix:" in str(error.value)


def test_stop_accepts_a_string_or_a_list():
    assert SamplingParams(stop="\n").stop == ("\n",)
    assert SamplingParams(stop=["a", "b"], stop_token_ids=[3]).stop == ("a", "b")
    assert SamplingParams(temperature=0).greedy
    assert not SamplingParams(top_k=-1).filtered


LOGITS = torch.tensor([2.0, 1.0, 0.0, -1.0])


def _expected(kept: list[int], scaled: torch.Tensor) -> torch.Tensor:
    out = torch.full_like(scaled, -math.inf)
    out[kept] = scaled[kept] - torch.logsumexp(scaled[kept], 0)
    return out


def test_temperature_only_is_a_scaled_log_softmax():
    torch.testing.assert_close(sampling_logprobs(LOGITS, 0.5), torch.log_softmax(LOGITS / 0.5, 0))


def test_top_k_keeps_the_k_best_and_renormalises():
    torch.testing.assert_close(sampling_logprobs(LOGITS, 1.0, top_k=2), _expected([0, 1], LOGITS))


def test_top_p_keeps_tokens_until_the_mass_above_reaches_p():
    # softmax([2, 1, 0, -1]) = [0.644, 0.237, 0.087, 0.032]: the mass above tokens 1 and 2 is
    # 0.644 and 0.881.
    torch.testing.assert_close(
        sampling_logprobs(LOGITS, 1.0, top_p=0.85), _expected([0, 1], LOGITS)
    )
    torch.testing.assert_close(
        sampling_logprobs(LOGITS, 1.0, top_p=0.9), _expected([0, 1, 2], LOGITS)
    )
    torch.testing.assert_close(sampling_logprobs(LOGITS, 1.0, top_p=0.6), _expected([0], LOGITS))


def test_greedy_reports_the_unscaled_unfiltered_distribution():
    torch.testing.assert_close(
        sampling_logprobs(LOGITS, 0.0, top_k=1, top_p=0.1), torch.log_softmax(LOGITS, 0)
    )


def test_per_row_parameters():
    logits = torch.stack([LOGITS, LOGITS.flip(0)])
    out = sampling_logprobs(
        logits, torch.tensor([1.0, 2.0]), torch.tensor([2, 0]), torch.tensor([1.0, 1.0])
    )
    torch.testing.assert_close(out[0], _expected([0, 1], LOGITS))
    torch.testing.assert_close(out[1], torch.log_softmax(LOGITS.flip(0) / 2, 0))


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
def test_one_setting_for_all_rows_gives_what_per_row_tensors_give(temperature):
    logits = torch.randn(3, 50) * 3
    rows = logits.shape[0]
    per_row = sampling_logprobs(
        logits,
        torch.full((rows,), temperature),
        torch.zeros(rows, dtype=torch.long),
        torch.ones(rows),
    )
    torch.testing.assert_close(sampling_logprobs(logits, temperature), per_row, rtol=0, atol=1e-6)


def test_sample_rows_draws_from_the_distribution_with_each_rows_generator():
    logp = sampling_logprobs(LOGITS.expand(2, 4), 1.0, top_k=2)
    counts = torch.zeros(4)
    gen = torch.Generator().manual_seed(0)
    for _ in range(2000):
        counts[sample_rows(logp[:1], [False], [gen])[0]] += 1
    assert counts[2:].sum() == 0
    assert abs(counts[0] / 2000 - math.exp(logp[0, 0].item())) < 0.04
    assert sample_rows(logp, [True, True], [None, None]).tolist() == [0, 0]
    a = sample_rows(
        logp, [False, False], [torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)]
    )
    assert a[0] == a[1]


def test_sample_rows_frequencies_match_the_distribution_and_skip_tokens_without_mass():
    probs = torch.tensor([0.0, 0.1, 0.0, 0.6, 0.3, 0.0])  # no mass at either end
    logp = probs.log().expand(4, 6)
    gens = [torch.Generator().manual_seed(seed) for seed in range(4)]
    counts = torch.zeros(6)
    for _ in range(1000):
        for token in sample_rows(logp, [False] * 4, gens).tolist():
            counts[token] += 1
    assert counts[[0, 2, 5]].sum() == 0
    assert torch.allclose(counts / counts.sum(), probs, atol=0.03)


CHOICES = [(5, 1, 9), (5, 2), (5, 1, 7, 2), (6,), (5, 1, 7, 3)]


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ((), [5, 6]),
        ((5,), [1, 2]),
        ((5, 1), [7, 9]),
        ((5, 1, 7), [2, 3]),  # shared by two choices, each id listed once
        ((5, 2), []),  # a complete choice
        ((6,), []),
        ((5, 1, 9, 4), []),  # past a complete choice
        ((4,), []),  # on no choice's path
        ((5, 3), []),
    ],
)
def test_choice_next_tokens_walks_the_choice_trie(prefix, expected):
    assert choice_next_tokens(CHOICES, prefix) == expected
    assert choice_next_tokens([list(c) for c in reversed(CHOICES)], list(prefix)) == expected


def test_choice_next_tokens_without_choices_is_empty():
    assert choice_next_tokens([], []) == []


def test_choices_are_coerced_to_tuples_of_ints():
    params = SamplingParams(choices=[[5, 1, 9], torch.tensor([5, 2]).tolist(), (6,)], max_tokens=3)
    assert params.choices == ((5, 1, 9), (5, 2), (6,))
    assert all(type(t) is int for choice in params.choices for t in choice)
    assert SamplingParams().choices == ()


@pytest.mark.parametrize(
    ("kwargs", "value", "rule", "fix"),
    [
        ({"choices": [[3, 4], []]}, "choices=()", "non-empty", "drop the empty choice"),
        ({"choices": [[3, -1]]}, "choices=(3, -1)", ">= 0", "ids from the tokenizer"),
        ({"choices": [[3, 4], [8], [3, 4]]}, "choices=(3, 4)", "twice", "each choice once"),
        (
            {"choices": [[3, 4, 2], [3, 4]]},
            "choices=((3, 4), (3, 4, 2))",
            "prefix-free",
            "end each choice with the EOS id",
        ),
        (
            {"choices": [[3, 4, 2], [9]], "max_tokens": 2},
            "max_tokens=2",
            "longest choice (3 tokens)",
            "raise max_tokens to 3",
        ),
        ({"choices": [1, 2]}, "choices=[1, 2]", "token-id sequences", "pass e.g."),
    ],
)
def test_bad_choices_are_rejected_naming_the_value_and_the_fix(kwargs, value, rule, fix):
    with pytest.raises(ConfigError) as error:
        SamplingParams(**kwargs)
    assert error.value.name == value.split("=")[0]
    named, fix_part = str(error.value).split(". Fix: ")
    assert named.startswith(f"{value}: ")
    assert rule in named
    assert fix in fix_part


def test_engines_that_cannot_constrain_decoding_refuse_choices():
    def unreachable(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no request should be sent, got {request.url}")

    transport = httpx.MockTransport(unreachable)
    constrained = SamplingParams(choices=[[3, 4]])
    engines = [
        SGLangEngine("http://sglang:30000", transport=transport),
        OpenAIEngine("http://fake/v1", "m", transport=transport),
    ]

    async def run():
        for engine in engines:
            with pytest.raises(ConfigError, match="HFEngine only") as error:
                await engine.generate([1, 2], constrained)
            assert error.value.name == "choices"
        with pytest.raises(ConfigError, match="HFEngine only"):
            await engines[1].chat([{"role": "user", "content": "hi"}], constrained)

    asyncio.run(run())
