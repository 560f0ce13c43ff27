"""The tiny default policy, and loading any local transformers model.

The tiny policy is a 1.1M-parameter ``Qwen2ForCausalLM`` whose config, tokenizer and chat
template ship in ``agentgym/models/tiny/`` (built by ``scripts/build_tiny_tokenizer.py``), with
weights pre-trained on FrozenLake's output format only (``scripts/pretrain_tiny_format.py``: it
answers a turn with a fenced direction, drawn uniformly; RL teaches it which). Nothing is
downloaded.

::

    model, tokenizer = agentgym.models.load()                      # tiny, format-only weights
    model, tokenizer = agentgym.models.load(seed=0)                # tiny, random weights
    model, tokenizer = agentgym.models.load("runs/r1/checkpoint")   # any local HF model dir
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.core.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["TINY_DIR", "load", "load_tokenizer", "tiny_config"]

TINY_DIR = Path(__file__).resolve().parent / "tiny"
"""The shipped config, tokenizer, chat template and weights of the tiny policy."""

PRETRAINED = TINY_DIR / "model.safetensors"
"""Weights pre-trained on FrozenLake's output format only (``scripts/pretrain_tiny_format.py``)."""


def tiny_config(**overrides: Any) -> PretrainedConfig:
    """The tiny policy's config; ``overrides`` change fields (e.g. ``hidden_size=768``).

    The config is rebuilt from the shipped fields plus the overrides, so derived fields (per-layer
    types, head size) follow a changed ``num_hidden_layers`` or ``hidden_size``.
    """
    from transformers import AutoConfig

    base = AutoConfig.from_pretrained(TINY_DIR, local_files_only=True)
    for key, value in overrides.items():
        if not hasattr(base, key):
            raise ConfigError(
                key,
                value,
                "is not a field of the tiny policy's Qwen2 config",
                "use a Qwen2Config field such as hidden_size or num_hidden_layers",
            )
    fields = json.loads((TINY_DIR / "config.json").read_text())
    return AutoConfig.for_model(**{**fields, **overrides})


def load_tokenizer(name_or_path: str | os.PathLike[str] | None = None) -> PreTrainedTokenizerBase:
    """The tokenizer (with chat template) of the tiny policy, or of a local model directory."""
    from transformers import AutoTokenizer

    path = TINY_DIR if name_or_path is None else _local_dir(name_or_path)
    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def load(
    name_or_path: str | os.PathLike[str] | None = None,
    *,
    seed: int | None = None,
    dtype: torch.dtype | str | None = None,
    device: torch.device | str | None = None,
    config: PretrainedConfig | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` in eval mode.

    Args:
        name_or_path: ``None`` for the tiny policy, or a local directory
            holding a transformers model (``config.json``, weights, tokenizer).
        seed: ``None`` loads the tiny policy's shipped format-only weights; an int initialises
            its weights from that seed instead (random, untrained). Ignored for a directory.
        dtype: e.g. ``torch.bfloat16``; default float32 for the tiny policy, the checkpoint's own
            dtype for a directory.
        device: where to put the model; default CPU.
        config: a config to build instead of the tiny one (e.g. ``tiny_config(hidden_size=768)``);
            only with ``name_or_path=None``.
    """
    import torch
    from transformers import AutoModelForCausalLM

    torch_dtype = _dtype(dtype)
    if name_or_path is None and seed is None and config is None and PRETRAINED.is_file():
        model = AutoModelForCausalLM.from_pretrained(TINY_DIR, local_files_only=True)
        model = model.to(dtype=torch_dtype or torch.float32)
        tokenizer = load_tokenizer()
    elif name_or_path is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0 if seed is None else seed)
            model = AutoModelForCausalLM.from_config(config or tiny_config())
        model = model.to(dtype=torch_dtype or torch.float32)
        tokenizer = load_tokenizer()
    else:
        if config is not None:
            raise ConfigError(
                "config",
                type(config).__name__,
                "only applies to the tiny policy",
                "pass name_or_path=None, or drop config",
            )
        path = _local_dir(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True, dtype=torch_dtype if torch_dtype is not None else "auto"
        )
        tokenizer = load_tokenizer(path)
    if device is not None:
        model = model.to(device)
    model.eval()
    return model, tokenizer


def _dtype(dtype: torch.dtype | str | None) -> torch.dtype | None:
    import torch

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(resolved, torch.dtype):
        raise ConfigError(
            "dtype", dtype, "is not a torch dtype", 'use e.g. "float32" or "bfloat16"'
        )
    return resolved


def _local_dir(name_or_path: str | os.PathLike[str]) -> Path:
    path = Path(name_or_path).expanduser()
    if not path.is_dir():
        raise ConfigError(
            "name_or_path",
            str(name_or_path),
            "is not a local directory (nothing is downloaded)",
            "pass a directory with config.json and weights (e.g. a checkpoint saved by "
            "save_pretrained, or a model downloaded beforehand), or None for the tiny policy",
        )
    if not (path / "config.json").is_file():
        raise ConfigError(
            "name_or_path",
            str(name_or_path),
            "has no config.json, so it is not a transformers model",
            "point at the folder that holds config.json and the weights",
        )
    return path
