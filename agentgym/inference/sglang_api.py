"""SGLang's native HTTP API in one place: paths, field names, request and response shapes.

Both sides use it: ``SGLangEngine`` (the client) builds its requests and reads the answers here,
and ``agentgym serve``'s native routes (``agentgym.inference.sglang_routes``) read requests and
build answers here, so the two cannot drift apart. The shapes are SGLang's own
(``python/sglang/srt/entrypoints/http_server.py`` and ``managers/io_struct.py``, 0.4.x-0.5.x);
answers recorded from real SGLang servers live in ``tests/fixtures/sglang/`` and the tests check
both sides against them.

``POST /generate``: ``{"input_ids": [...] | [[...], ...], "text": ..., "sampling_params": {...},
"return_logprob": bool, "logprob_start_len": int, "return_text_in_logprobs": bool}`` answers
``{"text", "output_ids", "meta_info": {"id", "finish_reason", "prompt_tokens", "weight_version",
"completion_tokens", "cached_tokens", "output_token_logprobs": [[logprob, token_id, text|null],
...], ...}}`` (a list of those for a batch). ``finish_reason`` is ``{"type": "length", "length":
n}``, ``{"type": "stop", "matched": id_or_string}`` or ``{"type": "abort", "message": ...}``.

SGLang's weight version is a string (``"default"`` until a weight update names one); agentgym
numbers versions 0, 1, 2, ... and sends ``str(n)``, so a numeric version read back is an int.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentgym.core.errors import ConfigError, InfraError
from agentgym.inference.base import Completion, LogprobMode, SamplingParams

__all__ = [
    "CONTINUE_GENERATION",
    "FLUSH_CACHE",
    "GENERATE",
    "GET_LOAD",
    "GET_MODEL_INFO",
    "HEALTH",
    "HEALTH_GENERATE",
    "PAUSE_GENERATION",
    "PAUSE_MODES",
    "UPDATE_WEIGHTS_FROM_DISK",
    "UPDATE_WEIGHTS_FROM_TENSOR",
    "GenerateRequest",
    "check_update_response",
    "finish_reason",
    "generate_request",
    "generate_response",
    "model_info_response",
    "parse_generate_request",
    "parse_generate_response",
    "parse_sampling_params",
    "parse_update_request",
    "sampling_params",
    "update_request",
    "update_response",
    "version_number",
]

GENERATE = "/generate"
UPDATE_WEIGHTS_FROM_DISK = "/update_weights_from_disk"
UPDATE_WEIGHTS_FROM_TENSOR = "/update_weights_from_tensor"
FLUSH_CACHE = "/flush_cache"
PAUSE_GENERATION = "/pause_generation"
CONTINUE_GENERATION = "/continue_generation"
GET_MODEL_INFO = "/get_model_info"
GET_LOAD = "/get_load"
HEALTH = "/health"
HEALTH_GENERATE = "/health_generate"

PAUSE_MODES = ("abort", "retract", "in_place")

SGLANG_MAX_NEW_TOKENS = 128
"""SGLang's default ``max_new_tokens`` when a request names none."""

# Sampling fields agentgym serve accepts without acting on them (they only shape the text).
_IGNORED_SAMPLING = frozenset(
    {"skip_special_tokens", "no_stop_trim", "spaces_between_special_tokens", "n"}
)
_SAMPLING_FIELDS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "max_new_tokens",
        "stop",
        "stop_token_ids",
        "ignore_eos",
        "sampling_seed",
    }
)


# -- sampling ---------------------------------------------------------------------------------


def sampling_params(sampling: SamplingParams) -> dict[str, Any]:
    """``SamplingParams`` as SGLang ``sampling_params``."""
    params: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else -1,
        "max_new_tokens": sampling.max_tokens,
        "ignore_eos": sampling.ignore_eos,
        "skip_special_tokens": True,
        "no_stop_trim": False,
    }
    if sampling.stop:
        params["stop"] = list(sampling.stop)
    if sampling.stop_token_ids:
        params["stop_token_ids"] = list(sampling.stop_token_ids)
    if sampling.seed is not None:
        params["sampling_seed"] = sampling.seed
    return params


def parse_sampling_params(params: Any) -> SamplingParams:
    """SGLang ``sampling_params`` (SGLang's defaults for what is missing) as ``SamplingParams``.

    Raises ``ConfigError`` for a field agentgym serve does not implement (e.g.
    ``frequency_penalty``, ``json_schema``) or for ``n > 1``."""
    params = params or {}
    if not isinstance(params, dict):
        raise ConfigError("sampling_params", params, "must be a JSON object", "send a dict")
    unknown = sorted(set(params) - _SAMPLING_FIELDS - _IGNORED_SAMPLING)
    if unknown:
        raise ConfigError(
            "sampling_params",
            unknown,
            "are not supported by agentgym serve",
            f"use only {sorted(_SAMPLING_FIELDS)}",
        )
    if int(params.get("n") or 1) != 1:
        raise ConfigError("n", params["n"], "must be 1", "send n separate requests")

    def get(name: str, default: Any) -> Any:
        value = params.get(name)
        return default if value is None else value

    return SamplingParams(
        temperature=float(get("temperature", 1.0)),
        top_p=float(get("top_p", 1.0)),
        top_k=max(int(get("top_k", -1)), 0),
        max_tokens=int(get("max_new_tokens", SGLANG_MAX_NEW_TOKENS)),
        stop=get("stop", ()),
        stop_token_ids=get("stop_token_ids", ()),
        seed=params.get("sampling_seed"),
        ignore_eos=bool(get("ignore_eos", False)),
    )


