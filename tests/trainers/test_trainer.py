"""``Trainer``: what enters a step, advantages, old-policy logprobs, learning, weight push, fit."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
import torch

from agentgym import models
from agentgym.core.info import OUTCOMES
from agentgym.core.types import Episode
from agentgym.error import ConfigError, DynamicSamplingExhausted
from agentgym.inference.hf import HFEngine
from agentgym.trainers import (
    DAPOConfig,
    GRPOConfig,
    TrainOptions,
    fit,
    make,
    make_config,
    update,
)
from agentgym.trainers.batch import TrainBatch
from agentgym.trainers.episodes import Sample, shape_rewards
from agentgym.trainers.losses import compute_advantages

from .ds_step import CONFIGS, NOT_COMPARED, SyntheticSource, fresh, synthetic_episodes


@pytest.fixture(scope="module")
def tiny():
    return models.load(seed=0)


def with_rewards(episodes: list[Episode], rewards: list[float]) -> list[Episode]:
    """Put ``rewards[i]`` on episode i's last turn (0 on its other turns)."""
    for episode, reward in zip(episodes, rewards, strict=True):
        for turn in episode.turns:
            turn.reward = 0.0
        episode.turns[-1].reward = reward
    return episodes


def test_make_resolves_presets_overrides_and_mismatches(tiny):
    trainer = make("grpo", policy=fresh(tiny), config={"group_size": 4, "batch_size": 8})
    assert isinstance(trainer.config, GRPOConfig)
    assert (trainer.config.group_size, trainer.config.kl_beta) == (4, 0.04)
    assert trainer.reference is not None  # kl_beta > 0 keeps a frozen reference
    with pytest.raises(ConfigError, match="not a config of algo 'grpo'"):
        make("grpo", policy=fresh(tiny), config=make_config("dapo"))
    with pytest.raises(ConfigError, match="tis_cap"):
        make(
            "grpo",
            policy=fresh(tiny),
            config={"tis_cap": 2.0},
            options=TrainOptions(old_logprobs="engine"),
        )
    with pytest.raises(ConfigError, match="old_logprobs"):
        TrainOptions(old_logprobs="sampler")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a trainer option"):
        make("grpo", policy=fresh(tiny), options={"warmup": 3})


def test_train_options_from_a_file_are_checked_and_betas_become_a_tuple():
    assert TrainOptions.from_dict({"adam_betas": [0.9, 0.95]}).adam_betas == (0.9, 0.95)
    for bad in ({"warmup_steps": "10"}, {"adam_eps": -1e-8}, {"weight_decay": True}):
        (name,) = bad
        with pytest.raises(ConfigError, match=name):
            TrainOptions.from_dict(bad)
    for betas in ([0.9], [0.9, 1.0], ["0.9", 0.99]):
        with pytest.raises(ConfigError, match="adam_betas"):
            TrainOptions.from_dict({"adam_betas": betas})
    with pytest.raises(ConfigError, match="critic_learning_rate"):
        TrainOptions.from_dict({"critic_learning_rate": "1e-5"})


