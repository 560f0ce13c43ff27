"""The engine beside the trainer: same device, the very same parameters, pushes that are a
version bump, and a FrozenLake ``fit`` that trains exactly as with an engine of its own."""

from __future__ import annotations

import copy

import pytest
import torch

from agentgym import models
from agentgym.core.aio import run_sync
from agentgym.error import ConfigError
from agentgym.inference.hf import HFEngine
from agentgym.recipes.config import RunConfig
from agentgym.trainers import fit, make
from agentgym.trainers.colocate import colocated_engine, resolve_engine_device, shares_weights

from .ds_step import CONFIGS, synthetic_episodes

FIT_CONFIG = {
    "group_size": 4,
    "batch_size": 8,
    "num_minibatches": 1,
    "learning_rate": 1e-4,
    "max_new_tokens": 8,
}


def _trainer(seed: int = 0, config: dict | None = None):
    return make("grpo", policy=models.load(seed=seed), config=config or CONFIGS["grpo"])


def test_the_engine_runs_on_the_trainers_device_with_its_very_parameters():
    trainer = _trainer()
    engine, shared = colocated_engine(trainer)
    try:
        assert shared
        assert trainer.engine is engine
        assert engine.model is trainer.module.policy
        assert engine._batch.device == trainer.backend.device
        policy = dict(trainer.module.policy.named_parameters())
        for name, tensor in engine.model.named_parameters():
            assert tensor.data_ptr() == policy[name].data_ptr(), name
        before = {k: v.clone() for k, v in trainer.policy_state_dict().items()}
        trainer.step(synthetic_episodes(2, 4, seed=3))
        assert engine.weight_version == 1
        assert engine.stats.weights_copied == 0  # the push was a version bump
        changed = [k for k, v in engine.model.state_dict().items() if not torch.equal(v, before[k])]
        assert changed  # the engine sees the update without a copy
    finally:
        run_sync(engine.close())


def test_an_engine_elsewhere_gets_a_copy_updated_on_each_push():
    trainer = _trainer()
    policy = trainer.module.policy
    assert not shares_weights(policy, torch.device("meta"))  # another device: a copy
    other = HFEngine(copy.deepcopy(policy), trainer.tokenizer)
    trainer.attach_engine(other)
    trainer.step(synthetic_episodes(2, 4, seed=3))
    assert other.weight_version == 1
    assert other.stats.weights_copied == len(policy.state_dict())
    for name, tensor in policy.state_dict().items():
        assert torch.equal(other.model.state_dict()[name], tensor), name
    run_sync(other.close())


def test_a_model_in_train_mode_keeps_it_and_the_engine_samples_in_eval_mode():
    model, tokenizer = models.load(seed=0)
    trainer = make("grpo", policy=(model.train(), tokenizer), config=CONFIGS["grpo"])
    engine, _ = colocated_engine(trainer)
    seen = []
    hook = model.register_forward_pre_hook(lambda module, args: seen.append(module.training))
    try:
        from agentgym.inference import SamplingParams

        run_sync(engine.generate([5, 6, 7], SamplingParams(max_tokens=3, seed=0)))
    finally:
        hook.remove()
        run_sync(engine.close())
    assert model.training  # the trainer's mode, restored after every engine step
    assert seen
    assert not any(seen)


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "tpu", "", "cuda:-1"])
def test_a_bad_engine_device_is_refused(bad):
    with pytest.raises(ConfigError, match="engine_device"):
        resolve_engine_device(bad, torch.device("cpu"))
    with pytest.raises(ConfigError, match="engine_device"):
        RunConfig(engine_device=bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without a GPU")
def test_cuda_without_a_gpu_names_the_fix():
    with pytest.raises(ConfigError, match="torch sees no GPU"):
        resolve_engine_device("cuda:0", torch.device("cpu"))


def test_fit_on_frozenlake_matches_an_engine_with_a_copy_and_records_versions():
    """The colocated default trains exactly as the engine on a copy of the policy did."""
    runs = {}
    for mode in ("copy", "shared"):
        trainer = _trainer(config=FIT_CONFIG)
        if mode == "copy":
            engine = HFEngine(copy.deepcopy(trainer.module.policy), trainer.tokenizer, seed=0)
            trainer.attach_engine(engine)
        history = fit(trainer, "agentgym/FrozenLake-v0", steps=2)
        assert (trainer.engine.model is trainer.module.policy) == (mode == "shared")
        assert trainer.engine.weight_version == 2
        runs[mode] = (history, trainer.policy_state_dict())
        run_sync(trainer.engine.close())
    (h_copy, w_copy), (h_shared, w_shared) = runs["copy"], runs["shared"]
    for a, b in zip(h_copy, h_shared, strict=True):
        # the same episodes (sampled tokens, rewards) and the same update, to float rounding
        timings = {k for k in a if k.endswith("_s") or k.endswith("per_s")}
        assert a.keys() == b.keys()
        for key in ("success_rate", "reward_mean", "episodes", "step"):
            assert a.get(key) == b.get(key), key
        assert {k: b[k] for k in b.keys() - timings} == pytest.approx(
            {k: a[k] for k in a.keys() - timings}, rel=1e-5, abs=1e-7
        )
    for name, tensor in w_copy.items():
        torch.testing.assert_close(tensor, w_shared[name], rtol=1e-5, atol=1e-7, msg=name)


def test_collected_episodes_record_the_weight_version_that_sampled_them():
    from agentgym.rollout.collector_source import CollectorSource

    trainer = _trainer(config=FIT_CONFIG)
    engine, _ = colocated_engine(trainer)
    source = CollectorSource(engine, "agentgym/FrozenLake-v0", group_size=4, max_tokens=8)
    try:
        first = source.collect(2)
        trainer.step(first)
        second = source.collect(2)
    finally:
        run_sync(engine.close())
    for episode in first:
        assert episode.weight_versions == [0] * len(episode.turn_spans)
    for episode in second:
        assert episode.weight_versions == [1] * len(episode.turn_spans)


def test_a_lora_policy_is_shared_and_a_copy_elsewhere_takes_the_merged_weights():
    from agentgym.trainers.colocate import _engine_copy

    trainer = make(
        "grpo", policy=models.load(seed=0), config=CONFIGS["grpo"], options={"lora_rank": 4}
    )
    engine, shared = colocated_engine(trainer)
    assert shared  # the adapters' forward is the policy
    run_sync(engine.close())
    plain = _engine_copy(trainer, torch.device("cpu"))  # what another device would get
    assert not any("lora" in name for name in plain.state_dict())
    other = HFEngine(plain, trainer.tokenizer)
    trainer.attach_engine(other)
    trainer.step(synthetic_episodes(2, 4, seed=3))
    merged = trainer.policy_state_dict()
    for name, tensor in other.model.state_dict().items():
        assert torch.equal(tensor, merged[name]), name
    run_sync(other.close())
