"""SamplingParams validation and the sampling distribution, against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from agentgym.error import ConfigError
from agentgym.inference import SamplingParams, sample_rows, sampling_logprobs


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
