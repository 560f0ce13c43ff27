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

The OpenAI routes' handlers (``agentgym.inference.openai_routes``) are shared with the agent
gateway. The CLI entry points ``add_serve_arguments`` / ``run_serve`` are wired into
``agentgym.cli``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from agentgym.core.errors import ConfigError
from agentgym.inference.group_routes import GroupRoutes
from agentgym.inference.openai_routes import (
    TINY_NAME,
    BadRequest,
    ModelNotFound,
    OpenAIRoutes,
    error_response,
    served_names,
)
from agentgym.inference.serve_checks import check_serve_args
from agentgym.inference.sglang_routes import NativeRoutes, PausableEngine

__all__ = ["TINY_NAME", "add_serve_arguments", "build_app", "run_serve", "serve", "served_names"]

Mount = Callable[[Any, Any, tuple[str, ...]], Sequence[BaseRoute]]
"""Routes to add to the app, made from (engine, tokenizer, served names)."""


def _guarded(
    handler: Callable[[Request], Awaitable[JSONResponse]],
) -> Callable[[Request], Awaitable[JSONResponse]]:
    """``handler`` with bad requests answered as HTTP 400 in OpenAI's error shape, and a
    model it does not serve as HTTP 404 ``model_not_found``."""

    async def endpoint(request: Request) -> JSONResponse:
        try:
            return await handler(request)
        except ModelNotFound as e:
            return error_response(str(e), 404, param="model", code="model_not_found")
        except (BadRequest, ConfigError, TypeError, ValueError) as e:
            return error_response(str(e))

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
    routes = OpenAIRoutes(pausable, tokenizer, names, tool_parser)
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
