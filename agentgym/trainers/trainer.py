"""``Trainer``: episodes in, policy updates out, on any backend.

::

    trainer = agentgym.trainers.make("grpo", backend="torch", config={"group_size": 4})
    metrics = trainer.step(episodes)       # advantages, losses, optimizer steps, weight push
    trainer.save("runs/r1/checkpoints/step-00000010")
    trainer.load("runs/r1/checkpoints/step-00000010")   # the next step is bit-identical

``step`` takes a global batch, the same on every rank; whole groups of ``config.group_size``
episodes, each group's episodes next to each other. Where the episodes enter, groups holding an
infra error or an untrainable episode are dropped, DAPO's overlong punishment is added to the
turn rewards, and DAPO's dynamic sampling keeps informative groups until a batch is full (until
then ``step`` returns ``update == 0``). A batch whose every group was dropped makes no update
either and returns ``update == 0`` with ``empty == 1`` (DAPO's sampler does not count it as a
round): ``fit`` counts such steps and stops a run that has too many in a row. The algorithm
lives in ``losses``; the backend only runs the module.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor, nn

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.trainers import checkpoint
from agentgym.trainers.algorithms import DynamicSampler
from agentgym.trainers.backends import Backend, make_backend
from agentgym.trainers.config import (
    AlgorithmConfig,
    DAPOConfig,
    TrainOptions,
    config_from_dict,
    make_config,
)
from agentgym.trainers.episodes import (
    Sample,
    admit,
    dropped_by_kind,
    episode_metrics,
    flat_groups,
    outcome_rates,
    shape_rewards,
)
from agentgym.trainers.lora import LoraSettings, add_lora, merged_state_dict
from agentgym.trainers.modules import PolicyModule, ValueModel
from agentgym.trainers.update import UpdateInputs, UpdateTokens, run_update
from agentgym.trainers.weight_sync import check_versions

if TYPE_CHECKING:
    from agentgym.inference.base import InferenceEngine

__all__ = ["ASYNC_TIS_CAP", "Trainer", "make"]

ASYNC_TIS_CAP = 2.0
"""The truncated-importance-sampling cap of asynchronous training (``max_staleness`` >= 1) when
the config sets none."""


class Trainer:
    """Trains ``model`` with ``config``'s algorithm on ``backend``; build it with ``make``.

    The policy is trained in place. With ``config.kl_beta > 0`` a frozen copy of the initial
    policy is the KL reference; with a critic (PPO) a ``ValueModel`` is built from the policy.
    With ``options.lora_rank`` the policy gets LoRA adapters (``agentgym.trainers.lora``) after
    both are made, and only the adapters train.
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        config: AlgorithmConfig,
        backend: Backend,
        *,
        options: TrainOptions | None = None,
        engine: InferenceEngine | None = None,
    ) -> None:
        self.config, self.backend, self.tokenizer = config, backend, tokenizer
        self.options = options or TrainOptions()
        if self.options.old_logprobs == "engine" and config.tis_cap is not None:
            raise ConfigError(
                "tis_cap",
                config.tis_cap,
                "corrects the gap between engine and trainer logprobs, but old_logprobs='engine'"
                " uses the engine's as π_old",
                "set old_logprobs='recompute', or tis_cap=None",
            )
        engine_old = self.options.old_logprobs == "engine"
        if config.max_staleness and config.tis_cap is None and not engine_old:
            # Samples up to k updates old: π_old (the policy now) is not the policy that sampled
            # them; the TIS weight min(π_old / π_sampler, C) corrects for it.
            config = dataclasses.replace(config, tis_cap=ASYNC_TIS_CAP)
            self.config = config
        reference = copy.deepcopy(model) if config.kl_beta > 0 else None
        value = ValueModel.from_policy(model) if config.uses_critic else None
        # Ranks sharing prefixes in different micro-batches would run different numbers of
        # forward passes, and ZeRO-3 gathers parameters in each: one process only.
        share, chunk = backend.world_size == 1, self.options.logits_chunk
        self.lr_scale = 1.0
        """A multiplier of the learning-rate schedule (a guard's rollback lowers it); saved."""
        self.lora = None
        if self.options.lora_rank:
            opts = self.options
            self.lora = LoraSettings(opts.lora_rank, opts.lora_alpha, opts.lora_targets)
            model = add_lora(model, self.lora, seed=config.seed)
        self.module = PolicyModule(model, value, share_prefixes=share, logits_chunk=chunk)
        if self.options.gradient_checkpointing:
            self.module.enable_gradient_checkpointing()
        backend.prepare(
            self.module,
            self._make_optimizer,
            self._make_scheduler,
            max_grad_norm=config.max_grad_norm,
        )
        self.reference = (
            None
            if reference is None
            else backend.prepare_frozen(
                PolicyModule(reference, share_prefixes=share, logits_chunk=chunk)
            )
        )
        self.sampler: DynamicSampler[list[Sample]] | None = None
        if isinstance(config, DAPOConfig) and config.dynamic_sampling:
            self.sampler = DynamicSampler(
                config.groups_per_batch, config.max_sampling_rounds, partial=config.partial_batches
            )
        self.update_inputs = UpdateInputs(
            config, self.options, backend, self.module, self.reference, self.pad_token_id
        )
        self.engine = engine
        self.last_tokens: UpdateTokens | None = None
        """With ``keep_tokens(True)``: the last update's per-token logprobs and advantages."""
        self.step_count = 0
        """Updates done (optimizer steps happen ``ppo_epochs x num_minibatches`` times each)."""
        self.state: dict[str, Any] = {}
        """What a loop needs to continue after ``load`` (data position, log offset); saved."""

    @property
    def pad_token_id(self) -> int:
        pad = getattr(self.tokenizer, "pad_token_id", None)
        return 0 if pad is None else int(pad)

    # -- optimizer --------------------------------------------------------------------------

    def _make_optimizer(self, placed: nn.Module) -> torch.optim.Optimizer:
        module, lr, opts = cast(PolicyModule, placed), self.config.learning_rate, self.options
        trained = [p for p in module.policy.parameters() if p.requires_grad]  # LoRA: adapters
        groups: list[dict[str, Any]] = [{"params": trained, "lr": lr}]
        if module.value is not None:
            critic_lr = opts.critic_learning_rate or lr
            groups.append({"params": list(module.value.parameters()), "lr": critic_lr})
        params = [p for group in groups for p in group["params"]]
        # One kernel per step over every tensor instead of a dozen small ops per parameter:
        # 10 → 3 ms per step for the tiny policy on 2 CPU threads.
        fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
        return torch.optim.AdamW(
            groups,
            lr=lr,
            betas=opts.adam_betas,
            eps=opts.adam_eps,
            weight_decay=opts.weight_decay,
            fused=fused or None,
        )

    def _make_scheduler(
        self, optimizer: torch.optim.Optimizer
    ) -> torch.optim.lr_scheduler.LRScheduler:
        factor = lr_factor(self.options)
        self._scheduled = optimizer
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: factor(s) * self.lr_scale)

    def set_lr_scale(self, scale: float) -> None:
        """Multiply the learning-rate schedule by ``scale`` (instead of the scale before), from
        the next optimizer step on."""
        for group in self._scheduled.param_groups:
            group["lr"] *= scale / self.lr_scale
        self.lr_scale = scale

    # -- training ---------------------------------------------------------------------------

    def keep_tokens(self, on: bool = True) -> None:
        """Keep each update's ``UpdateTokens`` in ``last_tokens`` (the trainer's logprobs and
        the advantages of every token it trained on; episode traces record them). Computed
        in the update's own passes; with several ranks, turn it on on every rank."""

        def keep(tokens: UpdateTokens) -> None:
            self.last_tokens = tokens

        self.update_inputs = dataclasses.replace(self.update_inputs, on_tokens=keep if on else None)
        self.last_tokens = None

    def step(self, episodes: Sequence[Episode], *, push_weights: bool = True) -> dict[str, float]:
        """One update from ``episodes`` (see the module docstring); returns its metrics. With
        ``push_weights`` the new weights go to the attached engine (``apush_weights`` from
        async code)."""
        start = time.perf_counter()
        self.last_tokens = None
        check_versions(self.engine, episodes)  # a server's samples: of versions pushed here
        k = self.config.max_staleness
        admitted = admit(episodes, self.config.group_size, self.step_count - k if k else None)
        samples, penalty = shape_rewards([e for g in admitted.groups for e in g], self.config)
        n = self.config.group_size
        groups = [samples[i : i + n] for i in range(0, len(samples), n)]
        metrics = {
            "dropped_episodes": float(admitted.dropped_episodes),
            "dropped_groups": float(admitted.dropped_groups),
            **dropped_by_kind(episodes),
            **outcome_rates(episodes),
        }
        if k:
            metrics["stale_groups"] = float(admitted.stale_groups)
        if not groups:  # every group dropped: nothing to train on, nor to sample more from
            return {**metrics, "update": 0.0, "empty": 1.0, "step": float(self.step_count)}
        if penalty is not None and len(penalty):
            metrics["overlong_penalty_mean"] = float(penalty.mean())
        if n > 1:
            metrics["flat_group_rate"] = flat_groups(groups) / len(groups)
        if self.sampler is not None:
            sampled = self._dynamic_sampling(self.sampler, groups, metrics, start)
            if isinstance(sampled, dict):
                return sampled
            groups = sampled
        batch = [s for g in groups for s in g]
        metrics.update(run_update(self.update_inputs, batch, self.step_count))
        metrics.update(episode_metrics(batch))
        if self.sampler is not None:
            # What the policy did, not only the groups it trained on (those it has not mastered):
            # reward and success over every episode of the step's sampling rounds.
            sampled = [s for g in self.sampler.take_seen() for s in g]
            if (kept := metrics.pop("success_rate", None)) is not None:
                metrics["dynamic_sampling/kept_success_rate"] = kept
            metrics.update(episode_metrics(sampled), episodes=float(len(batch)))
            metrics["episodes_sampled"] = float(len(sampled))
        self.step_count += 1
        elapsed = time.perf_counter() - start
        if push_weights:
            self.push_weights()
        tokens = sum(len(s.episode.token_ids) for s in batch)
        metrics.update(
            step=float(self.step_count), update=1.0, step_s=elapsed, tokens_per_s=tokens / elapsed
        )
        return metrics

    def _dynamic_sampling(
        self,
        sampler: DynamicSampler[list[Sample]],
        groups: list[list[Sample]],
        metrics: dict[str, float],
        start: float,
    ) -> list[list[Sample]] | dict[str, float]:
        """The groups to train on once DAPO's sampler has a batch; else the step's metrics
        (``update`` 0: it wants more groups; an update without groups at its cap)."""
        n = self.config.group_size
        rewards = torch.tensor([[s.reward for s in g] for g in groups], dtype=torch.float64)
        full = sampler.add(groups, rewards.view(len(groups), n))
        if full is None:
            return {**metrics, "update": 0.0, "step": float(self.step_count)}
        metrics.update(sampler.last_stats)
        if n > 1:  # over every round of the step, not only its last
            informative = metrics["dynamic_sampling/informative_fraction"]
            metrics["flat_group_rate"] = 1.0 - informative
        if not full:  # partial batches, and no group to learn from at the cap
            sampled = [s for g in sampler.take_seen() for s in g]
            return self._update_without_groups(metrics, sampled, start)
        return full

    def _update_without_groups(
        self, metrics: dict[str, float], sampled: list[Sample], start: float
    ) -> dict[str, float]:
        """DAPO with ``partial_batches`` kept no group in its last sampling round: the update
        counts (the run's schedule moves on) but takes no optimizer step, and the weights stay
        as they are. Reward and success are those of every episode ``sampled``."""
        metrics.update(episode_metrics(sampled))
        self.step_count += 1
        metrics.update(
            episodes=0.0,
            episodes_sampled=float(len(sampled)),
            optimizer_steps=0.0,
            step=float(self.step_count),
            update=1.0,
            step_s=time.perf_counter() - start,
        )
        return metrics

    # -- weights ----------------------------------------------------------------------------

    def attach_engine(self, engine: InferenceEngine | None) -> None:
        """Push the policy's weights to ``engine`` after every update (None: stop)."""
        self.engine = engine

    def policy_state_dict(self) -> dict[str, Tensor]:
        """The policy's full state dict (transformers keys), gathered under ZeRO-3, with LoRA
        adapters merged into their layers. Collective."""
        state = self.backend.gathered_state_dict(self.module.policy)
        return state if self.lora is None else merged_state_dict(state, self.lora.scaling)

    def _engine_weights(self) -> dict[str, Tensor]:
        """What ``push_weights`` sends: an engine that generates with the policy module itself
        (``colocate``) gets the module's own tensors, adapters included (nothing is copied);
        any other the merged weights."""
        policy: nn.Module = self.module.policy
        if self.engine is not None and getattr(self.engine, "model", None) is policy:
            return self.backend.gathered_state_dict(policy)
        return self.policy_state_dict()

    def _engine_anywhere(self) -> bool:
        here = torch.tensor([float(self.engine is not None)])
        return bool(self.backend.all_reduce(here).item() > 0)

    def push_weights(self) -> None:
        """``engine.update_weights(policy_state_dict())``, from synchronous code."""
        if self._engine_anywhere():
            weights = self._engine_weights()
            if self.engine is not None:
                run_sync(self.engine.update_weights(weights))

    async def apush_weights(self) -> None:
        """``push_weights`` from inside a running event loop (the engine's)."""
        if self._engine_anywhere():
            weights = self._engine_weights()
            if self.engine is not None:
                await self.engine.update_weights(weights)

    # -- checkpoints ------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write a complete checkpoint to ``path`` atomically (every rank calls it)."""
        path = Path(path)
        with checkpoint.atomic_directory(path, self.backend) as tmp:
            inner = tmp / "trainer"
            self.backend.save_checkpoint(inner / "backend")
            checkpoint.save_rng_state(inner / "rng", self.backend.rank)
            weights = self.policy_state_dict()
            if self.backend.rank == 0:
                self._export_policy(tmp, weights)
                if self.reference is not None:
                    torch.save(self.reference.state_dict(), inner / "reference.pt")
                torch.save(self._trainer_state(), inner / "state.pt")
                checkpoint.write_manifest(tmp, self._manifest())
        return path

    def _export_policy(self, directory: Path, weights: dict[str, Tensor]) -> None:
        """The policy as a transformers model directory (``agentgym.models.load`` reads it)."""
        checkpoint.export_policy(self.module.policy, self.tokenizer, directory, weights)

    def _trainer_state(self) -> dict[str, Any]:
        state = {"step": self.step_count, "state": self.state, "sampler": self.sampler}
        return {**state, "lr_scale": self.lr_scale}

    def _manifest(self) -> dict[str, Any]:
        return {
            "algo": self.config.algo,
            "config": self.config.to_dict(),
            "options": dataclasses.asdict(self.options),
            "backend": self.backend.name,
            "world_size": self.backend.world_size,
            "step": self.step_count,
        }

    def load(self, path: str | Path) -> Path:
        """Restore everything ``save`` wrote; the next ``step`` continues exactly. Returns the
        checkpoint read (``path``, or the previous one a killed save left beside it)."""
        path = checkpoint.resolve(path)
        manifest = checkpoint.read_manifest(path)
        self._check_manifest(path, manifest)
        inner = path / "trainer"
        self.backend.load_checkpoint(inner / "backend")
        if self.reference is not None:
            reference = torch.load(
                inner / "reference.pt", map_location=self.backend.device, weights_only=True
            )
            self.reference.load_state_dict(reference)
        # Our own pickle (the sampler holds episodes): load only checkpoints you trust.
        state = torch.load(inner / "state.pt", weights_only=False)
        self.step_count, self.state, self.sampler = state["step"], state["state"], state["sampler"]
        self.lr_scale = float(state.get("lr_scale", 1.0))
        checkpoint.load_rng_state(inner / "rng", self.backend.rank)
        self.push_weights()
        return path

    def _check_manifest(self, path: Path, manifest: dict[str, Any]) -> None:
        backend, lora = self.backend, self.options.lora_rank
        if manifest["world_size"] != backend.world_size:
            raise ConfigError(
                "checkpoint",
                str(path),
                f"was written by {manifest['world_size']} data-parallel processes, not "
                f"{backend.world_size}: its optimizer state (ZeRO shards) and random states are "
                "saved per process and are not re-split, so it resumes only with as many",
                f"resume with {manifest['world_size']} processes (agentgym train --nproc, times "
                f"--nnodes), or start a new run from the policy it holds: agentgym train "
                f"--model {path} --out NEW_RUN (same weights; the optimizer state, learning-rate "
                "schedule and step count start afresh)",
            )
        ours = (self.config.algo, backend.name, backend.world_size, lora)
        recorded = manifest["options"].get("lora_rank", 0)
        theirs = (manifest["algo"], manifest["backend"], manifest["world_size"], recorded)
        if ours != theirs:
            raise ConfigError(
                "checkpoint",
                str(path),
                f"was written by (algo, backend, world size, LoRA rank) {theirs}, not {ours}",
                "resume with the same algorithm, backend, number of processes and lora_rank",
            )


