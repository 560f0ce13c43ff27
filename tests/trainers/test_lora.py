"""LoRA (peft): only the adapters train, the engine and the exported model get the merged
weights, and a resumed run repeats the uninterrupted one."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from agentgym import models
from agentgym.core.aio import run_sync
from agentgym.error import ConfigError
from agentgym.inference.hf import HFEngine
from agentgym.recipes.run_folder import RunFolder
from agentgym.trainers import fit, make

from .ds_step import FIT_CONFIG, NOT_COMPARED, SyntheticSource

LORA = {"lora_rank": 4, "lora_alpha": 8.0}
CONFIG = FIT_CONFIG | {"max_new_tokens": 24}  # the format policy: short valid moves


def lora_trainer(seed=None, **options):
    policy = models.load(seed=seed)  # None: the format policy, which plays FrozenLake
    return make("grpo", policy=policy, config=CONFIG, options=LORA | options)


def test_a_lora_fit_on_frozenlake_trains_only_the_adapters_and_syncs_merged_weights(tmp_path):
    trainer = lora_trainer()
    base, _ = models.load()
    engine = HFEngine(copy.deepcopy(base), trainer.tokenizer, seed=0)  # the plain model
    trainer.attach_engine(engine)
    policy = trainer.module.policy
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    trained = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trained
    assert all(".lora_" in n for n in trained)
    try:
        fit(trainer, "agentgym/FrozenLake-v0", steps=2, out=tmp_path, checkpoint_every=1)
    finally:
        run_sync(engine.close())
    after = policy.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved
    assert moved <= trained
    assert any(".lora_B." in k for k in moved)  # ... B too (it starts at 0)
    merged = trainer.policy_state_dict()
    assert merged.keys() == base.state_dict().keys()
    assert any(not torch.equal(merged[k], v) for k, v in base.state_dict().items())
    for name, tensor in engine.model.state_dict().items():  # the engine got the merged weights
        assert torch.equal(tensor, merged[name]), name
    # The merged model computes what the adapted policy does.
    ids = torch.randint(3, 1000, (2, 12))
    with torch.no_grad():
        adapted = policy(input_ids=ids).logits
        plain = engine.model(input_ids=ids).logits
    assert (adapted - plain).abs().max().item() < 1e-5
    # The checkpoint's model directory is the merged model.
    exported, _ = models.load(tmp_path / "checkpoints" / "step-00000002")
    for name, tensor in exported.state_dict().items():
        assert torch.equal(tensor, merged[name]), name


def test_a_resumed_lora_run_repeats_the_uninterrupted_one(tmp_path):
    straight = lora_trainer(seed=0)

    def run(trainer, steps, out):
        recorder = RunFolder(out)
        fit(
            trainer, SyntheticSource(4), steps=steps, out=out, checkpoint_every=1, recorder=recorder
        )

    run(straight, 4, tmp_path / "straight")
    first = lora_trainer(seed=0)
    run(first, 2, tmp_path / "resumed")
    second = lora_trainer(seed=0)
    run(second, 4, tmp_path / "resumed")

    def logged(run):
        lines = (tmp_path / run / "metrics.jsonl").read_text().splitlines()
        return [
            {k: v for k, v in json.loads(line).items() if k not in NOT_COMPARED} for line in lines
        ]

    assert logged("resumed") == logged("straight")
    final = second.module.policy.state_dict()
    for name, tensor in straight.module.policy.state_dict().items():
        assert torch.equal(final[name], tensor), name


def test_lora_options_are_checked():
    with pytest.raises(ConfigError, match="lora_rank"):
        lora_trainer(lora_rank=-1)
    with pytest.raises(ConfigError, match="lora_alpha"):
        lora_trainer(lora_alpha=0)
    with pytest.raises(ConfigError, match=r"lora_targets.*names no module"):
        lora_trainer(lora_targets=" , ")
    with pytest.raises(ConfigError, match=r"lora_targets.*does not fit this model"):
        lora_trainer(lora_targets="no_such_proj")


def test_a_lora_checkpoint_is_not_loaded_into_a_full_trainer(tmp_path):
    trainer = lora_trainer()
    trainer.save(tmp_path / "ckpt")
    full = make("grpo", policy=models.load(), config=CONFIG)
    with pytest.raises(ConfigError, match="LoRA rank"):
        full.load(tmp_path / "ckpt")
