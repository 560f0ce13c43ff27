import pytest
import torch

from agentgym.error import ConfigError, DynamicSamplingExhausted, Error
from agentgym.trainers.algorithms import DynamicSampler, informative_groups, overlong_penalty

F64 = torch.float64


def test_overlong_penalty_hand_computed() -> None:
    # L_max = 20, L_cache = 5: no penalty up to 15, linear to −1 at 20, −1 beyond.
    lengths = torch.tensor([10, 15, 16, 18, 20, 21])
    got = overlong_penalty(lengths, max_length=20, cache_length=5)
    # 16: (15 − 16)/5 = −0.2;  18: (15 − 18)/5 = −0.6;  20: (15 − 20)/5 = −1
    expected = torch.tensor([0.0, 0.0, -0.2, -0.6, -1.0, -1.0])
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    half = overlong_penalty(lengths.to(F64), max_length=20, cache_length=5, factor=0.5)
    expected_half = torch.tensor([0.0, 0.0, -0.1, -0.3, -0.5, -0.5], dtype=F64)
    torch.testing.assert_close(half, expected_half, atol=1e-12, rtol=0)


def test_overlong_penalty_rejects_a_cache_longer_than_the_budget() -> None:
    with pytest.raises(ConfigError, match="cache_length=30"):
        overlong_penalty(torch.tensor([1]), max_length=20, cache_length=30)


def test_informative_groups() -> None:
    rewards = torch.tensor(
        [[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.5, 0.5001]], dtype=F64
    )
    assert informative_groups(rewards).tolist() == [False, True, False, True]
    assert informative_groups(rewards, atol=1e-3).tolist() == [False, True, False, False]


def test_dynamic_sampler_refills_and_drops_the_surplus() -> None:
    sampler: DynamicSampler[str] = DynamicSampler(target_groups=3, max_rounds=3)
    first = torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    assert sampler.add(["a", "b", "c", "d"], first) is None  # keeps b, d
    second = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert sampler.add(["e", "f"], second) == ["b", "d", "e"]  # f is surplus
    assert sampler.last_stats == {
        "dynamic_sampling/rounds": 2.0,
        "dynamic_sampling/groups_seen": 6.0,
        "dynamic_sampling/informative_fraction": 4 / 6,
        "dynamic_sampling/groups_kept": 3.0,
    }
    # The next training step starts from an empty batch.
    assert sampler.add(["g"], torch.tensor([[0.0, 1.0]])) is None
    assert sampler.rounds == 1


def test_dynamic_sampler_raises_when_the_cap_is_hit_then_starts_over() -> None:
    sampler: DynamicSampler[int] = DynamicSampler(target_groups=2, max_rounds=2)
    same = torch.ones(2, 4)
    assert sampler.add([0, 1], same) is None
    with pytest.raises(DynamicSamplingExhausted) as caught:
        sampler.add([2, 3], same)
    err = caught.value
    assert isinstance(err, Error)
    assert (err.kept, err.target, err.rounds, err.seen) == (0, 2, 2, 4)
    assert "max_sampling_rounds" in str(err)
    assert sampler.add([4, 5], torch.tensor([[0.0, 1.0], [1.0, 0.0]])) == [4, 5]


def test_partial_dynamic_sampler_returns_what_it_kept_at_the_cap() -> None:
    sampler: DynamicSampler[str] = DynamicSampler(target_groups=3, max_rounds=2, partial=True)
    assert sampler.add(["a", "b"], torch.tensor([[1.0, 1.0], [0.0, 1.0]])) is None
    assert sampler.add(["c", "d"], torch.tensor([[1.0, 1.0], [1.0, 1.0]])) == ["b"]
    assert sampler.last_stats["dynamic_sampling/groups_kept"] == 1.0
    assert sampler.last_stats["dynamic_sampling/rounds"] == 2.0
    assert sampler.take_seen() == ["a", "b", "c", "d"]
    assert sampler.take_seen() == []  # handed over once
    # Nothing kept: an empty batch (nothing to train on), and the sampler starts over.
    assert sampler.add(["e"], torch.ones(1, 2)) is None
    assert sampler.add(["f"], torch.ones(1, 2)) == []
    assert sampler.last_stats["dynamic_sampling/groups_kept"] == 0.0
    assert sampler.take_seen() == ["e", "f"]
    assert sampler.add(["g"], torch.tensor([[0.0, 1.0]])) is None  # a new step's first round


def test_dynamic_sampler_checks_its_arguments() -> None:
    with pytest.raises(ConfigError, match="max_rounds=0"):
        DynamicSampler(target_groups=1, max_rounds=0)
    sampler: DynamicSampler[str] = DynamicSampler(target_groups=1, max_rounds=1)
    with pytest.raises(ConfigError, match=r"rewards\.shape"):
        sampler.add(["a", "b"], torch.ones(3, 2))