# -- /generate --------------------------------------------------------------------------------


def generate_request(prompt_token_ids: Sequence[int], sampling: SamplingParams) -> dict[str, Any]:
    """The body of one token-in, token-out ``/generate`` request with sampling logprobs."""
    return {
        "input_ids": [int(t) for t in prompt_token_ids],
        "sampling_params": sampling_params(sampling),
        "return_logprob": True,
        "logprob_start_len": -1,
    }


@dataclass
class GenerateRequest:
    """A parsed ``/generate`` body: ``prompts`` are token-id lists or texts, one per request."""

    prompts: list[list[int] | str]
    sampling: list[SamplingParams]
    batch: bool
    return_logprob: bool
    return_text_in_logprobs: bool


def parse_generate_request(body: dict[str, Any]) -> GenerateRequest:
    """Read a ``/generate`` body; ``ConfigError`` for what agentgym serve cannot answer."""
    if body.get("stream"):
        raise ConfigError("stream", True, "is not supported by agentgym serve", "send stream=false")
    prompts, batch = _prompts(body)
    params = body.get("sampling_params")
    if isinstance(params, list):
        if not batch or len(params) != len(prompts):
            raise ConfigError(
                "sampling_params",
                f"a list of {len(params)}",
                f"must match the batch of {len(prompts)} prompts",
                "send one dict for all, or one per prompt",
            )
        sampling = [parse_sampling_params(p) for p in params]
    else:
        sampling = [parse_sampling_params(params)] * len(prompts)
    return GenerateRequest(
        prompts=prompts,
        sampling=sampling,
        batch=batch,
        return_logprob=_flag(body.get("return_logprob")),
        return_text_in_logprobs=_flag(body.get("return_text_in_logprobs")),
    )


def _flag(value: Any) -> bool:
    """SGLang's per-request flags may be a bool or a per-prompt list of bools."""
    return any(value) if isinstance(value, list) else bool(value)


def _prompts(body: dict[str, Any]) -> tuple[list[list[int] | str], bool]:
    ids, text = body.get("input_ids"), body.get("text")
    if (ids is None) == (text is None):
        raise ConfigError(
            "input_ids",
            ids,
            "exactly one of input_ids and text must be given",
            "send input_ids (token ids) or text",
        )
    if text is not None:
        texts = text if isinstance(text, list) else [text]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ConfigError("text", text, "must be a string or a list of strings", "fix text")
        return list(texts), isinstance(text, list)
    if isinstance(ids, list) and ids and all(_is_id(t) for t in ids):
        return [list(ids)], False
    if (
        isinstance(ids, list)
        and ids
        and all(isinstance(p, list) and p and all(_is_id(t) for t in p) for p in ids)
    ):
        return [list(p) for p in ids], True
    raise ConfigError(
        "input_ids",
        str(ids)[:80],
        "must be a non-empty list of token ids, or a list of such lists",
        "send e.g. [1, 2, 3] or [[1, 2], [3]]",
    )


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def finish_reason(completion: Completion) -> dict[str, Any]:
    """SGLang's ``meta_info.finish_reason`` for ``completion``."""
    if completion.finish_reason == "length":
        return {"type": "length", "length": len(completion.token_ids)}
    if completion.finish_reason == "stop":
        return {"type": "stop", "matched": completion.stop}
    return {"type": "abort", "message": str(completion.info.get("reason", "aborted"))}


def generate_response(
    completion: Completion,
    *,
    prompt: Sequence[int],
    rid: str,
    weight_version: str,
    return_logprob: bool,
    token_texts: Sequence[str | None] | None = None,
    e2e_latency: float = 0.0,
) -> dict[str, Any]:
    """One ``/generate`` answer, as SGLang's non-streaming ``generate_request`` returns it.

    ``meta_info.logprob_mode`` is agentgym's addition: what the logprobs are the log of (an
    ``HFEngine`` reports the sampling distribution's; SGLang's are ``"temperature"``)."""
    ids = [int(t) for t in completion.token_ids]
    meta: dict[str, Any] = {
        "id": rid,
        "finish_reason": finish_reason(completion),
        "prompt_tokens": len(prompt),
        "weight_version": weight_version,
        "total_retractions": 0,
    }
    if return_logprob:
        texts = list(token_texts) if token_texts is not None else [None] * len(ids)
        meta["input_token_logprobs"] = [[None, int(prompt[-1]), None]] if prompt else []
        triples = zip(completion.logprobs, ids, texts, strict=True)
        meta["output_token_logprobs"] = [[float(lp), t, text] for lp, t, text in triples]
        meta["logprob_mode"] = completion.logprob_mode
    meta.update(completion_tokens=len(ids), cached_tokens=0, e2e_latency=e2e_latency)
    return {"text": completion.text or "", "output_ids": ids, "meta_info": meta}


