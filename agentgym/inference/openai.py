"""``OpenAIEngine``: any OpenAI-compatible server (vLLM, SGLang, ``agentgym serve``, hosted APIs).

Token level first: ``generate`` posts the prompt's token ids to ``/v1/completions`` and asks for
the sampled ids back (vLLM's ``return_token_ids``, or ``return_tokens_as_token_ids`` logprob
tokens, both understood by ``agentgym serve``). Such completions are trainable. A server that
returns text only yields completions re-tokenized with ``tokenizer`` and marked
``trainable=False``; a server without ``/v1/completions`` (most hosted APIs) is used through
``chat(messages)``, whose completions are never trainable because the server renders the prompt.

What a server's logprobs mean differs (``LogprobMode``): ``agentgym serve`` reports the sampling
distribution and says so in each choice; vLLM reports ``"raw"`` unless started with
``--logprobs-mode processed_logprobs``; pass ``logprob_mode=`` to state it for other servers.

A server that does not serve the ``model`` named (HTTP 404 ``model_not_found``, as OpenAI,
vLLM and ``agentgym serve`` answer) raises ``ConfigError`` naming the model and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, get_args

import httpx

from agentgym.core.errors import ConfigError, InfraError
from agentgym.core.types import Message
from agentgym.inference._http import HTTPStatusError, JSONClient
from agentgym.inference.base import (
    Completion,
    EngineClosedError,
    LogprobMode,
    SamplingParams,
    reject_choices,
)

__all__ = ["OpenAIEngine", "openai_sampling"]


def _model_not_found(error: HTTPStatusError) -> str | None:
    """The server's message when ``error`` says the model named is not served, else None:
    OpenAI's and agentgym serve's ``code: "model_not_found"``, vLLM's ``NotFoundError``."""
    if error.status != 404:
        return None
    try:
        answer = json.loads(error.body)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    nested = answer.get("error")
    detail: dict[str, Any] = nested if isinstance(nested, dict) else answer
    if detail.get("code") == "model_not_found" or detail.get("type") == "NotFoundError":
        return str(detail.get("message") or "model not found")
    return None


_FINISH = {"stop": "stop", "tool_calls": "stop", "function_call": "stop", "length": "length"}


def openai_sampling(sampling: SamplingParams) -> dict[str, Any]:
    """``SamplingParams`` as OpenAI request fields (``top_k``, ``stop_token_ids`` and
    ``ignore_eos`` are the vLLM / SGLang extensions, sent only when set)."""
    body: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
    }
    if sampling.top_k > 0:
        body["top_k"] = sampling.top_k
    if sampling.stop:
        body["stop"] = list(sampling.stop)
    if sampling.stop_token_ids:
        body["stop_token_ids"] = list(sampling.stop_token_ids)
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.ignore_eos:
        body["ignore_eos"] = True
    return body


