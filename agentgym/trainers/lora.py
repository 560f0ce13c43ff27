"""LoRA through ``peft``: low-rank adapters on the policy's linear layers, the only weights an
update trains.

``add_lora`` injects the adapters into the transformers model in place (peft's
``inject_adapter_in_model``: the model stays the same object, its targeted ``nn.Linear`` layers
become ``base_layer`` + ``lora_A`` / ``lora_B``) and freezes every other parameter. ``B`` starts
at zero, so the policy starts as the base model. The backend trains, shards and checkpoints the
adapted model like any other (its state dict holds base and adapter weights, so a resume is
exact); ``merged_state_dict`` turns that state dict back into the base model's keys with
``W + (alpha / rank) · B A`` folded in: the weights an engine of the plain model (or a model
directory written by ``Trainer.save``) takes.

Only the policy gets adapters: the KL reference is the base model as it was, and PPO's value
model is trained whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from agentgym.core.errors import ConfigError
from agentgym.extras import pip_install

__all__ = ["LoraSettings", "add_lora", "merged_state_dict"]

_A, _B = ".lora_A.default.weight", ".lora_B.default.weight"


@dataclass(frozen=True)
class LoraSettings:
    rank: int
    alpha: float
    targets: str
    """Comma-separated module names (``q_proj,v_proj``) or ``all-linear`` (every linear
    layer but the output layer)."""

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


def _target_modules(targets: str) -> str | list[str]:
    names = [t.strip() for t in targets.split(",") if t.strip()]
    if not names:
        raise ConfigError(
            "lora_targets", targets, "names no module", "use all-linear or e.g. q_proj,v_proj"
        )
    return "all-linear" if names == ["all-linear"] else names


def add_lora(model: nn.Module, settings: LoraSettings, seed: int = 0) -> nn.Module:
    """``model`` with LoRA adapters on ``settings.targets`` (in place; ``A`` drawn from
    ``seed``, ``B`` zero; dropout 0, so the adapted forward pass is deterministic), every other
    parameter frozen."""
    try:
        from peft import LoraConfig, inject_adapter_in_model
    except ImportError:
        raise ConfigError(
            "lora_rank", settings.rank, "needs the peft package", pip_install("lora")
        ) from None
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,  # type: ignore[arg-type]  # peft says int; a float scales
        target_modules=_target_modules(settings.targets),
        lora_dropout=0.0,
        bias="none",
    )
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            inject_adapter_in_model(config, model)
    except ValueError as error:  # peft: "Target modules {...} not found in the base model"
        raise ConfigError(
            "lora_targets", settings.targets, f"does not fit this model: {error}",
            "use all-linear, or names of the model's linear layers (e.g. q_proj,v_proj)",
        ) from None
    for name, parameter in model.named_parameters():
        parameter.requires_grad_("lora_" in name)
    return model


def merged_state_dict(state: dict[str, Tensor], scaling: float) -> dict[str, Tensor]:
    """An adapted model's state dict in the base model's keys, each adapted layer's weight
    ``W + scaling · B A`` (computed in fp32, returned in ``W``'s dtype)."""
    merged: dict[str, Tensor] = {}
    for name, tensor in state.items():
        if name.endswith((_A, _B)):
            continue
        if ".base_layer." not in name:
            merged[name] = tensor
            continue
        layer, _, leaf = name.rpartition(".base_layer.")
        key = f"{layer}.{leaf}"
        if leaf == "weight" and layer + _A in state:
            delta = state[layer + _B].float() @ state[layer + _A].float()
            tensor = (tensor.float() + scaling * delta).to(tensor.dtype)
        merged[key] = tensor
    return merged
