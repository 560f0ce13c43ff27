"""Weights to an inference server by disk, and the policy version of every sample.

An engine in the trainer's process (``HFEngine``, placed by ``colocate``) gets the policy's
tensors after each update. A server (SGLang, or ``agentgym serve``, which speaks SGLang's native
API) cannot: ``attach_server`` wraps its engine in a ``ServerPolicy`` that, at each push,

1. writes the policy (``Trainer.policy_state_dict()``: LoRA merged, ZeRO-3 gathered) as a
   transformers model directory of safetensors, ``<weights_dir>/step-<n>``, atomically (a
   temporary folder renamed), keeping the newest ``keep`` of them;
2. has the server load it (``engine.update_weights(path)``: SGLang's pause, update from disk,
   flush cache, continue);
3. tags the new weights policy version ``n = trainer.step_count``: an ``SGLangEngine`` names
   the update ``n`` (SGLang's ``weight_version``), so the server reports the trainer's version
   with every completion; another engine's own count is mapped to it.

Attaching pushes at once, so the server samples the trainer's policy whatever it was started
with; ``Trainer.load`` pushes again on resume. With data-parallel ranks sharing one server,
rank 0 writes and pushes while the others wait for it. Completions carry the trainer's version
(weights the trainer never pushed map to None), and
``Trainer.step`` refuses a batch holding a sample of version None or of a version this trainer
did not push (``UnknownPolicyVersion``). A server that fails to load the weights, or cannot be
reached while generating, stops the run with ``InferenceServerError``: the last checkpoint is
untouched, and ``--resume`` continues from it once the server is back.

::

    engine = attach_server(trainer, SGLangEngine("http://127.0.0.1:30000"), "runs/r1/weights")
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch

from agentgym.core.errors import ConfigError, Error, InfraError
from agentgym.core.types import Episode
from agentgym.inference.base import Completion, InferenceEngine, SamplingParams

if TYPE_CHECKING:
    from torch import Tensor

    from agentgym.trainers.backends import Backend


__all__ = [
    "InferenceServerError",
    "ServerPolicy",
    "UnknownPolicyVersion",
    "attach_server",
    "check_trainable_engine",
    "check_versions",
    "in_process",
]

RESUME_FIX = "restart the server and rerun with --resume (the last checkpoint is intact)"
START_FIX = "start the server (or correct --engine-url) and rerun the same command"


class InferenceServerError(InfraError):
    """The inference server failed to load the policy's weights, or could not be reached."""


class UnknownPolicyVersion(Error, RuntimeError):
    """A batch holds a sample of no known policy version (None, or one the trainer did not
    push): training on it would learn from an unknown policy's tokens."""


def in_process(engine: Any) -> bool:
    """Whether ``engine`` generates in this process (tensors are pushed, not files): an
    ``HFEngine``, or an ``SGLangEngine`` sharing this process's GPU (``colocated``)."""
    from agentgym.inference.hf import HFEngine

    if isinstance(engine, HFEngine):
        return True
    # Never imported: not an SGLangEngine (and the train extra has no httpx to import it with).
    sglang = sys.modules.get("agentgym.inference.sglang")
    return sglang is not None and isinstance(engine, sglang.SGLangEngine) and engine.colocated


def _url(engine: Any) -> str:
    base = getattr(engine, "base_url", None)
    if base is None:
        http = getattr(engine, "_http", None)
        base = getattr(http, "base_url", None)
    return str(base) if base else type(engine).__name__


def check_trainable_engine(engine: Any) -> None:
    """Raise ``ConfigError`` unless training can use server ``engine``: it must load new
    weights from disk, which an OpenAI-compatible API cannot (whether or not it returns token
    ids; ``agentgym.recipes.engines.token_level`` asks that)."""
    from agentgym.inference.openai import OpenAIEngine

    if isinstance(engine, OpenAIEngine):
        raise ConfigError(
            "engine",
            f"openai ({_url(engine)})",
            "has no weight-update API: after the first update it would go on sampling the "
            "policy it was started with",
            "use --engine sglang (agentgym serve and SGLang load weights from disk), or "
            "--engine hf",
        )


class PushingTrainer(Protocol):
    """What a ``ServerPolicy`` uses of its ``Trainer`` (a protocol: ``Trainer.step`` imports
    this module)."""

    step_count: int
    backend: Backend
    tokenizer: Any

    def attach_engine(self, engine: InferenceEngine | None) -> None: ...

    def push_weights(self) -> None: ...

    def _export_policy(self, directory: Path, weights: dict[str, Tensor]) -> None: ...


