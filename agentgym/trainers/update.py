"""One update of a trainer: the no-gradient pass (π_old, π_ref, V_old), advantages, then
``ppo_epochs`` x ``num_minibatches`` optimizer steps, each accumulated over micro-batches
(fewer when ``target_kl`` stops the update early).

Every rank holds the whole batch and runs the same plan (``batch.plan_micro_batches``); the
no-gradient results of each rank's rows are summed into full ``[B, T]`` tensors, so advantages
are computed identically everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from agentgym.trainers.batch import Sample, TrainBatch, plan_micro_batches, split_minibatches
from agentgym.trainers.contexts import ContextLayout
from agentgym.trainers.losses import (
    TOKEN_MEAN_STATS,
    compute_advantages,
    entropy_coefficient,
    kl_in_reward,
    micro_batch_loss,
    minibatch_normalizer,
)

if TYPE_CHECKING:
    from agentgym.trainers.trainer import Trainer

__all__ = ["episode_metrics", "run_update"]


def _plan(trainer: Trainer, batch: TrainBatch, rows: Sequence[int]) -> list[list[int]]:
    backend = trainer.backend
    return plan_micro_batches(
        rows,
        batch.lengths,
        world_size=backend.world_size,
        rank=backend.rank,
        token_budget=backend.micro_batch_tokens,
        parts=backend.concurrency,
    )


def _needs_old_logprobs(trainer: Trainer) -> bool:
    """Recomputed π_old is needed before the update unless the batch takes one optimizer step
    (then π_old is π_θ itself) and the KL penalty does not go into the reward."""
    config = trainer.config
    several_steps = config.ppo_epochs * config.num_minibatches > 1
    return trainer.options.old_logprobs == "recompute" and (several_steps or kl_in_reward(config))


@torch.no_grad()
def _no_grad_pass(trainer: Trainer, batch: TrainBatch) -> TrainBatch:
    if trainer.options.old_logprobs == "engine":
        batch = batch.replace(old_logprobs=batch.sampling_logprobs)
    need_old = _needs_old_logprobs(trainer)
    need_values = trainer.module.value is not None
    reference = trainer.reference
    if not (need_old or need_values or reference is not None):
        return batch
    backend, temperature = trainer.backend, trainer.config.temperature
    wanted = (("old", need_old), ("values", need_values), ("ref", reference is not None))
    names = [name for name, on in wanted if on]
    full = {name: torch.zeros(batch.token_ids.shape, dtype=torch.float32) for name in names}

    def run(rows: list[int]) -> tuple[int, dict[str, Tensor]]:
        micro = batch.select(rows, backend.device)
        inputs = {
            "input_ids": micro.token_ids,
            "attention_mask": micro.attention_mask,
            "loss_mask": micro.loss_mask,
            "allowed": micro.allowed,
        }
        found: dict[str, Tensor] = {}
        if need_old or need_values:
            out = backend.forward(**inputs, temperature=temperature, with_entropy=False)
            found.update(old=out.logprobs, values=out.values)
        if reference is not None:
            with backend.autocast():
                found["ref"] = reference(
                    **inputs, temperature=temperature, with_entropy=False
                ).logprobs
        return micro.token_ids.shape[1], {name: found[name].float().cpu() for name in names}

    plan = _plan(trainer, batch, range(batch.token_ids.shape[0]))
    for rows, (length, found) in zip(plan, backend.map_micro_batches(run, plan), strict=True):
        for name in names if rows else ():
            full[name][rows, :length] = found[name]
    for tensor in full.values():
        backend.all_reduce(tensor)  # rows are disjoint across ranks: the sum assembles them
    return batch.replace(
        old_logprobs=full.get("old", batch.old_logprobs),
        old_values=full.get("values"),
        ref_logprobs=full.get("ref"),
    )


def _train_minibatch(trainer: Trainer, batch: TrainBatch, rows: list[int]) -> dict[str, float]:
    backend, config = trainer.backend, trainer.config
    normalizer = minibatch_normalizer(config, batch.loss_mask[rows])
    entropy_coef = entropy_coefficient(config, trainer.step_count)

    def run(micro_rows: list[int]) -> dict[str, Tensor]:
        micro = batch.select(micro_rows, backend.device)
        out = backend.forward(
            input_ids=micro.token_ids,
            attention_mask=micro.attention_mask,
            temperature=config.temperature,
            loss_mask=micro.loss_mask,
            allowed=micro.allowed,
            entropy_grad=entropy_coef > 0,
        )
        loss, stats = micro_batch_loss(config, out, micro, normalizer, entropy_coef)
        backend.backward(loss)
        return {name: value.detach().double().cpu() for name, value in stats.items()}

    totals: dict[str, Tensor] = {}
    for stats in backend.map_micro_batches(run, _plan(trainer, batch, rows)):
        for name, value in stats.items():  # in plan order, however the backend ran them
            totals[name] = totals.get(name, 0.0) + value
    grad_norm = backend.step()
    names = list(totals)
    summed = backend.all_reduce(torch.stack([totals[n] for n in names])).tolist()
    result = dict(zip(names, summed, strict=True))
    tokens = max(result.pop("tokens"), 1.0)
    for name in TOKEN_MEAN_STATS & set(result):
        result[name] /= tokens
    result["grad_norm"] = grad_norm
    return result


def _prepared(trainer: Trainer, samples: Sequence[Sample]) -> tuple[TrainBatch, list[list[int]]]:
    """The batch the model passes train on, with advantages, and its minibatches' rows.

    Advantages are computed over episode rows; with history windows
    (``Episode.context_starts``) the model runs one row per context (``ContextLayout``).
    """
    episodes = [s.episode for s in samples]
    batch = TrainBatch.collate(episodes, trainer.pad_token_id)
    layout = ContextLayout.of(episodes)
    model_batch = batch if layout is None else layout.unpack_batch(batch, trainer.pad_token_id)
    model_batch = _no_grad_pass(trainer, model_batch)
    if layout is not None:
        computed = {
            name: layout.pack(value, batch.token_ids.shape)
            for name in ("old_logprobs", "old_values", "ref_logprobs")
            if (value := getattr(model_batch, name)) is not None
        }
        batch = batch.replace(**computed)
    else:
        batch = model_batch
    advantages = compute_advantages(trainer.config, samples, batch)
    returns = advantages.returns
    if layout is not None:
        model_batch = model_batch.replace(
            advantages=layout.unpack(advantages.advantages),
            returns=None if returns is None else layout.unpack(returns),
        )
    else:
        model_batch = batch.replace(advantages=advantages.advantages, returns=returns)
    count = min(trainer.config.num_minibatches, len(samples))
    minibatches = split_minibatches(len(samples), count)
    if layout is not None:
        minibatches = [layout.rows_of(rows) for rows in minibatches]
    return model_batch, minibatches


def run_update(trainer: Trainer, samples: Sequence[Sample]) -> dict[str, float]:
    """Train on ``samples`` (groups contiguous); returns the minibatch-averaged metrics."""
    batch, minibatches = _prepared(trainer, samples)
    config = trainer.config
    lr = trainer.backend.learning_rate()  # the first optimizer step's (warm-up moves it after)
    plan = [rows for _ in range(config.ppo_epochs) for rows in minibatches]
    history: list[dict[str, float]] = []
    for rows in plan:
        history.append(_train_minibatch(trainer, batch, rows))
        # approx_kl is all-reduced, so every rank stops at the same step
        if config.target_kl is not None and history[-1]["approx_kl"] > config.target_kl:
            break
    metrics = {name: sum(h[name] for h in history) / len(history) for name in history[0]}
    metrics["optimizer_steps"] = float(len(history))
    metrics["kl_stopped"] = float(len(history) < len(plan))
    metrics["grad_norm_max"] = max(h["grad_norm"] for h in history)
    metrics["lr"] = lr
    metrics["sampled_tokens"] = float(batch.loss_mask.sum())
    return metrics


def episode_metrics(samples: Sequence[Sample]) -> dict[str, float]:
    """Reward (as the env gave it), success where the last turn's info says, lengths."""
    rewards = [s.episode.total_reward for s in samples]
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    metrics = {
        "episodes": float(len(samples)),
        "reward_mean": mean,
        "reward_std": std,
        "shaped_reward_mean": sum(s.reward for s in samples) / len(samples),
        "turns_mean": sum(len(s.episode.turns) for s in samples) / len(samples),
        "response_tokens_mean": sum(sum(s.episode.loss_mask) for s in samples) / len(samples),
    }
    outcomes = [s.episode.success for s in samples if s.episode.success is not None]
    if outcomes:
        metrics["success_rate"] = sum(outcomes) / len(outcomes)
    return metrics
