"""The plain torch backend: one process, the CPU or one GPU, bf16 autocast on a GPU."""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from agentgym.core.errors import ConfigError
from agentgym.trainers.backends.base import (
    OptimizerFactory,
    SchedulerFactory,
    check_micro_batch_tokens,
    clip_grad_norm,
    resolve_precision,
)

__all__ = ["TorchBackend"]

_STATE_FILE = "torch_state.pt"


def _device(device: str | torch.device) -> torch.device:
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", str(device), "CUDA is not available here", "use device='cpu'")
    if resolved.type not in ("cpu", "cuda"):
        raise ConfigError("device", str(device), "is not supported", "use auto, cpu or cuda[:N]")
    return resolved


class TorchBackend:
    """CPU or one GPU. Gradients accumulate over micro-batches; ``step`` clips the global norm
    (``torch.nn.utils.clip_grad_norm_``), then steps the optimizer and the scheduler.

    Args:
        device: ``auto`` (a GPU when there is one), ``cpu`` or ``cuda[:N]``.
        precision: ``auto``, ``fp32`` or ``bf16`` (autocast; weights and optimizer stay fp32).
        micro_batch_tokens: Most padded tokens per forward pass; None: the whole minibatch.
    """

    name = "torch"

    def __init__(
        self,
        *,
        device: str | torch.device = "auto",
        precision: str = "auto",
        micro_batch_tokens: int | None = None,
    ) -> None:
        self._device = _device(device)
        self.precision = resolve_precision(precision, self._device)
        self.micro_batch_tokens = check_micro_batch_tokens(micro_batch_tokens)
        self._module: nn.Module | None = None
        self._optimizer: Optimizer | None = None
        self._scheduler: LRScheduler | None = None
        self._max_grad_norm: float | None = None

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    @property
    def device(self) -> torch.device:
        return self._device

    def prepare(
        self,
        module: nn.Module,
        make_optimizer: OptimizerFactory,
        make_scheduler: SchedulerFactory,
        *,
        max_grad_norm: float | None,
    ) -> None:
        self._module = module.to(self._device)
        self._optimizer = make_optimizer(self._module)
        self._scheduler = make_scheduler(self._optimizer)
        self._max_grad_norm = max_grad_norm

    def prepare_frozen(self, module: nn.Module) -> nn.Module:
        return module.to(self._device).eval().requires_grad_(False)

    def autocast(self) -> AbstractContextManager[Any]:
        if self.precision == "bf16":
            return torch.autocast(self._device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def forward(self, **inputs: Any) -> Any:
        with self.autocast():
            return self._prepared()(**inputs)

    def backward(self, loss: Tensor) -> None:
        loss.backward()

    def step(self) -> float:
        optimizer = self._require(self._optimizer)
        norm = clip_grad_norm(self._prepared(), self._max_grad_norm)
        optimizer.step()
        self._require(self._scheduler).step()
        optimizer.zero_grad(set_to_none=True)
        return norm

    def learning_rate(self) -> float:
        return float(self._require(self._optimizer).param_groups[0]["lr"])

    def all_reduce(self, tensor: Tensor) -> Tensor:
        return tensor

    def broadcast_object(self, obj: Any) -> Any:
        return obj

    def barrier(self) -> None:
        return None

    def gathered_state_dict(self, module: nn.Module) -> dict[str, Tensor]:
        return {name: t.detach() for name, t in module.state_dict().items()}

    def save_checkpoint(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        state = {
            "module": self._prepared().state_dict(),
            "optimizer": self._require(self._optimizer).state_dict(),
            "scheduler": self._require(self._scheduler).state_dict(),
        }
        torch.save(state, directory / _STATE_FILE)

    def load_checkpoint(self, directory: Path) -> None:
        path = directory / _STATE_FILE
        if not path.is_file():
            raise ConfigError(
                "checkpoint",
                str(directory),
                f"has no {_STATE_FILE}: it was not written by the torch backend",
                "load it with the backend that saved it",
            )
        state = torch.load(path, map_location=self._device, weights_only=True)
        self._prepared().load_state_dict(state["module"])
        self._require(self._optimizer).load_state_dict(state["optimizer"])
        self._require(self._scheduler).load_state_dict(state["scheduler"])

    def _prepared(self) -> nn.Module:
        return self._require(self._module)

    @staticmethod
    def _require(value: Any) -> Any:
        if value is None:
            raise ConfigError(
                "backend", "torch", "is not prepared yet", "call prepare(module, ...) first"
            )
        return value