class ServerPolicy:
    """``engine`` (a server) as the trainer's engine: weights go by disk, completions carry
    the trainer's policy version. See the module docstring; build it with ``attach_server``.

    Args:
        engine: an engine whose ``update_weights`` takes a model directory.
        trainer: the trainer whose policy it serves (its ``step_count`` is the version).
        weights_dir: where the model directories go; on a file system the server reads.
        keep: model directories kept (the newest); >= 1.
    """

    def __init__(
        self,
        engine: InferenceEngine,
        trainer: PushingTrainer,
        weights_dir: str | os.PathLike[str],
        *,
        keep: int = 2,
    ) -> None:
        if keep < 1:
            raise ConfigError("keep", keep, "must be >= 1", "keep the newest 1 or 2")
        self.engine, self.trainer, self.keep = engine, trainer, keep
        self.weights_dir = Path(weights_dir)
        self.tokenizer = trainer.tokenizer
        """Renders prompts for the collector: the policy's own."""
        self.url = _url(engine)
        self.version: int | None = None
        """The policy version the server holds (None before the first push)."""
        self.pushed: set[int] = set()
        """Every version this trainer pushed."""
        self._versions: dict[int, int] = {}  # the server's weight_version -> the trainer's

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        try:
            completion = await self.engine.generate(prompt_token_ids, sampling)
        except InfraError as error:
            raise InferenceServerError(
                f"the inference server at {self.url} failed while generating: {error}. "
                f"Fix: {RESUME_FIX}."
            ) from error
        served = completion.weight_version
        completion.weight_version = None if served is None else self._versions.get(served)
        return completion

    async def update_weights(self, weights: Mapping[str, Tensor]) -> None:
        """Write ``weights`` as ``<weights_dir>/step-<n>`` and have the server load it (rank 0;
        every rank calls it and waits for rank 0's push, so no rank samples old weights)."""
        version = self.trainer.step_count
        backend = self.trainer.backend
        failure: BaseException | None = None
        served: Any = version
        if backend.rank == 0:
            try:
                served = await self._push(version, weights)
            except BaseException as error:  # every rank hears of it, then rank 0 raises it
                failure = error
        if backend.world_size > 1:
            failed = torch.tensor([float(failure is not None)])
            if backend.all_reduce(failed).item() > 0 and failure is None:
                raise InferenceServerError(
                    f"rank 0 failed to push the weights of update {version} to the inference "
                    f"server at {self.url}. Fix: {RESUME_FIX}."
                )
        if failure is not None:
            raise failure
        if isinstance(served, int):
            self._versions[served] = version
        self.version = version
        self.pushed.add(version)

    async def _push(self, version: int, weights: Mapping[str, Tensor]) -> Any:
        """Write and load version ``version``; returns the number the server now reports."""
        path = await asyncio.to_thread(self._write, version, weights)
        from agentgym.inference.sglang import SGLangEngine

        if isinstance(self.engine, SGLangEngine):
            # it names its next update weight_version + 1: the server then reports the
            # trainer's version itself, the number every rank maps
            self.engine.weight_version = version - 1
        try:
            await self.engine.update_weights(path)
        except ConfigError:
            raise
        except Exception as error:
            fix = START_FIX if self.version is None else RESUME_FIX  # the first push: at start
            raise InferenceServerError(
                f"the inference server at {self.url} did not load the weights of update "
                f"{version} from {path}: {type(error).__name__}: {error}. Fix: {fix}."
            ) from error
        await asyncio.to_thread(self._prune, path)
        return getattr(self.engine, "weight_version", None)

    def _write(self, version: int, weights: Mapping[str, Tensor]) -> Path:
        final = self.weights_dir / f"step-{version:08d}"
        tmp = self.weights_dir / f".step-{version:08d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self.trainer._export_policy(tmp, dict(weights))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        return final.resolve()

    def _prune(self, newest: Path) -> None:
        others = sorted(p for p in self.weights_dir.glob("step-*") if p.resolve() != newest)
        for path in others[: max(0, len(others) - (self.keep - 1))]:
            shutil.rmtree(path, ignore_errors=True)

    def check(self, episodes: Iterable[Episode]) -> None:
        """Raise ``UnknownPolicyVersion`` if an episode holds a turn of version None or of a
        version this trainer did not push."""
        for episode in episodes:
            for version in episode.weight_versions:
                if version is None or version not in self.pushed:
                    raise UnknownPolicyVersion(
                        f"an episode (group {episode.group}) holds a turn sampled by policy "
                        f"version {version} from {self.url}, which this trainer did not push "
                        f"(pushed: {sorted(self.pushed)}). Nothing is trained on samples of an "
                        "unknown policy. Fix: collect with the engine the trainer pushes to, "
                        "after attach_server (or fit) pushed the weights."
                    )

    async def close(self) -> None:
        await self.engine.close()


def check_versions(engine: Any, episodes: Iterable[Episode]) -> None:
    """``ServerPolicy.check`` when ``engine`` is one; in-process engines need no check."""
    if isinstance(engine, ServerPolicy):
        engine.check(episodes)


def attach_server(
    trainer: PushingTrainer,
    engine: InferenceEngine,
    weights_dir: str | os.PathLike[str],
    *,
    keep: int = 2,
) -> ServerPolicy:
    """Attach ``engine`` (a server) to ``trainer`` through a ``ServerPolicy`` and push the
    trainer's weights to it now; returns the ``ServerPolicy`` (an ``InferenceEngine``)."""
    if isinstance(engine, ServerPolicy):
        trainer.attach_engine(engine)
        return engine
    if in_process(engine):
        raise ConfigError(
            "engine",
            type(engine).__name__,
            "generates in this process and takes the policy's tensors",
            "attach it with trainer.attach_engine (or colocated_engine)",
        )
    check_trainable_engine(engine)
    policy = ServerPolicy(engine, trainer, weights_dir, keep=keep)
    trainer.attach_engine(policy)
    trainer.push_weights()
    return policy
