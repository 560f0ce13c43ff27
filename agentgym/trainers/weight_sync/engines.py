"""What weight sync asks of an engine, and its errors.

Which engines generate in this process (they take the policy's tensors, not files:
``in_process``), which servers training can push to (``check_trainable_engine``: an
OpenAI-compatible API loads no weights), a server's URL for messages (``engine_url``), whether a
failure was a server's answer or its silence (``answered``), and the two errors a push or a
batch can raise: ``InferenceServerError`` and ``UnknownPolicyVersion``.
"""

from __future__ import annotations

import sys
from typing import Any

from agentgym.core.errors import ConfigError, Error, InfraError

__all__ = [
    "RESUME_FIX",
    "START_FIX",
    "InferenceServerError",
    "UnknownPolicyVersion",
    "answered",
    "check_trainable_engine",
    "engine_url",
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


def engine_url(engine: Any) -> str:
    """The server's base URL, for messages (the engine's class name when it has none)."""
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
            f"openai ({engine_url(engine)})",
            "has no weight-update API: after the first update it would go on sampling the "
            "policy it was started with",
            "use --engine sglang (agentgym serve and SGLang load weights from disk), or "
            "--engine hf",
        )


def answered(error: BaseException) -> bool:
    """Whether ``error`` is a server's HTTP error status (it answered)."""
    http = sys.modules.get("agentgym.inference._http")  # not imported: no such error (no httpx)
    return http is not None and isinstance(error, http.HTTPStatusError)
