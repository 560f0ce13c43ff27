"""The backend seam: where the trained module lives and how it runs.

A backend owns devices, precision, distribution, the optimizer step and checkpoint I/O of its
engine. It knows nothing about RL: the trainer composes losses from
``agentgym.trainers.algorithms`` and hands the backend a scalar to back-propagate. Backends share
this Protocol, not a base class::

    backend.prepare(module, make_optimizer, make_scheduler, max_grad_norm=1.0)

    def one(micro):                              # the same number on every rank
        out = backend.forward(**micro.inputs)    # under the backend's precision
        backend.backward(loss_of(out, micro))    # gradients are *summed* over ranks
        return stats_of(out)

    stats = backend.map_micro_batches(one, micro_batches)   # in order, maybe several at once
    grad_norm = backend.step()                   # clip, optimizer and scheduler step, zero grads

Loss contract: each rank back-propagates its share of the global loss (the loss of its rows,
normalised by the whole minibatch's count, see ``aggregate(normalizer=...)``), so the sum over
micro-batches and ranks is the loss of the minibatch, and micro-batching or sharding gives the
gradient of one big batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from agentgym.core.errors import ConfigError

__all__ = [
    "Backend",
    "OptimizerFactory",
    "Precision",
    "SchedulerFactory",
    "check_micro_batch_tokens",
    "clip_grad_norm",
    "resolve_precision",
]

Precision = Literal["auto", "fp32", "bf16"]
"""``fp32``; ``bf16`` (autocast on the torch backend, DeepSpeed's bf16 mode with fp32 master
weights); ``auto``: bf16 on a GPU that supports it, fp32 otherwise."""

OptimizerFactory = Callable[[nn.Module], Optimizer]
"""Builds the optimizer over a module's parameters (called by the backend once placed)."""

SchedulerFactory = Callable[[Optimizer], LRScheduler]
"""Builds the learning-rate scheduler over the optimizer the backend actually steps."""

M = TypeVar("M")
R = TypeVar("R")


@runtime_checkable
class Backend(Protocol):
    """Runs one trainable module (and frozen ones) on some devices; see the module docstring."""

    name: str
    micro_batch_tokens: int | None
    """Most padded tokens (rows x length) in one forward pass; None: a rank's rows at once."""

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    def prepare(
        self,
        module: nn.Module,
        make_optimizer: OptimizerFactory,
        make_scheduler: SchedulerFactory,
        *,
        max_grad_norm: float | None,
    ) -> None:
        """Place ``module``, build its optimizer and scheduler; call once before training."""
        ...

    def prepare_frozen(self, module: nn.Module) -> nn.Module:
        """Place a module that is only evaluated (e.g. the reference policy); returns it."""
        ...

    def autocast(self) -> AbstractContextManager[Any]:
        """The precision context for forward passes of frozen modules."""
        ...

    @property
    def concurrency(self) -> int:
        """How many micro-batches ``map_micro_batches`` runs at once; planners cut at least
        this many (and split the token budget among them) so that none sits idle."""
        ...

    def map_micro_batches(self, fn: Callable[[M], R], micro_batches: Sequence[M]) -> list[R]:
        """``[fn(m) for m in micro_batches]``, where ``fn`` calls ``forward`` (and
        ``backward``). A backend may run several at once; the gradients it accumulates are then
        the same sum, added in an order that does not depend on timing, and ``fn`` runs in the
        caller's grad mode."""
        ...

    def forward(self, **inputs: Any) -> Any:
        """The trained module's forward pass, under the backend's precision."""
        ...

    def backward(self, loss: Tensor) -> None:
        """Accumulate the gradient of this rank's share of the loss."""
        ...

    def step(self) -> float:
        """Clip, step the optimizer and scheduler, zero the gradients; returns the global
        gradient norm before clipping."""
        ...

    def learning_rate(self) -> float: ...

    def all_reduce(self, tensor: Tensor) -> Tensor:
        """Sum ``tensor`` over ranks, in place; returns it."""
        ...

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        ...

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank. Collective: call it
        from the main thread of every rank, in the same order as the other collectives."""
        ...

    def barrier(self) -> None: ...

    def gathered_state_dict(self, module: nn.Module) -> dict[str, Tensor]:
        """The full state dict of ``module`` (the prepared module or a submodule of it), with
        partitioned parameters gathered. Collective: every rank calls it. Tensors may share
        storage with the live parameters: copy or consume them before the next step."""
        ...

    def save_checkpoint(self, directory: Path) -> None:
        """Write the module, optimizer and scheduler state under ``directory``; every rank
        calls it."""
        ...

    def load_checkpoint(self, directory: Path) -> None:
        """Restore what ``save_checkpoint`` wrote (same world size); every rank calls it."""
        ...


def resolve_precision(precision: str, device: torch.device) -> Literal["fp32", "bf16"]:
    """``precision`` with ``auto`` resolved for ``device``."""
    if precision not in ("auto", "fp32", "bf16"):
        raise ConfigError("precision", precision, "is not a precision", "use auto, fp32 or bf16")
    if precision == "auto":
        on_gpu = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return "bf16" if on_gpu else "fp32"
    return "bf16" if precision == "bf16" else "fp32"


def check_micro_batch_tokens(value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(
            "micro_batch_tokens",
            value,
            "must be an int >= 1 or None",
            "use e.g. 16384 (rows x padded length per forward pass), or None for no limit",
        )
    return value


def parameters_of(module: nn.Module) -> Iterator[nn.Parameter]:
    """The parameters that receive gradients."""
    return (p for p in module.parameters() if p.requires_grad)


def clip_grad_norm(module: nn.Module, max_norm: float | None) -> float:
    """The global L2 norm of the gradients, accumulated in float64 as DeepSpeed's ZeRO does (a
    float32 norm of a million gradients is off by ~1e-6 relative), then clipped to ``max_norm``
    the way torch and DeepSpeed both do (``g · min(1, max_norm / (norm + 1e-6))``)."""
    params = [p for p in parameters_of(module) if p.grad is not None]
    if not params:
        return 0.0
    norms = [torch.linalg.vector_norm(p.grad, dtype=torch.float64) for p in params]  # type: ignore[arg-type]
    total = torch.linalg.vector_norm(torch.stack(norms))
    if max_norm is not None:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return float(total)