class OpenAIEngine:
    """Generate through an OpenAI-compatible HTTP server.

    Args:
        base_url: the server root, e.g. ``http://127.0.0.1:8000`` (a trailing ``/v1`` is fine).
        model: the model name to send.
        api_key: sent as a bearer token.
        tokenizer: optional; re-tokenizes text-only answers (those are marked not trainable).
        logprob_mode: what the server's logprobs are, when it does not say.
        timeout: seconds per request.
        transport: an ``httpx`` transport (tests pass ``httpx.MockTransport``).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        tokenizer: Any = None,
        logprob_mode: LogprobMode = "raw",
        timeout: float = 600.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if logprob_mode not in get_args(LogprobMode):
            raise ConfigError(
                "logprob_mode",
                logprob_mode,
                f"is not one of {get_args(LogprobMode)}",
                'use "raw" for vLLM, "temperature" for SGLang',
            )
        self.model = model
        self.tokenizer = tokenizer
        self.logprob_mode: LogprobMode = logprob_mode
        self._http = JSONClient(
            base_url.rstrip("/").removesuffix("/v1"),
            api_key=api_key,
            timeout=timeout,
            transport=transport,
        )
        self.token_level: bool | None = None
        """Whether the server returned sampled token ids (``None`` until the first answer)."""
        self._closed = False

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        """Complete token ids through ``/v1/completions``; see the module docstring."""
        self._check_open()
        reject_choices(sampling, "OpenAIEngine")
        body = {
            "model": self.model,
            "prompt": [int(t) for t in prompt_token_ids],
            "logprobs": 1,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            **openai_sampling(sampling),
        }
        try:
            answer = await self._post("/v1/completions", body)
        except HTTPStatusError as e:
            if e.status in (404, 405):
                self.token_level = False
                raise InfraError(
                    f"{self._http.base_url} offers no /v1/completions, so no token-level "
                    "results. Fix: use OpenAIEngine.chat(messages) (not trainable)."
                ) from e
            raise
        return self._completion(_first_choice(answer))

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        sampling: SamplingParams,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Completion:
        """Complete a conversation through ``/v1/chat/completions``; never trainable."""
        self._check_open()
        reject_choices(sampling, "OpenAIEngine")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "logprobs": True,
            "return_token_ids": True,
            **openai_sampling(sampling),
        }
        if tools:
            body["tools"] = [dict(t) for t in tools]
        choice = _first_choice(await self._post("/v1/chat/completions", body))
        raw = choice.get("message") or {}
        message: Message = {"role": "assistant", "content": raw.get("content")}
        if raw.get("tool_calls"):
            message["tool_calls"] = raw["tool_calls"]
        content = (choice.get("logprobs") or {}).get("content") or []
        ids = choice.get("token_ids")
        if ids is None and self.tokenizer is not None and message["content"]:
            ids = list(self.tokenizer.encode(message["content"], add_special_tokens=False))
        return Completion(
            token_ids=list(ids or []),
            logprobs=[float(c["logprob"]) for c in content],
            finish_reason=_FINISH.get(choice.get("finish_reason") or "", "abort"),  # type: ignore[arg-type]
            text=message["content"] or "",
            trainable=False,
            message=message,
            logprob_mode=choice.get("logprob_mode", self.logprob_mode) if content else "none",
        )

    async def probe(self) -> bool:
        """Whether the server gives token-level results (asks for one token if not known yet)."""
        if self.token_level is None:
            try:
                await self.generate([0], SamplingParams(max_tokens=1, temperature=0))
            except InfraError:
                self.token_level = False
        return bool(self.token_level)

    async def update_weights(self, weights: Any) -> None:
        raise ConfigError(
            "weights",
            type(weights).__name__,
            "an OpenAI-compatible server has no weight-update API",
            "use SGLangEngine (update_weights_from_disk) or HFEngine, or restart the "
            "server on the new checkpoint",
        )

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._http.aclose()

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body``; a model the server does not serve is the caller's ``ConfigError``."""
        try:
            return await self._http.post(path, body)
        except HTTPStatusError as e:
            said = _model_not_found(e)
            if said is None:
                raise
            url = self._http.base_url
            raise ConfigError(
                "model",
                self.model,
                f"is not served at {url} (it answered: {said[:300]})",
                f"pass a name that GET {url}/v1/models lists (agentgym eval: --model NAME)",
            ) from None

    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError("OpenAIEngine used after close(). Fix: make a new engine.")

    def _completion(self, choice: dict[str, Any]) -> Completion:
        logprobs = choice.get("logprobs") or {}
        values = [float(v) if v is not None else 0.0 for v in logprobs.get("token_logprobs") or []]
        ids = choice.get("token_ids")
        if ids is None:
            ids = _ids_from_logprob_tokens(logprobs.get("tokens") or [])
        text = choice.get("text") or ""
        trainable = ids is not None and len(values) == len(ids)
        self.token_level = ids is not None
        if ids is None:
            if self.tokenizer is None:
                raise InfraError(
                    "the server returned no token ids. Fix: pass tokenizer= to re-tokenize "
                    "(results are then not trainable), or use a server with token ids."
                )
            ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        stop = choice.get("stop_reason")
        return Completion(
            token_ids=list(ids),
            logprobs=values if trainable else [0.0] * len(ids),
            finish_reason=_FINISH.get(choice.get("finish_reason") or "", "abort"),  # type: ignore[arg-type]
            text=text,
            trainable=trainable,
            stop=stop if isinstance(stop, str | int) else None,
            logprob_mode=choice.get("logprob_mode", self.logprob_mode) if trainable else "none",
        )


def _first_choice(answer: Any) -> dict[str, Any]:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise InfraError(f"the server's answer has no choices: {str(answer)[:300]}")
    return choices[0]


def _ids_from_logprob_tokens(tokens: list[Any]) -> list[int] | None:
    """Ids from vLLM-style ``"token_id:123"`` logprob tokens, or ``None`` if they are text."""
    if not tokens or not all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        return None
    return [int(t.removeprefix("token_id:")) for t in tokens]
