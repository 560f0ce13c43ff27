"""The inference engine beside the trainer: on its device, sharing its weights where it can.

``fit`` and ``agentgym train`` sample from an ``HFEngine`` placed by ``colocated_engine``. By
default (``device="auto"``) the engine runs on the trainer's device and generates with the
policy module itself: no second copy of the weights, and pushing the weights after an update is a
version bump (``HFEngine.update_weights`` skips tensors that already are the model's own; the
engine's prefix cache is dropped, its fused decode weights rebuilt from the new parameters).

That is safe because ``fit`` never overlaps the two: it collects a batch (every request
finished), then updates, then pushes the weights (which waits for the engine to be idle). The
engine runs its steps in ``eval()`` mode and ``torch.inference_mode`` and restores the module's
mode after each step, so a trainer that switches the policy to ``train()`` is unaffected.
Asynchronous training (``max_staleness`` >= 1) does overlap them: its background collection
samples from ``engine_copy``, an engine on a copy of the policy (``agentgym.trainers.pipeline``).

The engine gets a copy of the policy instead when sharing cannot work:

- its device differs from the trainer's (``engine_device="cpu"`` beside a GPU trainer, or another
  GPU): a copy moved there once; each push copies the tensors device to device;
- ZeRO-3: the trainer's parameters are partitioned across ranks (each holds a shard); the copy is
  built from a gathered state dict, and each push gathers again (on the GPU) and copies GPU to
  GPU;
- ZeRO-3 parameter offload: the parameters live on the CPU between uses; as ZeRO-3, plus the
  gather's host-to-device transfer that the offload implies.

A LoRA policy is shared as it is: the engine runs the adapters' forward, which is exactly the
policy. An engine elsewhere gets a plain model (no adapters) with the merged weights,
``W + (alpha / rank) B A``, merged again on the trainer's device at each push.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import torch

from agentgym.core.errors import ConfigError

if TYPE_CHECKING:
    from agentgym.inference import HFEngine
    from agentgym.trainers.trainer import Trainer

__all__ = ["colocated_engine", "engine_copy", "resolve_engine_device", "shares_weights"]


def resolve_engine_device(device: str, trainer_device: torch.device) -> torch.device:
    """``device`` (``auto``, ``cpu``, ``cuda`` or ``cuda:N``) as a torch device; ``auto`` is
    the trainer's."""
    if not isinstance(device, str):
        raise ConfigError("engine_device", device, "is not a string", "use auto, cpu or cuda:0")
    if device == "auto":
        return torch.device(trainer_device)
    try:
        resolved = torch.device(device)
    except RuntimeError:
        resolved = None
    if resolved is None or resolved.type not in ("cpu", "cuda"):
        raise ConfigError(
            "engine_device", device, "is not a device", "use auto, cpu, cuda or cuda:N"
        )
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                "engine_device", device, "needs CUDA, and torch sees no GPU", "use auto or cpu"
            )
        count = torch.cuda.device_count()
        if resolved.index is not None and resolved.index >= count:
            raise ConfigError(
                "engine_device", device, f"is not one of the {count} GPU(s)", "use cuda:0"
            )
        if resolved.index is None:
            resolved = torch.device("cuda", torch.cuda.current_device())
    return resolved


def _partitioned(policy: torch.nn.Module) -> bool:
    """Whether DeepSpeed ZeRO-3 holds the policy's parameters (each rank a shard)."""
    return any(hasattr(p, "ds_id") for p in policy.parameters())


def shares_weights(policy: torch.nn.Module, device: torch.device) -> bool:
    """Whether an engine on ``device`` can generate with ``policy``'s own parameters."""
    if _partitioned(policy):
        return False
    devices = {p.device for p in policy.parameters()}
    return devices == {device}


def _engine_copy(trainer: Trainer, device: torch.device) -> torch.nn.Module:
    """A copy of the policy on ``device`` (collective under ZeRO-3: every rank calls it)."""
    policy = trainer.module.policy
    if not _partitioned(policy) and getattr(trainer, "lora", None) is None:
        return copy.deepcopy(policy).to(device)
    # the plain model's weights: gathered on the trainer's device, LoRA merged
    state = trainer.policy_state_dict()
    dtype = next(iter(state.values())).dtype
    model = type(policy)._from_config(policy.config, torch_dtype=dtype).to(device)
    with torch.no_grad():
        model.load_state_dict(state, strict=False)  # device to device
    return model


def colocated_engine(
    trainer: Trainer, device: str = "auto", **engine_options: Any
) -> tuple[HFEngine, bool]:
    """An ``HFEngine`` for ``trainer``'s policy on ``device``, attached to the trainer; returns
    it and whether it shares the trainer's weights (see the module docstring)."""
    from agentgym.inference import HFEngine

    target = resolve_engine_device(device, trainer.backend.device)
    policy = trainer.module.policy
    shared = shares_weights(policy, target)
    model = policy if shared else _engine_copy(trainer, target)
    engine_options.setdefault("seed", trainer.config.seed)
    training = policy.training
    engine = HFEngine(model, trainer.tokenizer, **engine_options)  # sets eval()
    if shared and training:
        policy.train()  # the trainer's mode stays its own; the engine switches per step
    trainer.attach_engine(engine)
    return engine, shared


def engine_copy(trainer: Trainer, device: str = "auto", **engine_options: Any) -> HFEngine:
    """An ``HFEngine`` on a copy of ``trainer``'s policy on ``device``, not attached: for a
    collector that runs while the optimizer changes the policy (asynchronous training,
    ``agentgym.trainers.pipeline``), whose owner pushes the weights. Collective under ZeRO-3."""
    from agentgym.inference import HFEngine

    target = resolve_engine_device(device, trainer.backend.device)
    engine_options.setdefault("seed", trainer.config.seed)
    return HFEngine(_engine_copy(trainer, target), trainer.tokenizer, **engine_options)
