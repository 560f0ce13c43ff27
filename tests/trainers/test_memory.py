"""The memory options of a trainer change memory, not the update: gradient checkpointing and
chunked output-layer logits give the plain update's losses, gradient norms and weights."""

from __future__ import annotations

import pytest
import torch

from agentgym import models
from agentgym.error import ConfigError
from agentgym.trainers import make

from .ds_step import CONFIGS, batches


def update(algo: str, **options):
    """Two updates of ``algo`` on ``ds_step``'s first batches with trainer ``options``; their
    metrics, the weights after, and how many times layer 0's MLP ran."""
    trainer = make(algo, policy=models.load(seed=0), config=CONFIGS[algo], options=options)
    layer = trainer.module.policy.model.layers[0].mlp  # inside the checkpointed layer
    calls = []
    hook = layer.register_forward_pre_hook(lambda *_: calls.append(torch.is_grad_enabled()))
    try:
        metrics = [trainer.step(batch, push_weights=False) for batch in batches(algo)[:2]]
    finally:
        hook.remove()
    return metrics, trainer.policy_state_dict(), calls


def assert_same_update(a, b) -> float:
    (metrics_a, weights_a, _), (metrics_b, weights_b, _) = a, b
    for step_a, step_b in zip(metrics_a, metrics_b, strict=True):
        for key in ("loss", "policy_loss", "entropy", "grad_norm", "approx_kl"):
            if key in step_a:
                assert step_b[key] == pytest.approx(step_a[key], abs=1e-5), key
    gap = max((weights_b[k] - w).abs().max().item() for k, w in weights_a.items())
    assert gap < 1e-6
    return gap


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_gradient_checkpointing_gives_the_same_update(algo):
    plain = update(algo)
    checkpointed = update(algo, gradient_checkpointing=True)
    assert_same_update(plain, checkpointed)
    # the layers ran again in the backward passes: more calls with gradients on
    assert sum(checkpointed[2]) > sum(plain[2])


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_chunked_logits_give_the_same_update(algo):
    assert_same_update(update(algo, logits_chunk=0), update(algo, logits_chunk=7))


@pytest.mark.parametrize(
    ("option", "value"),
    [("logits_chunk", -1), ("gradient_checkpointing", "yes"), ("lora_rank", 1.5)],
)
def test_bad_memory_options_name_the_value(option, value):
    with pytest.raises(ConfigError, match=option):
        make("grpo", policy=models.load(seed=0), config=CONFIGS["grpo"], options={option: value})
