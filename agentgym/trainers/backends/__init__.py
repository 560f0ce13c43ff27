"""Trainer backends: devices, precision, distribution, the optimizer step. No RL inside.

``make_backend("torch", device="cpu")`` or ``make_backend("deepspeed", zero_stage=3)``; both
satisfy the ``Backend`` Protocol. DeepSpeed is imported only when its backend is made.
"""

from __future__ import annotations

import inspect
from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.core.suggest import did_you_mean
from agentgym.trainers.backends.base import Backend, OptimizerFactory, Precision, SchedulerFactory
from agentgym.trainers.backends.torch_backend import TorchBackend

__all__ = [
    "BACKENDS",
    "Backend",
    "OptimizerFactory",
    "Precision",
    "SchedulerFactory",
    "TorchBackend",
    "make_backend",
]

BACKENDS = ("torch", "deepspeed")


def make_backend(name: str, **options: Any) -> Backend:
    """The backend called ``name`` built with ``options`` (its constructor's keyword args)."""
    if name == "torch":
        factory: Any = TorchBackend
    elif name == "deepspeed":
        from agentgym.trainers.backends.deepspeed_backend import DeepSpeedBackend

        factory = DeepSpeedBackend
    else:
        fix = did_you_mean(str(name), BACKENDS, kind="backends")
        raise ConfigError("backend", name, "is not a trainer backend", fix)
    known = [p for p in inspect.signature(factory).parameters if p != "self"]
    for key, value in options.items():
        if key not in known:
            fix = did_you_mean(key, known, kind="options")
            raise ConfigError(key, value, f"is not an option of the {name} backend", fix)
    backend: Backend = factory(**options)
    return backend