def test_the_learning_rate_warms_up_then_falls_linearly_to_its_floor(tiny):
    from agentgym.trainers.trainer import lr_factor

    plain = lr_factor(TrainOptions())
    assert [plain(s) for s in (0, 10, 10_000)] == [1.0, 1.0, 1.0]
    schedule = lr_factor(TrainOptions(warmup_steps=2, decay_steps=4, min_lr_ratio=0.2))
    assert [schedule(s) for s in range(8)] == pytest.approx(
        [0.5, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
    )
    for bad in ({"decay_steps": -1}, {"min_lr_ratio": 1.5}, {"min_lr_ratio": "0.1"}):
        (name,) = bad
        with pytest.raises(ConfigError, match=name):
            TrainOptions.from_dict(bad)
    # the trainer's optimizer follows it, one scheduler step per optimizer step
    config = {"group_size": 4, "batch_size": 8, "learning_rate": 1e-3}
    trainer = make(
        "grpo", policy=fresh(tiny), config=config, options={"decay_steps": 2, "min_lr_ratio": 0.5}
    )
    rates = []
    for _ in range(3):
        rates.append(trainer.step(synthetic_episodes(2, 4, seed=1), push_weights=False)["lr"])
    assert rates == pytest.approx([1e-3, 7.5e-4, 5e-4])


def test_infra_errors_and_untrainable_episodes_drop_their_groups(tiny):
    trainer = make("grpo", policy=fresh(tiny), config={"group_size": 4, "batch_size": 12})
    episodes = synthetic_episodes(3, 4, seed=3)
    episodes[1].turns[-1].info["infra_error"] = True
    episodes[9].trainable = False
    episodes[5].turns[-1].info["timed_out"] = True  # the model's own timeout: scored, kept
    metrics = trainer.step(episodes)
    assert metrics["dropped_episodes"] == 2
    assert metrics["dropped_groups"] == 2
    assert metrics["episodes"] == 4
    assert metrics["update"] == 1
    # Each class's share of every episode collected, the dropped ones included.
    outcomes = {k: v for k, v in metrics.items() if k.startswith("outcome/")}
    assert set(outcomes) == {f"outcome/{name}" for name in OUTCOMES}
    assert outcomes["outcome/infra"] == outcomes["outcome/timeout"] == 1 / 12
    assert sum(outcomes.values()) == pytest.approx(1.0)
    expected = [e.outcome for e in episodes].count("failed") / 12
    assert outcomes["outcome/failed"] == pytest.approx(expected)
    before = {k: v.clone() for k, v in trainer.policy_state_dict().items()}
    nothing = trainer.step(episodes[:4] + episodes[8:])  # both groups broken
    assert nothing["update"] == 0
    assert trainer.step_count == 1
    for name, tensor in trainer.policy_state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_episode_advantage_covers_every_sampled_token_and_only_those():
    config = make_config("grpo", group_size=2, batch_size=2)
    episodes = with_rewards(synthetic_episodes(1, 2, seed=4), [1.0, 0.0])
    samples = [Sample(e, tuple(e.rewards)) for e in episodes]
    batch = TrainBatch.collate(episodes, pad_token_id=0)
    advantages = compute_advantages(config, samples, batch).advantages
    a = 0.5 / (2**-0.5 + 1e-6)  # (r - mean) / (sample std + eps)
    expected = torch.tensor([a, -a])[:, None] * batch.loss_mask
    torch.testing.assert_close(advantages, expected, atol=1e-6, rtol=0)


def test_per_turn_credit_gives_each_turn_its_return_to_go():
    config = make_config("grpo", group_size=2, batch_size=2, per_turn_credit=True)
    episodes = synthetic_episodes(1, 2, seed=5)
    for episode, rewards in zip(episodes, [(1.0, 0.0), (0.0, 0.0)], strict=True):
        for turn, reward in zip(episode.turns, rewards, strict=True):
            turn.reward = reward
    samples = [Sample(e, tuple(e.rewards)) for e in episodes]
    batch = TrainBatch.collate(episodes, pad_token_id=0)
    advantages = compute_advantages(config, samples, batch).advantages
    a = 0.5 / (2**-0.5 + 1e-6)  # episode returns 1 and 0: mean 0.5, std 0.707
    (s0, e0), (s1, e1) = episodes[0].turn_spans
    assert torch.allclose(advantages[0, s0:e0], torch.tensor(a))  # turn 1 earned the reward
    assert torch.allclose(advantages[0, s1:e1], torch.tensor(-a))  # turn 2 did not
    env = slice(e0, s1)
    assert torch.equal(advantages[0, env], torch.zeros(s1 - e0))


def test_kl_in_the_reward_is_summed_per_episode_for_group_advantages():
    config = make_config(
        "grpo", group_size=2, batch_size=2, kl_placement="reward", kl_estimator="k1"
    )
    episodes = with_rewards(synthetic_episodes(1, 2, seed=6), [1.0, 0.0])
    samples = [Sample(e, tuple(e.rewards)) for e in episodes]
    batch = TrainBatch.collate(episodes, pad_token_id=0)
    old = torch.zeros_like(batch.loss_mask)
    ref = torch.zeros_like(batch.loss_mask)
    first = batch.loss_mask[0].nonzero()[0, 0]
    ref[0, first] = -1.0 / config.kl_beta  # k1 = old − ref: episode 0's KL sums to 1 / β
    batch = batch.replace(old_logprobs=old, ref_logprobs=ref)
    advantages = compute_advantages(config, samples, batch).advantages
    assert torch.equal(advantages, torch.zeros_like(advantages))  # 1 − β·(1/β) = 0 = reward 1


def _two_turns_of(lengths: list[int]) -> Episode:
    episode = synthetic_episodes(1, 1, seed=7)[0]
    prompt = episode.turn_spans[0][0]
    episode.token_ids = episode.token_ids[:prompt] + [7] * sum(lengths)
    episode.loss_mask = [0] * prompt + [1] * sum(lengths)
    episode.logprobs = [0.0] * len(episode.token_ids)
    episode.turn_spans = [(prompt, prompt + lengths[0]), (prompt + lengths[0], prompt + 13)]
    return with_rewards([episode], [1.0])[0]


OVERLONG = {"group_size": 2, "batch_size": 2, "max_new_tokens": 10, "overlong_cache_length": 4}


def test_overlong_shaping_punishes_each_turn_past_the_expected_length():
    config = make_config("dapo", **OVERLONG)
    # expected length 10 − 4 = 6: turn 2 is 2 tokens over → −2/4
    [sample], penalty = shape_rewards([_two_turns_of([5, 8])], config)
    assert sample.turn_rewards == (0.0, 0.5)
    assert penalty is not None
    assert penalty.tolist() == [-0.5]


def test_dapo_techniques_are_read_from_dapo_configs_by_type():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class MyDAPO(DAPOConfig):
        pass

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class LookAlike(GRPOConfig):  # a field named like DAPO's does not make a config DAPO
        overlong_shaping: bool = True

    episode = _two_turns_of([5, 8])
    assert shape_rewards([episode], MyDAPO(**OVERLONG))[1] is not None
    assert shape_rewards([episode], LookAlike(group_size=2, batch_size=2))[1] is None


def test_dynamic_sampling_accumulates_informative_groups_until_the_batch_is_full(tiny):
    config = {"group_size": 4, "batch_size": 8, "max_sampling_rounds": 3}
    trainer = make("dapo", policy=fresh(tiny), config=config)
    mixed = with_rewards(synthetic_episodes(2, 4, seed=8), [1, 0, 0, 1, 1, 1, 1, 1])
    first = trainer.step(mixed)  # one informative group of the two needed
    assert first["update"] == 0
    assert trainer.step_count == 0
    second = trainer.step(with_rewards(synthetic_episodes(2, 4, seed=9), [0, 1, 0, 0] * 2))
    assert second["update"] == 1
    assert second["episodes"] == 8
    assert second["dynamic_sampling/rounds"] == 2
    # Reward over everything sampled in the two rounds (16 episodes, 8 rewarded), not only
    # over the two groups trained on (3 of 8).
    assert second["episodes_sampled"] == 16
    assert second["reward_mean"] == pytest.approx(8 / 16)
    same = [1.0] * 8
    trainer.step(with_rewards(synthetic_episodes(2, 4, seed=10), same))
    trainer.step(with_rewards(synthetic_episodes(2, 4, seed=11), same))
    with pytest.raises(DynamicSamplingExhausted):
        trainer.step(with_rewards(synthetic_episodes(2, 4, seed=12), same))


def test_partial_batches_train_on_the_groups_kept_at_the_cap(tiny):
    config = {"group_size": 4, "batch_size": 8, "max_sampling_rounds": 2, "partial_batches": True}
    trainer = make("dapo", policy=fresh(tiny), config=config)
    mixed = with_rewards(synthetic_episodes(2, 4, seed=8), [1, 0, 0, 1, 1, 1, 1, 1])
    assert trainer.step(mixed)["update"] == 0
    same = with_rewards(synthetic_episodes(2, 4, seed=9), [1.0] * 8)
    short = trainer.step(same)
    assert short["update"] == 1
    assert short["episodes"] == 4  # the one informative group
    assert short["dynamic_sampling/groups_kept"] == 1
    assert trainer.step_count == 1


def test_partial_batches_with_no_group_kept_count_an_update_without_a_step(tiny):
    config = {"group_size": 4, "batch_size": 8, "max_sampling_rounds": 2, "partial_batches": True}
    trainer = make("dapo", policy=fresh(tiny), config=config)
    before = {k: v.clone() for k, v in trainer.policy_state_dict().items()}
    won = with_rewards(synthetic_episodes(2, 4, seed=8), [1.0] * 8)
    lost = with_rewards(synthetic_episodes(2, 4, seed=9), [0.0] * 8)
    assert trainer.step(won)["update"] == 0  # the first round: sample more
    skipped = trainer.step(lost)
    assert skipped["update"] == 1
    assert skipped["optimizer_steps"] == 0
    assert skipped["episodes"] == 0
    assert skipped["episodes_sampled"] == 16
    assert skipped["reward_mean"] == pytest.approx(0.5)  # over all 16 sampled episodes
    assert trainer.step_count == 1
    for name, tensor in trainer.policy_state_dict().items():
        assert torch.equal(tensor, before[name]), name  # no optimizer step
    # The next step samples afresh and trains as usual.
    assert (
        trainer.step(with_rewards(synthetic_episodes(2, 4, seed=10), [0, 1, 0, 0] * 2))["update"]
        == 1
    )
    assert trainer.step_count == 2


def test_old_logprobs_from_the_engine_or_recomputed(tiny):
    episodes = synthetic_episodes(2, 4, seed=13)  # made-up sampling logprobs in [−9, −5]
    recomputed = make("grpo", policy=fresh(tiny), config=CONFIGS["grpo"] | {"tis_cap": None})
    from_engine = make(
        "grpo",
        policy=fresh(tiny),
        config=CONFIGS["grpo"] | {"tis_cap": None, "num_minibatches": 1},
        options={"old_logprobs": "engine"},
    )
    a, b = recomputed.step(episodes), from_engine.step(episodes)
    assert a["clip_fraction"] == 0  # π_old recomputed at the sampling temperature: ratio ≈ 1
    assert a["approx_kl"] < 1e-6
    assert b["clip_fraction"] > 0.2  # the engine's logprobs are far from the policy's
    assert b["approx_kl"] > 0.1


def test_one_optimizer_step_takes_pi_old_from_the_live_pass_with_the_recomputed_update(
    tiny, monkeypatch
):
    config = CONFIGS["grpo"] | {"num_minibatches": 1}  # one optimizer step: π_old = π_θ
    episodes = synthetic_episodes(2, 4, seed=15, shared_prompts=True)
    passes: list[int] = []
    no_grad_pass = update._no_grad_pass

    def counting(inputs, batch):
        passes.append(int(update._needs_old_logprobs(inputs)))
        return no_grad_pass(inputs, batch)

    monkeypatch.setattr(update, "_no_grad_pass", counting)
    live = make("grpo", policy=fresh(tiny), config=config)
    a = live.step(episodes)
    monkeypatch.setattr(update, "_needs_old_logprobs", lambda inputs: True)
    recomputing = make("grpo", policy=fresh(tiny), config=config)
    b = recomputing.step(episodes)
    assert passes == [0, 1]
    assert a.keys() == b.keys()
    for key in a.keys() - NOT_COMPARED:
        assert a[key] == pytest.approx(b[key], abs=1e-6), key
    ours, theirs = live.policy_state_dict(), recomputing.policy_state_dict()
    for name, tensor in theirs.items():
        torch.testing.assert_close(ours[name], tensor, rtol=0, atol=1e-6)


def test_target_kl_stops_the_update_after_the_step_whose_kl_exceeds_it(tiny, monkeypatch):
    config = {"group_size": 4, "batch_size": 8, "num_minibatches": 4, "ppo_epochs": 2}
    config |= {"learning_rate": 3e-3, "kl_beta": 0.0}
    episodes = synthetic_episodes(2, 4, seed=16)
    seen: list[float] = []
    train_minibatch = update._train_minibatch

    def recording(inputs, batch, rows, entropy_coef):
        result = train_minibatch(inputs, batch, rows, entropy_coef)
        seen.append(result["approx_kl"])
        return result

    monkeypatch.setattr(update, "_train_minibatch", recording)
    full = make("grpo", policy=fresh(tiny), config=config).step(episodes)
    assert (full["optimizer_steps"], full["kl_stopped"]) == (8, 0)
    assert seen[0] < 1e-6  # π_old is π_θ before the first step
    target = max(seen[1:]) / 2  # below the largest KL the plain update reached after step 1
    seen.clear()
    stopped = make("grpo", policy=fresh(tiny), config=config | {"target_kl": target}).step(episodes)
    steps = int(stopped["optimizer_steps"])
    assert 2 <= steps < 8
    assert stopped["kl_stopped"] == 1
    assert len(seen) == steps
    assert all(kl <= target for kl in seen[:-1])
    assert seen[-1] > target
    assert stopped["approx_kl"] == pytest.approx(sum(seen) / steps)


def mean_logprob(trainer, episodes: list[Episode]) -> float:
    batch = TrainBatch.collate(episodes, pad_token_id=0)
    with torch.no_grad():
        out = trainer.module(batch.token_ids, batch.attention_mask, temperature=1.0)
    return float((out.logprobs * batch.loss_mask).sum() / batch.loss_mask.sum())


def test_grpo_makes_rewarded_responses_more_likely(tiny):
    config = {"group_size": 4, "batch_size": 8, "learning_rate": 3e-4, "kl_beta": 0.0}
    trainer = make("grpo", policy=fresh(tiny), config=config)
    episodes = synthetic_episodes(2, 4, seed=14)
    good = [e for e in episodes if e.total_reward > 0]
    bad = [e for e in episodes if e.total_reward == 0]
    gap = mean_logprob(trainer, good) - mean_logprob(trainer, bad)
    for _ in range(5):
        trainer.step(episodes)
    assert mean_logprob(trainer, good) - mean_logprob(trainer, bad) > gap + 0.5


def test_ppo_critic_learns_the_returns(tiny):
    config = {"batch_size": 8, "learning_rate": 1e-4}
    trainer = make("ppo", policy=fresh(tiny), config=config, options={"critic_learning_rate": 3e-3})
    episodes = synthetic_episodes(8, 1, seed=15)
    losses = [trainer.step(episodes)["value_loss"] for _ in range(6)]
    assert losses[-1] < 0.5 * losses[0]


class RecordingEngine:
    def __init__(self) -> None:
        self.pushed: list[dict[str, torch.Tensor]] = []

    async def update_weights(self, weights: Any) -> None:
        self.pushed.append({k: v.clone() for k, v in weights.items()})


def test_weights_reach_the_inference_engine_after_each_update(tiny):
    model, tokenizer = fresh(tiny)
    engine = HFEngine(models.load(seed=1)[0], tokenizer)
    trainer = make("grpo", policy=(model, tokenizer), config=CONFIGS["grpo"], engine=engine)
    trainer.step(synthetic_episodes(2, 4, seed=16))
    assert engine.weight_version == 1
    for name, tensor in model.state_dict().items():
        assert torch.equal(engine.model.state_dict()[name], tensor), name
    recorder = RecordingEngine()
    trainer.attach_engine(recorder)  # type: ignore[arg-type]
    trainer.step(synthetic_episodes(2, 4, seed=17), push_weights=False)
    assert recorder.pushed == []
    asyncio.run(trainer.apush_weights())
    assert recorder.pushed[0].keys() == model.state_dict().keys()


def test_fit_trains_logs_and_keeps_the_newest_checkpoints(tiny, tmp_path):
    trainer = make("grpo", policy=fresh(tiny), config=CONFIGS["grpo"])
    seen = []
    history = fit(
        trainer,
        SyntheticSource(4),
        steps=3,
        out=tmp_path,
        checkpoint_every=1,
        keep_checkpoints=2,
        on_metrics=seen.append,
    )
    assert [m["step"] for m in history] == [1, 2, 3]
    assert seen == history
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step-00000002",
        "step-00000003",
    ]
    with pytest.raises(ConfigError, match="not an env id, an AgentVectorEnv or an EpisodeSource"):
        fit(trainer, 42, steps=4)


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_a_bf16_autocast_update_runs_and_agrees_with_fp32(tiny, algo):
    # A GPU's default: autocast to bf16. Log-probs and entropy stay fp32 inside it; an entropy
    # computed in bf16 once failed to be written into its fp32 result at the first update.
    config = CONFIGS[algo] | {"entropy_coef": 0.01}
    episodes = synthetic_episodes(2, 4, seed=21)
    results = {}
    for precision in ("bf16", "fp32"):
        trainer = make(algo, policy=fresh(tiny), config=config, precision=precision)
        assert trainer.backend.precision == precision
        before = {k: v.clone() for k, v in trainer.policy_state_dict().items()}
        metrics = trainer.step(episodes, push_weights=False)
        assert metrics["update"] == 1
        assert all(v == v and abs(v) != float("inf") for v in metrics.values()), metrics
        after = trainer.policy_state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)
        assert all(v.dtype == torch.float32 for v in after.values())  # weights stay fp32
        results[precision] = metrics
    bf16, fp32 = results["bf16"], results["fp32"]
    assert bf16["entropy"] == pytest.approx(fp32["entropy"], rel=2e-2)
    assert bf16["approx_kl"] == pytest.approx(fp32["approx_kl"], abs=1e-2)