def _resolve_config(
    algo: str, config: AlgorithmConfig | Mapping[str, Any] | None
) -> AlgorithmConfig:
    if config is None:
        return make_config(algo)
    if isinstance(config, Mapping):
        return config_from_dict({"algo": algo, **config})
    if not isinstance(config, AlgorithmConfig) or config.algo != algo:
        raise ConfigError(
            "config",
            type(config).__name__,
            f"is not a config of algo {algo!r}",
            f"pass make_config({algo!r}, ...), a dict of overrides, or None for the preset",
        )
    return config


def _resolve_policy(policy: Any) -> tuple[nn.Module, Any]:
    if isinstance(policy, tuple) and len(policy) == 2:
        return policy[0], policy[1]
    if policy is None or isinstance(policy, str | os.PathLike):
        from agentgym import models

        return models.load(policy)
    raise ConfigError(
        "policy",
        type(policy).__name__,
        "is not a (model, tokenizer) pair or a model directory",
        "pass agentgym.models.load(...), a local directory, or None for the tiny policy",
    )


def make(
    algo: str,
    backend: str = "torch",
    *,
    policy: tuple[nn.Module, Any] | str | os.PathLike[str] | None = None,
    config: AlgorithmConfig | Mapping[str, Any] | None = None,
    options: TrainOptions | Mapping[str, Any] | None = None,
    engine: InferenceEngine | None = None,
    **backend_options: Any,
) -> Trainer:
    """A ``Trainer`` for ``algo`` ("ppo", "grpo", "dapo" or a registered name) on ``backend``.

    Args:
        policy: ``(model, tokenizer)``, a local model directory, or None for the tiny policy
            as ``agentgym.models.load()`` gives it.
        config: The algorithm's config, a dict of overrides of its preset, or None.
        options: ``TrainOptions`` or a dict of them.
        engine: An inference engine to push weights to after every update.
        backend_options: The backend's own (``TorchBackend`` / ``DeepSpeedBackend`` args),
            e.g. ``zero_stage=3, micro_batch_tokens=8192``.
    """
    resolved = _resolve_config(algo, config)
    if isinstance(options, Mapping):
        options = TrainOptions.from_dict(options)
    model, tokenizer = _resolve_policy(policy)
    runner = make_backend(backend, **backend_options)
    return Trainer(model, tokenizer, resolved, runner, options=options, engine=engine)


def lr_factor(options: TrainOptions) -> Callable[[int], float]:
    """The learning rate's multiplier at optimizer step ``step`` (0-based): linear warm-up over
    ``warmup_steps``, then 1, or a linear fall to ``min_lr_ratio`` over ``decay_steps``."""
    warmup, decay, floor = options.warmup_steps, options.decay_steps, options.min_lr_ratio

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if not decay:
            return 1.0
        done = min(1.0, (step - warmup) / decay)
        return 1.0 - (1.0 - floor) * done

    return factor