def version_number(version: Any) -> int | None:
    """A weight version as agentgym's int (``"3"`` -> 3); ``None`` for SGLang's ``"default"``."""
    if isinstance(version, int) and not isinstance(version, bool):
        return version
    if isinstance(version, str) and version.strip().isdigit():
        return int(version)
    return None


def parse_generate_response(answer: Any, weight_version: int) -> Completion:
    """A ``/generate`` answer as a ``Completion``.

    ``weight_version`` is the client's count, used when the server reports no numeric version
    (a real SGLang server reports ``"default"`` until a weight update names a version)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("meta_info"), dict):
        raise InfraError(f"SGLang's /generate answer has no meta_info: {str(answer)[:300]}")
    meta = answer["meta_info"]
    ids, logprobs = _token_logprobs(meta)
    if answer.get("output_ids") is not None:
        ids = [int(t) for t in answer["output_ids"]]
    if len(logprobs) != len(ids):
        raise InfraError(f"SGLang returned {len(ids)} tokens but {len(logprobs)} logprobs")
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else finish
    matched = finish.get("matched") if isinstance(finish, dict) else None
    reported = version_number(meta.get("weight_version"))
    mode: LogprobMode = meta.get("logprob_mode", "temperature")
    return Completion(
        token_ids=ids,
        logprobs=logprobs,
        finish_reason=kind if kind in ("stop", "length") else "abort",
        text=answer.get("text"),
        logprob_mode=mode if mode in ("sampling", "temperature", "raw") else "temperature",
        weight_version=weight_version if reported is None else reported,
        stop=matched if isinstance(matched, str | int) else None,
        info={
            "meta_info": {
                k: v for k, v in meta.items() if not k.startswith(("output_token", "input_token"))
            }
        },
    )


def _token_logprobs(meta: dict[str, Any]) -> tuple[list[int], list[float]]:
    # SGLang's Engine (and some versions' HTTP answers) split the triples into _val / _idx lists.
    if "output_token_logprobs_val" in meta:
        return [int(t) for t in meta["output_token_logprobs_idx"]], [
            float(v) for v in meta["output_token_logprobs_val"]
        ]
    ids: list[int] = []
    values: list[float] = []
    for item in meta.get("output_token_logprobs") or []:
        if isinstance(item, dict):
            values.append(float(item["logprob"]))
            ids.append(int(item["token_id"]))
        else:
            values.append(float(item[0]))
            ids.append(int(item[1]))
    return ids, values


# -- weight updates ---------------------------------------------------------------------------


def update_request(
    model_path: str | os.PathLike[str], weight_version: int, *, flush_cache: bool = True
) -> dict[str, Any]:
    """The body of ``/update_weights_from_disk``: ``model_path``'s weights as ``weight_version``."""
    return {
        "model_path": str(model_path),
        "flush_cache": flush_cache,
        "weight_version": str(weight_version),
    }


def parse_update_request(body: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """``(model_path, weight_version, load_format)`` of an ``/update_weights_from_disk`` body."""
    path = body.get("model_path")
    if not isinstance(path, str) or not path:
        raise ConfigError(
            "model_path", path, "must be a non-empty string", "send the checkpoint directory"
        )
    version = body.get("weight_version")
    return path, None if version is None else str(version), body.get("load_format")


def update_response(success: bool, message: str, num_paused_requests: int = 0) -> dict[str, Any]:
    """``/update_weights_from_disk``'s answer (HTTP 200 on success, 400 on failure)."""
    return {"success": success, "message": message, "num_paused_requests": num_paused_requests}


def check_update_response(
    answer: Any,
    path: str,
    fix: str = "check that the directory holds safetensors of the served model's architecture",
) -> None:
    """Raise ``InfraError`` unless ``answer`` reports a successful weight update."""
    if isinstance(answer, dict) and answer.get("success") in (False, "False", "false"):
        raise InfraError(
            f"the SGLang server refused the weights at {path}: {answer.get('message')}. Fix: {fix}."
        )


# -- information ------------------------------------------------------------------------------


def model_info_response(
    *,
    model_path: str,
    tokenizer_path: str,
    weight_version: str,
    model_type: str | None = None,
    architectures: list[str] | None = None,
) -> dict[str, Any]:
    """``/get_model_info``'s answer."""
    return {
        "model_path": model_path,
        "tokenizer_path": tokenizer_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": weight_version,
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": model_type,
        "architectures": architectures,
    }
