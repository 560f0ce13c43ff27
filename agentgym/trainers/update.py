"""One update of a trainer: the no-gradient pass (π_old, π_ref, V_old), advantages, then
``ppo_epochs`` x ``num_minibatches`` optimizer steps, each accumulated over micro-batches
(fewer when ``target_kl`` stops the update early).

The batch is collated once into the model's rows (``TrainBatch.collate``) and takes one pass
down: the no-gradient pass fills it, ``compute_advantages`` adds advantages, minibatches and
micro-batches select its rows, ``micro_batch_loss`` reads them.

Every rank holds the whole batch and runs the same plan (``batch.plan_micro_batches``); the
no-gradient results of each rank's rows are summed into full ``[R, W]`` tensors, so advantages
are computed identically everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from agentgym.core.types import Episode
from agentgym.trainers.backends.base import Backend
from agentgym.trainers.batch import TrainBatch, plan_micro_batches, split_minibatches
from agentgym.trainers.config import AlgorithmConfig, TrainOptions
from agentgym.trainers.episodes import Sample, masked_by_outcome
from agentgym.trainers.losses import (
    TOKEN_MEAN_STATS,
    compute_advantages,
    entropy_coefficient,
    kl_in_reward,
    micro_batch_loss,
    minibatch_normalizer,
)
from agentgym.trainers.modules import PolicyModule

__all__ = ["UpdateInputs", "UpdateTokens", "run_update"]


@dataclass(frozen=True)
class UpdateTokens:
    """What an update computed for each token of the episodes it trained on, in episode rows
    ``[E, T]`` (right-padded with 0; ``episodes[i]`` is row ``i``), handed to
    ``UpdateInputs.on_tokens`` without a pass of its own (episode traces read it)."""

    episodes: list[Episode]
    logprobs: Tensor
    """The trainer's log-probabilities of the sampled tokens (0 elsewhere) at the update: the
    recomputed π_old when the update recomputes it, else those of each row's first forward
    pass (π_θ before the update's first optimizer step, for its first minibatch)."""
    advantages: Tensor
    """Each token's advantage, as the loss used it (0 on tokens the model did not sample)."""


@dataclass(frozen=True)
class UpdateInputs:
    """What an update reads besides the batch; the trainer builds it once."""

    config: AlgorithmConfig
    options: TrainOptions
    backend: Backend
    module: PolicyModule
    """The policy (and PPO's value model), prepared by the backend."""
    reference: nn.Module | None
    """The frozen KL reference policy; None without a KL penalty."""
    pad_token_id: int
    on_tokens: Callable[[UpdateTokens], None] | None = None
    """Called once per update with its ``UpdateTokens`` (collective with several ranks)."""


def _plan(inputs: UpdateInputs, batch: TrainBatch, rows: Sequence[int]) -> list[list[int]]:
    backend = inputs.backend
    return plan_micro_batches(
        rows,
        batch.lengths,
        world_size=backend.world_size,
        rank=backend.rank,
        token_budget=backend.micro_batch_tokens,
        parts=backend.concurrency,
        keys=batch.token_ids.tolist(),  # a prompt's rows in one micro-batch: shared once
    )


def _needs_old_logprobs(inputs: UpdateInputs) -> bool:
    """Recomputed π_old is needed before the update unless the batch takes one optimizer step
    (then π_old is π_θ itself) and the KL penalty does not go into the reward."""
    config = inputs.config
    several_steps = config.ppo_epochs * config.num_minibatches > 1
    return inputs.options.old_logprobs == "recompute" and (several_steps or kl_in_reward(config))


@torch.no_grad()
def _no_grad_pass(inputs: UpdateInputs, batch: TrainBatch) -> TrainBatch:
    """π_old (recomputed or the engine's), V_old and π_ref of every row of ``batch``."""
    if inputs.options.old_logprobs == "engine":
        batch = batch.replace(old_logprobs=batch.sampling_logprobs)
    need_old = _needs_old_logprobs(inputs)
    need_values = inputs.module.value is not None
    reference = inputs.reference
    if not (need_old or need_values or reference is not None):
        return batch
    backend, temperature = inputs.backend, inputs.config.temperature
    wanted = (("old", need_old), ("values", need_values), ("ref", reference is not None))
    names = [name for name, on in wanted if on]
    full = {name: torch.zeros(batch.token_ids.shape, dtype=torch.float32) for name in names}

    def run(rows: list[int]) -> tuple[int, dict[str, Tensor]]:
        micro = batch.select(rows, backend.device)
        tensors = {
            "input_ids": micro.token_ids,
            "attention_mask": micro.attention_mask,
            "loss_mask": micro.loss_mask,
            "allowed": micro.allowed,
        }
        found: dict[str, Tensor] = {}
        if need_old or need_values:
            out = backend.forward(**tensors, temperature=temperature, with_entropy=False)
            found.update(old=out.logprobs, values=out.values)
        if reference is not None:
            with backend.autocast():
                found["ref"] = reference(
                    **tensors, temperature=temperature, with_entropy=False
                ).logprobs
        return micro.token_ids.shape[1], {name: found[name].float().cpu() for name in names}

    plan = _plan(inputs, batch, range(batch.token_ids.shape[0]))
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


def _train_minibatch(
    inputs: UpdateInputs,
    batch: TrainBatch,
    rows: list[int],
    entropy_coef: float,
    *,
    capture: Tensor | None = None,
) -> dict[str, float]:
    """One optimizer step on ``rows``; ``capture`` (``[R, W]``) gets the rows' logprobs."""
    backend, config = inputs.backend, inputs.config
    normalizer = minibatch_normalizer(config, batch.loss_mask[rows])

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
        if capture is not None and micro_rows:
            seen = out.logprobs.detach().float() * micro.loss_mask
            capture[micro_rows, : seen.shape[1]] = seen.cpu()
        loss, stats = micro_batch_loss(config, out, micro, normalizer, entropy_coef)
        backend.backward(loss)
        return {name: value.detach().double().cpu() for name, value in stats.items()}

    totals: dict[str, Tensor] = {}
    for stats in backend.map_micro_batches(run, _plan(inputs, batch, rows)):
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


def run_update(inputs: UpdateInputs, samples: Sequence[Sample], step: int) -> dict[str, float]:
    """Train on ``samples`` (groups contiguous) at update ``step`` (0-based: the entropy
    bonus's schedule); returns the minibatch-averaged metrics."""
    config = inputs.config
    batch = TrainBatch.collate([s.episode for s in samples], inputs.pad_token_id)
    batch = _no_grad_pass(inputs, batch)
    advantages = compute_advantages(config, samples, batch)
    batch = batch.replace(advantages=advantages.advantages, returns=advantages.returns)
    # Compact filtering: after the advantages, so masked episodes stay in their baselines
    # (rLLM, which trained DeepSWE, flags them and filters "after advantages are computed").
    masked = masked_by_outcome(samples, config.mask_outcomes)
    if masked:
        loss_mask = batch.loss_mask.clone()
        loss_mask[batch.rows.rows_of(masked)] = 0
        batch = batch.replace(loss_mask=loss_mask)
    if config.mask_outcomes and _nothing_to_train(inputs.backend, batch):
        return _skipped(inputs, samples, batch, len(masked))
    count = min(config.num_minibatches, len(samples))
    minibatches = [batch.rows.rows_of(part) for part in split_minibatches(len(samples), count)]
    entropy_coef = entropy_coefficient(config, step)
    lr = inputs.backend.learning_rate()  # the first optimizer step's (warm-up moves it after)
    plan = [rows for _ in range(config.ppo_epochs) for rows in minibatches]
    history: list[dict[str, float]] = []
    recomputed = _needs_old_logprobs(inputs)
    capture = None
    if inputs.on_tokens is not None and not recomputed:
        capture = torch.zeros(batch.token_ids.shape, dtype=torch.float32)
    for index, rows in enumerate(plan):
        if capture is not None and index < len(minibatches):  # the first epoch's passes
            history.append(_train_minibatch(inputs, batch, rows, entropy_coef, capture=capture))
        else:
            history.append(_train_minibatch(inputs, batch, rows, entropy_coef))
        # approx_kl is all-reduced, so every rank stops at the same step
        if config.target_kl is not None and history[-1]["approx_kl"] > config.target_kl:
            break
    metrics = {name: sum(h[name] for h in history) / len(history) for name in history[0]}
    metrics["optimizer_steps"] = float(len(history))
    metrics["kl_stopped"] = float(len(history) < len(plan))
    metrics["grad_norm_max"] = max(h["grad_norm"] for h in history)
    metrics["lr"] = lr
    metrics["sampled_tokens"] = float(batch.loss_mask.sum())
    if config.mask_outcomes:
        metrics["masked_episodes"] = float(len(masked))
    if inputs.on_tokens is not None:
        _hand_out(inputs, samples, batch, capture)
    return metrics


def _nothing_to_train(backend: Backend, batch: TrainBatch) -> bool:
    """Whether no rank has a token left to train on (every episode masked by outcome); the sum
    is all-reduced, so every rank answers alike and skips, or steps, together."""
    left = backend.all_reduce(batch.loss_mask.sum().double().reshape(1).cpu())
    return float(left.item()) == 0.0


def _skipped(
    inputs: UpdateInputs, samples: Sequence[Sample], batch: TrainBatch, masked: int
) -> dict[str, float]:
    """The metrics of an update whose every episode was masked: no forward pass and no
    optimizer step. A step on an all-zero loss would still move the weights (AdamW's momentum
    and weight decay) on no data, and advance the learning-rate schedule."""
    if inputs.on_tokens is not None:  # the episodes are still traced, with nothing trained
        _hand_out(inputs, samples, batch, torch.zeros(batch.token_ids.shape, dtype=torch.float32))
    return {
        "optimizer_steps": 0.0,
        "kl_stopped": 0.0,
        "skipped_update": 1.0,
        "grad_norm": 0.0,
        "grad_norm_max": 0.0,
        "lr": inputs.backend.learning_rate(),
        "sampled_tokens": 0.0,
        "masked_episodes": float(masked),
    }


def _hand_out(
    inputs: UpdateInputs, samples: Sequence[Sample], batch: TrainBatch, capture: Tensor | None
) -> None:
    """``inputs.on_tokens`` with the update's logprobs and advantages, in episode rows."""
    hook, old, advantages = inputs.on_tokens, batch.old_logprobs, batch.advantages
    if hook is None or advantages is None:
        return
    if capture is not None:  # rows are disjoint across ranks: the sum assembles them
        logprobs = inputs.backend.all_reduce(capture)
    elif old is not None:  # π_old was recomputed before the update: the trainer's own
        logprobs = old.float() * batch.loss_mask
    else:
        return
    rows = batch.rows
    mask = rows.to_episodes(batch.loss_mask)
    hook(
        UpdateTokens(
            [s.episode for s in samples],
            rows.to_episodes(logprobs),
            rows.to_episodes(advantages.float()) * mask,
        )
    )
