"""Inference engines behind one protocol: ``await engine.generate(ids, SamplingParams(...))``.

============== =====================================================================================
``HFEngine``   transformers in-process (CPU or GPU): dynamic batching, KV cache, exact logprobs
``OpenAIEngine`` any OpenAI-compatible server; token-level ``/v1/completions`` where offered
``SGLangEngine`` an SGLang server (launched or attached): native ``/generate``, weight sync
============== =====================================================================================

``agentgym serve`` (``agentgym.inference.server``) puts an OpenAI-compatible server
(``openai_routes``, shared with the agent gateway), and SGLang's native API (``sglang_routes``;
shapes in ``sglang_api``), in front of ``HFEngine``.
Heavy modules (torch, httpx) load on first use of the name that needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentgym.inference.base import (
    Completion,
    EngineClosedError,
    FinishReason,
    InferenceEngine,
    LogprobMode,
    SamplingParams,
)

if TYPE_CHECKING:
    from agentgym.inference.chat import parse_assistant, render_ids
    from agentgym.inference.hf import EngineStats, HFEngine
    from agentgym.inference.openai import OpenAIEngine
    from agentgym.inference.sampling import choice_next_tokens, sample_rows, sampling_logprobs
    from agentgym.inference.sglang import SGLangEngine

__all__ = [
    "Completion",
    "EngineClosedError",
    "EngineStats",
    "FinishReason",
    "HFEngine",
    "InferenceEngine",
    "LogprobMode",
    "OpenAIEngine",
    "SGLangEngine",
    "SamplingParams",
    "choice_next_tokens",
    "parse_assistant",
    "render_ids",
    "sample_rows",
    "sampling_logprobs",
]

_LAZY = {
    "EngineStats": "agentgym.inference.hf",
    "HFEngine": "agentgym.inference.hf",
    "OpenAIEngine": "agentgym.inference.openai",
    "SGLangEngine": "agentgym.inference.sglang",
    "choice_next_tokens": "agentgym.inference.sampling",
    "parse_assistant": "agentgym.inference.chat",
    "render_ids": "agentgym.inference.chat",
    "sample_rows": "agentgym.inference.sampling",
    "sampling_logprobs": "agentgym.inference.sampling",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentgym.inference' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
