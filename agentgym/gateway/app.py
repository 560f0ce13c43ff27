"""The gateway: OpenAI-compatible routes in front of an engine, recording every call per session.

An agent program written against the OpenAI SDK talks to a session's base URL,
``<gateway>/sessions/<id>/v1`` (or to ``<gateway>/v1`` with an ``X-Session-Id`` header), and is
served ``chat/completions`` (tools, streaming), ``completions`` and ``models``. The answers are
``agentgym serve``'s (same sampling arguments, same hermes tool-call parsing, same error shape);
what the gateway adds is the record: each call's prompt ids, sampled ids, logprobs and weight
version, from which ``Gateway.close`` builds the session's token-exact ``Episode``
(``agentgym.gateway.session``).

Sessions are opened by the trainer's side (``Gateway.open``, or ``POST /sessions``) and end when
their episode is taken (``Gateway.close``, or ``POST /sessions/<id>/close``). Whatever a program
sends gets an answer in OpenAI's error shape, never a crash: a model the gateway does not serve
(404 ``model_not_found``), a session that does not exist (404 ``session_not_found``) or was
already collected (409 ``session_closed``), malformed messages or tool schemas (400), an engine
failure (500, recorded against that session only).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode
from agentgym.gateway.checks import check_messages, check_tools
from agentgym.gateway.errors import GatewayError
from agentgym.gateway.session import Call, Session, normalize_message, tools_key
from agentgym.gateway.stream import chat_chunks, completion_chunks
from agentgym.inference.base import Completion, InferenceEngine
from agentgym.inference.chat import parse_assistant
from agentgym.inference.openai_routes import (
    TINY_NAME,
    BadRequest,
    ModelNotFound,
    OpenAIRoutes,
    error_response,
    finish_reason,
    read_body,
    request_sampling,
    served_names,
    token_usage,
)
from agentgym.rollout.render import ChatRenderer

__all__ = ["SESSION_HEADER", "Gateway", "GatewayError", "gateway_routes"]

SESSION_HEADER = "X-Session-Id"
"""The header that names the session on the ``/v1/...`` routes."""
MAX_CLOSED = 100_000
"""Closed session ids a gateway remembers by default (a few MB): a late call to one of them is
answered 409 ``session_closed``; to an older one, 404 ``session_not_found``."""


class Gateway:
    """OpenAI-compatible routes over ``engine`` that record each session's calls.

    Args:
        engine: an ``InferenceEngine`` whose completions carry sampled ids and logprobs
            (``HFEngine`` in-process, ``SGLangEngine`` for servers).
        tokenizer: the policy's tokenizer (its chat template renders the prompts).
        model_name: the name(s) requests must give as their model (none named: served).
        tool_parser: how tool calls are parsed from sampled text (``hermes`` by default).
        max_closed: closed session ids remembered, latest first (a long-running gateway must
            not grow without bound); a call to an id forgotten since is answered 404.
    """

    def __init__(
        self,
        engine: InferenceEngine,
        tokenizer: Any,
        *,
        model_name: str | Sequence[str] = TINY_NAME,
        tool_parser: str = "hermes",
        max_closed: int = MAX_CLOSED,
    ) -> None:
        if isinstance(max_closed, bool) or not isinstance(max_closed, int) or max_closed < 1:
            raise ConfigError("max_closed", max_closed, "must be an int >= 1", "use e.g. 10000")
        self.engine, self.tokenizer = engine, tokenizer
        self.names = served_names(None, model_name)
        self.base = OpenAIRoutes(engine, tokenizer, self.names, tool_parser)
        self.renderer = ChatRenderer(tokenizer)
        self.sessions: dict[str, Session] = {}
        self.max_closed = max_closed
        self.closed: OrderedDict[str, None] = OrderedDict()
        """The ids of the latest ``max_closed`` closed sessions, oldest first."""

    # --- sessions ------------------------------------------------------------------------------

    def open(self, session_id: str | None = None, *, task: Any = None) -> str:
        """Open a session (a fresh id unless given) and return its id."""
        session_id = session_id or uuid.uuid4().hex
        if (
            not isinstance(session_id, str)
            or not session_id.replace("-", "").replace("_", "").isalnum()
        ):
            raise ConfigError(
                "session_id", session_id, "must be letters, digits, '-' or '_'", "pass e.g. 'ep-7'"
            )
        if session_id in self.sessions or session_id in self.closed:
            raise ConfigError(
                "session_id", session_id, "is already in use", "open it without an id"
            )
        self.sessions[session_id] = Session(session_id, self.renderer, task)
        return session_id

    def close(
        self, session_id: str, reward: float = 0.0, info: Mapping[str, Any] | None = None
    ) -> Episode:
        """End a session and return its episode (``Session.episode``); later calls to it are
        answered 409 ``session_closed``."""
        session = self.session(session_id)
        session.closed = True
        del self.sessions[session_id]
        self.closed[session_id] = None
        while len(self.closed) > self.max_closed:
            self.closed.popitem(last=False)
        return session.episode(reward, info)

    def session(self, session_id: str) -> Session:
        """The open session ``session_id``; ``GatewayError`` (404 / 409) otherwise."""
        session = self.sessions.get(session_id)
        if session is not None:
            return session
        if session_id in self.closed:
            raise GatewayError(
                f"the session `{session_id}` was closed: its episode was already collected, so "
                "this call would not be trained on. Fix: stop calling the model once the agent "
                "program has returned",
                409,
                "session_closed",
            )
        raise GatewayError(
            f"unknown or expired session `{session_id}`: the gateway never opened it, or it was "
            f"closed before the latest {self.max_closed} closed sessions and forgotten. Fix: use "
            "the base URL of an open session (…/sessions/<id>/v1), or open one with "
            "POST /sessions",
            404,
            "session_not_found",
        )

    def url(self, base: str, session_id: str) -> str:
        """The OpenAI base URL of ``session_id`` on a gateway served at ``base``."""
        return f"{base.rstrip('/')}/sessions/{session_id}/v1"

    # --- the app -------------------------------------------------------------------------------

    def routes(self, *, header_routes: bool = True) -> list[BaseRoute]:
        """The gateway's routes: per-session ones always; ``/v1/...`` with the session header
        when ``header_routes`` (off when mounted beside ``agentgym serve``'s own ``/v1``)."""
        prefix = "/sessions/{session_id}/v1"
        routes: list[BaseRoute] = [
            Route("/sessions", self._guard(self._open), methods=["POST"]),
            Route("/sessions/{session_id}/close", self._guard(self._close), methods=["POST"]),
            Route(f"{prefix}/models", self._guard(self._models), methods=["GET"]),
            Route(f"{prefix}/chat/completions", self._guard(self._chat), methods=["POST"]),
            Route(f"{prefix}/completions", self._guard(self._completions), methods=["POST"]),
        ]
        if header_routes:
            routes += [
                Route("/v1/models", self._guard(self._models), methods=["GET"]),
                Route("/v1/chat/completions", self._guard(self._chat), methods=["POST"]),
                Route("/v1/completions", self._guard(self._completions), methods=["POST"]),
            ]
        return routes

    def app(self) -> Starlette:
        """The gateway as an ASGI app of its own."""
        return Starlette(routes=self.routes())

    def _guard(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` with every failure answered in OpenAI's error shape. 4xx answers carry
        ``x-should-retry: false``: the OpenAI SDK would otherwise retry a 409."""

        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except GatewayError as e:
                response = error_response(str(e), e.status, param=e.param, code=e.code)
            except ModelNotFound as e:
                response = error_response(str(e), 404, param="model", code="model_not_found")
            except (BadRequest, ConfigError, TypeError, ValueError) as e:
                response = error_response(str(e))
            except Exception as e:  # the engine failed: this call only, said in the body
                response = error_response(f"the call failed: {type(e).__name__}: {e}", 500)
            if response.status_code < 500:
                response.headers["x-should-retry"] = "false"
            return response

        return endpoint

    def _session_of(self, request: Request) -> Session:
        session_id = request.path_params.get("session_id") or request.headers.get(SESSION_HEADER)
        if not session_id:
            raise GatewayError(
                "no session named: use a session's base URL (…/sessions/<id>/v1) or send the "
                f"`{SESSION_HEADER}` header",
                400,
                "missing_session",
            )
        return self.session(session_id)

    async def _open(self, request: Request) -> Response:
        body = await read_body(request) if await request.body() else {}
        session_id = self.open(body.get("id"), task=body.get("task"))
        return JSONResponse(
            {"id": session_id, "base_url": self.url(str(request.base_url), session_id)}
        )

    async def _close(self, request: Request) -> Response:
        body = await read_body(request) if await request.body() else {}
        reward = body.get("reward", 0.0)
        if not isinstance(reward, int | float) or isinstance(reward, bool):
            raise BadRequest(f"reward must be a number, got {reward!r}")
        episode = self.close(request.path_params["session_id"], float(reward))
        return JSONResponse(
            {
                "token_ids": episode.token_ids,
                "loss_mask": episode.loss_mask,
                "logprobs": episode.logprobs,
                "context_starts": episode.context_starts or [0],
                "turn_spans": episode.turn_spans,
                "weight_versions": episode.weight_versions,
            }
        )

    async def _models(self, request: Request) -> Response:
        self._session_of(request)
        return await self.base.models(request)

    async def _generate(self, session: Session, prompt: list[int], body: dict[str, Any]):
        sampling = request_sampling({**body, "stream": False})
        try:
            out = await self.engine.generate(prompt, sampling)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            session.failures.append(f"{type(e).__name__}: {e}")
            raise
        if out.finish_reason == "abort" or len(out.logprobs) != len(out.token_ids):
            cause = f"the engine aborted the call (finish_reason {out.finish_reason!r})"
            session.failures.append(cause)
            raise GatewayError(cause, 503, "engine_unavailable")
        if out.text is None:
            out.text = str(self.tokenizer.decode(out.token_ids, skip_special_tokens=True))
        return out

    async def _chat(self, request: Request) -> Response:
        session = self._session_of(request)
        body = await read_body(request)
        self.base.check_model(body)
        messages = check_messages(body.get("messages"))
        tools = check_tools(body.get("tools"))
        prompt, parent = session.chat_prompt(messages, tools)
        out = await self._generate(session, prompt, body)
        message: dict[str, Any] = {"role": "assistant", "content": out.text or ""}
        if tools and body.get("tool_choice") != "none":
            ids = f"call_{uuid.uuid4().hex[:8]}_"
            message = dict(
                parse_assistant(out.text or "", parser=self.base.tool_parser, id_prefix=ids)
            )
        self._record(
            session,
            Call(
                "chat",
                prompt,
                out,
                parent,
                conversation=[normalize_message(m) for m in messages],
                reply=message,
                tools_key=tools_key(tools),
            ),
        )
        finish = finish_reason(out, bool(message.get("tool_calls")))
        head = _head("chatcmpl", self.base.model_name)
        if body.get("stream"):
            usage = token_usage(prompt, out) if _include_usage(body) else None
            return _sse(chat_chunks(head, message, finish, usage))
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
                    for t, lp in zip(self.base.token_text(out.token_ids), out.logprobs, strict=True)
                ]
            }
        return _answer(head, "chat.completion", choice, prompt, out, body)

    async def _completions(self, request: Request) -> Response:
        session = self._session_of(request)
        body = await read_body(request)
        self.base.check_model(body)
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], list | str):
            raw = raw[0]  # a batch of one
        ids = self.base.prompt_ids({"prompt": raw})  # checks the shape
        prompt, parent = session.completion_prompt(raw if isinstance(raw, str) else ids)
        out = await self._generate(session, prompt, body)
        text = raw if isinstance(raw, str) else None
        self._record(session, Call("completion", prompt, out, parent, prompt_text=text))
        head = _head("cmpl", self.base.model_name)
        if body.get("stream"):
            usage = token_usage(prompt, out) if _include_usage(body) else None
            return _sse(completion_chunks(head, out.text or "", out.finish_reason, usage))
        choice: dict[str, Any] = {
            "index": 0,
            "text": out.text or "",
            "logprobs": None,
            "finish_reason": out.finish_reason,
        }
        if body.get("logprobs") is not None:
            choice["logprobs"] = {
                "tokens": self.base.token_text(out.token_ids),
                "token_logprobs": out.logprobs,
                "top_logprobs": None,
                "text_offset": None,
            }
        return _answer(head, "text_completion", choice, prompt, out, body)

    def _record(self, session: Session, call: Call) -> None:
        if session.closed:  # collected while the engine sampled: the answer is not trained on
            self.session(session.id)  # raises 409 session_closed
        session.calls.append(call)


def gateway_routes(engine: Any, tokenizer: Any, names: tuple[str, ...]) -> list[BaseRoute]:
    """The per-session routes of a new ``Gateway`` over ``engine``, to mount beside
    ``agentgym serve``'s own ``/v1`` (``build_app(mount=gateway_routes)``)."""
    return Gateway(engine, tokenizer, model_name=names).routes(header_routes=False)


def _head(prefix: str, model: str) -> dict[str, Any]:
    return {"id": f"{prefix}-{uuid.uuid4().hex}", "created": int(time.time()), "model": model}


def _answer(
    head: dict[str, Any],
    kind: str,
    choice: dict[str, Any],
    prompt: list[int],
    out: Completion,
    body: dict[str, Any],
) -> Response:
    if body.get("return_token_ids"):
        choice["token_ids"], choice["prompt_token_ids"] = out.token_ids, prompt
    return JSONResponse(
        {**head, "object": kind, "choices": [choice], "usage": token_usage(prompt, out)}
    )


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _sse(chunks: list[dict[str, Any]]) -> StreamingResponse:
    async def events() -> AsyncIterator[str]:
        for chunk in chunks:
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
