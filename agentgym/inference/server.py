"""``agentgym serve``: an OpenAI-compatible and SGLang-native server over ``HFEngine``.

Routes: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (tools in, hermes
``<tool_call>`` blocks parsed into ``tool_calls`` out) and ``POST /v1/completions`` (a text or
token-id prompt; with ``return_token_ids`` the sampled ids come back, and ``logprobs`` are the
sampling distribution's, so ``OpenAIEngine`` gets trainable token-level results). Streaming and
``n > 1`` are not offered. vLLM's extensions ``top_k``, ``stop_token_ids``, ``ignore_eos``,
``return_token_ids`` and ``return_tokens_as_token_ids`` are accepted.

The OpenAI routes answer for the served names only (``--model-name``/``--served-model-name``;
default: the ``--model`` path as given, or ``agentgym-tiny``), as OpenAI and vLLM do: a request
naming another model gets HTTP 404 with ``code: "model_not_found"``; one that names none is
served. ``/v1/models`` lists the names.

Beside them, SGLang's native API (``agentgym.inference.sglang_routes``): ``/generate``,
``/update_weights_from_disk``, ``/flush_cache``, ``/pause_generation``, ``/continue_generation``,
``/get_model_info``, and weight sync through a process group (``/init_weights_update_group``,
``/update_weights_from_distributed``, ``/weights_checker``: ``group_routes``), so that
``SGLangEngine`` trains against this server on a CPU exactly as it
does against SGLang on GPUs. A pause holds the OpenAI routes' requests too.

The CLI entry points ``add_serve_arguments`` / ``run_serve`` are wired into ``agentgym.cli``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from agentgym.core.errors import ConfigError
from agentgym.inference.base import Completion, SamplingParams
from agentgym.inference.chat import parse_assistant, render_ids
from agentgym.inference.group_routes import GroupRoutes
from agentgym.inference.serve_checks import check_serve_args
from agentgym.inference.sglang_routes import NativeRoutes, PausableEngine

__all__ = ["TINY_NAME", "add_serve_arguments", "build_app", "run_serve", "serve", "served_names"]

TINY_NAME = "agentgym-tiny"
"""The name the tiny policy is served under when no name is given."""


Mount = Callable[[Any, Any, tuple[str, ...]], Sequence[BaseRoute]]
"""Routes to add to the app, made from (engine, tokenizer, served names)."""


class _BadRequest(Exception):
    pass


class _ModelNotFound(Exception):
    """A request named a model this server does not serve (HTTP 404, as OpenAI answers)."""


def _error(
    message: str, status: int = 400, *, param: str | None = None, code: str | int | None = None
) -> JSONResponse:
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


def _sampling(body: dict[str, Any]) -> SamplingParams:
    if body.get("stream"):
        raise _BadRequest("stream=true is not supported by agentgym serve")
    if int(body.get("n") or 1) != 1:
        raise _BadRequest("n > 1 is not supported; send n separate requests")
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


def _usage(prompt: list[int], completion: Completion) -> dict[str, int]:
    n = len(completion.token_ids)
    return {"prompt_tokens": len(prompt), "completion_tokens": n, "total_tokens": len(prompt) + n}


def _finish(completion: Completion, tool_calls: bool = False) -> str:
    return (
        "tool_calls"
        if tool_calls and completion.finish_reason == "stop"
        else completion.finish_reason
    )


class _Routes:
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
            raise _ModelNotFound(
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
        raise _BadRequest("prompt must be a string or a non-empty list of token ids (one prompt)")

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
                "usage": _usage(prompt, out),
            }
        )

    async def completions(self, request: Request) -> JSONResponse:
        body = await _read(request)
        self.check_model(body)
        prompt, sampling = self.prompt_ids(body), _sampling(body)
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
        body = await _read(request)
        self.check_model(body)
        messages, tools = body.get("messages"), body.get("tools")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("messages must be a non-empty list")
        sampling = _sampling(body)
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
            "finish_reason": _finish(out, bool(message.get("tool_calls"))),
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


async def _read(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as e:
        raise _BadRequest(f"the body is not JSON: {e}") from e
    if not isinstance(body, dict):
        raise _BadRequest("the body must be a JSON object")
    return body


def _guarded(
    handler: Callable[[Request], Awaitable[JSONResponse]],
) -> Callable[[Request], Awaitable[JSONResponse]]:
    """``handler`` with bad requests answered as HTTP 400 in OpenAI's error shape, and a
    model it does not serve as HTTP 404 ``model_not_found``."""

    async def endpoint(request: Request) -> JSONResponse:
        try:
            return await handler(request)
        except _ModelNotFound as e:
            return _error(str(e), 404, param="model", code="model_not_found")
        except (_BadRequest, ConfigError, TypeError, ValueError) as e:
            return _error(str(e))

    return endpoint


def build_app(
    engine: Any,
    tokenizer: Any,
    *,
    model_name: str | Sequence[str] = TINY_NAME,
    tool_parser: str = "hermes",
    model_path: str | None = None,
    tokenizer_path: str | None = None,
    fault_tensor: str | None = None,
    mount: Mount | None = None,
) -> Starlette:
    """The ASGI app serving ``engine`` (an ``HFEngine``, or any ``InferenceEngine`` whose
    completions carry ``text``) under the name ``model_name`` (or each of several names; the
    OpenAI routes answer 404 for any other); ``model_path`` and ``tokenizer_path`` (default:
    the first name) are what ``/get_model_info`` reports; ``fault_tensor`` corrupts that tensor
    in every weight sync through a process group (tests of the sync's verification); ``mount``
    adds routes over the same (pausable) engine, e.g. the gateway's
    (``agentgym.gateway.gateway_routes``)."""
    names = served_names(None, model_name)
    pausable = PausableEngine(engine)
    routes = _Routes(pausable, tokenizer, names, tool_parser)
    native = NativeRoutes(
        pausable,
        tokenizer,
        model_path=model_path or names[0],
        tokenizer_path=tokenizer_path or model_path or names[0],
    )
    return Starlette(
        routes=[
            Route("/health", routes.health, methods=["GET"]),
            Route("/v1/models", routes.models, methods=["GET"]),
            Route("/v1/completions", _guarded(routes.completions), methods=["POST"]),
            Route("/v1/chat/completions", _guarded(routes.chat), methods=["POST"]),
            *native.routes(),
            *GroupRoutes(native, fault_tensor=fault_tensor).routes(),
            *(mount(pausable, tokenizer, names) if mount else ()),
        ]
    )


def serve(
    model: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_batch_size: int = 64,
    seed: int = 0,
    device: str | None = None,
    dtype: str | None = None,
    model_name: str | Sequence[str] | None = None,
    mount: Mount | None = None,
) -> None:
    """Load ``model`` (a local directory, or ``None`` for the tiny policy) and serve it under
    ``served_names(model, model_name)``. The model and the port are checked before loading
    (``ConfigError`` naming the value and the fix)."""
    check_serve_args(model, host, port)
    import uvicorn

    from agentgym.inference.hf import HFEngine
    from agentgym.models import TINY_DIR, load

    lm, tokenizer = load(model, seed=seed, dtype=dtype, device=device)
    engine = HFEngine(lm, tokenizer, max_batch_size=max_batch_size, seed=seed)
    names = served_names(model, model_name)
    path = str(model) if model else str(TINY_DIR)
    fault = os.environ.get("AGENTGYM_SERVE_FAULT_TENSOR") or None
    app = build_app(
        engine, tokenizer, model_name=names, model_path=path, fault_tensor=fault, mount=mount
    )
    uvicorn.run(app, host=host, port=port, log_level="info")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``agentgym serve``'s arguments on ``parser``; dispatch with ``run_serve(args)``."""
    parser.add_argument(
        "--model",
        default=None,
        help="local transformers model directory (default: the tiny policy)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    parser.add_argument("--max-batch-size", type=int, default=64, help="requests decoded together")
    parser.add_argument(
        "--seed", type=int, default=0, help="tiny-policy weights and unseeded sampling"
    )
    parser.add_argument("--device", default=None, help="e.g. cuda:0 (default cpu)")
    parser.add_argument("--dtype", default=None, help="e.g. bfloat16 (default: the checkpoint's)")
    parser.add_argument(
        "--model-name",
        "--served-model-name",
        dest="model_name",
        nargs="+",
        metavar="NAME",
        default=None,
        help="the name(s) requests must give as their model, listed by /v1/models (default: "
        f"--model as given, or {TINY_NAME}); a request for any other gets HTTP 404",
    )
    parser.add_argument(
        "--gateway",
        action="store_true",
        help="also serve the agent gateway: POST /sessions opens a session whose base URL "
        "(/sessions/<id>/v1) records every call token-exact (docs/gateway.md)",
    )


def run_serve(args: argparse.Namespace, mount: Mount | None = None) -> int:
    """Serve until stopped; 2 with a message (no traceback) for a bad model, port or dtype.
    ``mount``: more routes (``agentgym serve --gateway``: the gateway's)."""
    try:
        serve(
            args.model,
            host=args.host,
            port=args.port,
            max_batch_size=args.max_batch_size,
            seed=args.seed,
            device=args.device,
            dtype=args.dtype,
            model_name=args.model_name,
            mount=mount,
        )
    except ConfigError as error:
        print(f"agentgym serve: error: {error}", file=sys.stderr)
        return 2
    return 0
