"""OpenAI's API as ``agentgym serve`` and the agent gateway speak it: reading requests and
writing answers.

``OpenAIRoutes`` answers ``/v1/models``, ``/v1/completions`` and ``/v1/chat/completions`` over
an engine (``agentgym.inference.server`` mounts it); the gateway (``agentgym.gateway.app``)
records each session's calls and answers them with the same helpers: the served model names
(``served_names``, ``TINY_NAME``), a request's body and sampling parameters (``read_body``,
``request_sampling``), an answer's ``token_usage`` and ``finish_reason``, and the errors in
OpenAI's shape (``BadRequest``: 400, ``ModelNotFound``: 404 ``model_not_found``;
``error_response``). One home for both, so the two cannot drift apart.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from agentgym.inference.base import Completion, SamplingParams
from agentgym.inference.chat import parse_assistant, render_ids

__all__ = [
    "TINY_NAME",
    "BadRequest",
    "ModelNotFound",
    "OpenAIRoutes",
    "error_response",
    "finish_reason",
    "read_body",
    "request_sampling",
    "served_names",
    "token_usage",
]

TINY_NAME = "agentgym-tiny"
"""The name the tiny policy is served under when no name is given."""


class BadRequest(Exception):
    """A request the routes cannot serve (HTTP 400 in OpenAI's error shape, naming the problem)."""


class ModelNotFound(Exception):
    """A request named a model this server does not serve (HTTP 404, as OpenAI answers)."""


def error_response(
    message: str, status: int = 400, *, param: str | None = None, code: str | int | None = None
) -> JSONResponse:
    """An error answer in OpenAI's shape (``{"error": {message, type, param, code}}``)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {
        "message": message,
        "type": kind,
        "param": param,
        "code": status if code is None else code,
    }
    return JSONResponse({"error": body}, status_code=status)


def served_names(model: str | None, names: str | Sequence[str] | None = None) -> tuple[str, ...]:
    """The model names a server of ``model`` answers for: ``names`` when given, else the
    ``model`` path as given and as an absolute path (clients pass either), or ``agentgym-tiny``
    for the tiny policy. The first is the name answers carry."""
    if names:
        return (names,) if isinstance(names, str) else tuple(dict.fromkeys(names))
    if model is None:
        return (TINY_NAME,)
    return tuple(dict.fromkeys([str(model), os.path.abspath(os.path.expanduser(model))]))


def request_sampling(body: dict[str, Any]) -> SamplingParams:
    """The sampling parameters of a request's body (OpenAI's and vLLM's fields); ``BadRequest``
    for ``stream`` or ``n > 1``, which these routes do not offer."""
    if body.get("stream"):
        raise BadRequest("stream=true is not supported by agentgym serve")
    if int(body.get("n") or 1) != 1:
        raise BadRequest("n > 1 is not supported; send n separate requests")
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 256
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    return SamplingParams(
        temperature=1.0 if temperature is None else float(temperature),
        top_p=1.0 if top_p is None else float(top_p),
        top_k=int(body.get("top_k") or 0),
        max_tokens=int(max_tokens),
        stop=body.get("stop") or (),
        stop_token_ids=body.get("stop_token_ids") or (),
        seed=body.get("seed"),
        ignore_eos=bool(body.get("ignore_eos", False)),
    )


def token_usage(prompt: list[int], completion: Completion) -> dict[str, int]:
    """An answer's ``usage``: prompt, completion and total token counts."""
    n = len(completion.token_ids)
    return {"prompt_tokens": len(prompt), "completion_tokens": n, "total_tokens": len(prompt) + n}


def finish_reason(completion: Completion, tool_calls: bool = False) -> str:
    """The answer's ``finish_reason``: ``tool_calls`` for a stop on a reply that calls tools."""
    return (
        "tool_calls"
        if tool_calls and completion.finish_reason == "stop"
        else completion.finish_reason
    )


class OpenAIRoutes:
    """The request handlers of one app: parse, generate, answer in OpenAI's shapes."""

    def __init__(
        self, engine: Any, tokenizer: Any, names: tuple[str, ...], tool_parser: str
    ) -> None:
        self.engine, self.tokenizer = engine, tokenizer
        self.names, self.tool_parser = names, tool_parser
        self.model_name = names[0]

    def check_model(self, body: dict[str, Any]) -> None:
        """Refuse a request for a model this server does not serve (none named: served)."""
        name = body.get("model")
        if name is not None and name not in self.names:
            served = ", ".join(f"`{n}`" for n in self.names)
            raise ModelNotFound(
                f"The model `{name}` does not exist: this server serves {served} "
                "(GET /v1/models lists the names)"
            )

    def token_text(self, ids: list[int]) -> list[str]:
        return [str(self.tokenizer.decode([i], skip_special_tokens=False)) for i in ids]

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list | str):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            return list(self.tokenizer.encode(prompt, add_special_tokens=False))
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return prompt
        raise BadRequest("prompt must be a string or a non-empty list of token ids (one prompt)")

    def answer(
        self,
        kind: str,
        prompt: list[int],
        out: Completion,
        choice: dict[str, Any],
        body: dict[str, Any],
    ) -> JSONResponse:
        choice["logprob_mode"] = out.logprob_mode
        if body.get("return_token_ids"):
            choice["token_ids"], choice["prompt_token_ids"] = out.token_ids, prompt
        prefix = "chatcmpl" if kind == "chat.completion" else "cmpl"
        return JSONResponse(
            {
                "id": f"{prefix}-{uuid.uuid4().hex}",
                "object": kind,
                "created": int(time.time()),
                "model": self.model_name,
                "choices": [choice],
                "usage": token_usage(prompt, out),
            }
        )

    async def completions(self, request: Request) -> JSONResponse:
        body = await read_body(request)
        self.check_model(body)
        prompt, sampling = self.prompt_ids(body), request_sampling(body)
        out = await self.engine.generate(prompt, sampling)
        choice: dict[str, Any] = {
            "index": 0,
            "text": out.text or "",
            "logprobs": None,
            "finish_reason": out.finish_reason,
            "stop_reason": out.stop,
        }
        if body.get("logprobs") is not None:
            as_ids = body.get("return_tokens_as_token_ids")
            tokens = (
                [f"token_id:{i}" for i in out.token_ids]
                if as_ids
                else self.token_text(out.token_ids)
            )
            choice["logprobs"] = {
                "tokens": tokens,
                "token_logprobs": out.logprobs,
                "top_logprobs": None,
                "text_offset": None,
            }
        return self.answer("text_completion", prompt, out, choice, body)

    async def chat(self, request: Request) -> JSONResponse:
        body = await read_body(request)
        self.check_model(body)
        messages, tools = body.get("messages"), body.get("tools")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        sampling = request_sampling(body)
        prompt = render_ids(self.tokenizer, messages, tools=tools, add_generation_prompt=True)
        out = await self.engine.generate(prompt, sampling)
        message: dict[str, Any] = {"role": "assistant", "content": out.text or ""}
        if tools and body.get("tool_choice") != "none":
            call_ids = f"call_{uuid.uuid4().hex[:8]}_"
            message = dict(
                parse_assistant(out.text or "", parser=self.tool_parser, id_prefix=call_ids)
            )
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": finish_reason(out, bool(message.get("tool_calls"))),
        }
        if body.get("logprobs"):
            tokens = self.token_text(out.token_ids)
            choice["logprobs"] = {
                "content": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
                    for t, lp in zip(tokens, out.logprobs, strict=True)
                ]
            }
        return self.answer("chat.completion", prompt, out, choice, body)

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": name, "object": "model", "created": 0, "owned_by": "agentgym"}
                    for name in self.names
                ],
            }
        )

    async def health(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})


async def read_body(request: Request) -> dict[str, Any]:
    """The request's JSON object; ``BadRequest`` naming what is wrong otherwise."""
    try:
        body = await request.json()
    except ValueError as e:
        raise BadRequest(f"the body is not JSON: {e}") from e
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body
