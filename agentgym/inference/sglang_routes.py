"""SGLang's native API on ``agentgym serve``: the routes beside the OpenAI ones.

``POST /generate`` (``input_ids`` or ``text``, one or a batch; ``sampling_params``;
``return_logprob``), ``POST /update_weights_from_disk`` (safetensors from a directory into the
running engine, no restart), ``POST /flush_cache``, ``POST /pause_generation``,
``POST /continue_generation``, ``GET /get_model_info``, ``GET /get_load``,
``GET /health_generate``. Request and answer shapes come from ``sglang_api``, the one place that
also serves the ``SGLangEngine`` client, so that client runs unchanged against this server and
against a real SGLang server.

Differences from SGLang: a pause holds new requests (OpenAI ones too) until
``/continue_generation`` while running requests finish (every ``mode`` behaves so; an
``HFEngine`` cannot retract a request); ``/flush_cache`` drops the engine's prefix cache; a
weight update always drops it too; streaming, ``n > 1`` and penalties are refused with HTTP 400.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentgym.core.errors import ConfigError, Error
from agentgym.inference import sglang_api as api
from agentgym.inference.base import Completion, SamplingParams

__all__ = ["NativeRoutes", "PausableEngine"]


class PausableEngine:
    """An engine whose ``generate`` waits while the server is paused; counts what it holds."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._open = asyncio.Event()
        self._open.set()
        self.waiting = 0
        self.running = 0

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    def pause(self) -> None:
        self._open.clear()

    def resume(self) -> None:
        self._open.set()

    async def generate(self, prompt: list[int], sampling: SamplingParams) -> Completion:
        self.waiting += 1
        try:
            await self._open.wait()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            return await self.engine.generate(prompt, sampling)
        finally:
            self.running -= 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def _error(message: str, status: int = 400) -> JSONResponse:
    """SGLang's error answer (``_create_error_response``)."""
    return JSONResponse({"error": {"message": message}}, status_code=status)


def _guarded(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` with a bad request answered as HTTP 400 in SGLang's error shape."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except (ConfigError, TypeError, ValueError) as e:
            return _error(str(e))

    return endpoint


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = await request.json()
    except ValueError as e:
        raise ConfigError("body", raw[:80], f"is not JSON ({e})", "send a JSON object") from e
    if not isinstance(body, dict):
        raise ConfigError("body", str(body)[:80], "must be a JSON object", "send a JSON object")
    return body


class NativeRoutes:
    """The SGLang-native handlers of one app, serving ``engine`` (a ``PausableEngine``)."""

    def __init__(
        self, engine: PausableEngine, tokenizer: Any, *, model_path: str, tokenizer_path: str
    ) -> None:
        self.engine, self.tokenizer = engine, tokenizer
        self.model_path, self.tokenizer_path = model_path, tokenizer_path
        counted = getattr(engine.engine, "weight_version", 0)
        self.weight_version = str(counted)
        # The engine counts its own versions; a completion is labelled with the name its
        # version was loaded under, also when it finishes after a later update.
        self._names: dict[Any, str] = {counted: self.weight_version}
        self._update_lock = asyncio.Lock()

    def routes(self) -> list[Route]:
        return [
            Route(api.GENERATE, _guarded(self.generate), methods=["POST", "PUT"]),
            Route(api.UPDATE_WEIGHTS_FROM_DISK, _guarded(self.update_from_disk), methods=["POST"]),
            Route(api.FLUSH_CACHE, self.flush_cache, methods=["GET", "POST"]),
            Route(api.PAUSE_GENERATION, _guarded(self.pause), methods=["POST"]),
            Route(api.CONTINUE_GENERATION, self.resume, methods=["POST"]),
            Route(api.GET_MODEL_INFO, self.model_info, methods=["GET"]),
            Route("/model_info", self.model_info, methods=["GET"]),
            Route(api.GET_LOAD, self.load, methods=["GET"]),
            Route(api.HEALTH_GENERATE, self.health_generate, methods=["GET"]),
        ]

    async def generate(self, request: Request) -> JSONResponse:
        start = time.perf_counter()
        parsed = api.parse_generate_request(await _body(request))
        prompts = [self._ids(p) for p in parsed.prompts]
        outs = await asyncio.gather(
            *(self.engine.generate(p, s) for p, s in zip(prompts, parsed.sampling, strict=True))
        )
        answers = [
            api.generate_response(
                out,
                prompt=prompt,
                rid=uuid.uuid4().hex,
                weight_version=self._names.get(out.weight_version, self.weight_version),
                return_logprob=parsed.return_logprob,
                token_texts=self._texts(out.token_ids) if parsed.return_text_in_logprobs else None,
                e2e_latency=time.perf_counter() - start,
            )
            for prompt, out in zip(prompts, outs, strict=True)
        ]
        return JSONResponse(answers if parsed.batch else answers[0])

    def _ids(self, prompt: list[int] | str) -> list[int]:
        if isinstance(prompt, str):
            return list(self.tokenizer.encode(prompt))
        return prompt

    def _texts(self, ids: list[int]) -> list[str | None]:
        return [str(self.tokenizer.decode([i], skip_special_tokens=False)) for i in ids]

    async def update_from_disk(self, request: Request) -> JSONResponse:
        path, version, load_format = api.parse_update_request(await _body(request))
        async with self._update_lock:
            held = self.engine.waiting
            problem = _checkpoint_problem(Path(path), load_format, self.engine.engine)
            if problem is None:
                try:
                    await self.engine.update_weights(path)
                except (Error, RuntimeError, OSError, ValueError) as e:
                    problem = f"Failed to update weights: {type(e).__name__}: {e}"
            if problem is not None:
                return JSONResponse(api.update_response(False, problem, held), status_code=400)
            self.weight_version = version or _next_version(self.weight_version)
            self._names[getattr(self.engine.engine, "weight_version", None)] = self.weight_version
            return JSONResponse(
                api.update_response(True, "Succeeded to update model weights.", held)
            )

    async def flush_cache(self, request: Request) -> Response:
        prefixes = getattr(self.engine.engine, "_prefixes", None)
        if prefixes is not None:
            prefixes.clear()
        return Response("Cache flushed.\n", media_type="text/plain")

    async def pause(self, request: Request) -> JSONResponse:
        mode = (await _body(request)).get("mode", "abort")
        if mode not in api.PAUSE_MODES:
            raise ConfigError("mode", mode, "is not a pause mode", f"use one of {api.PAUSE_MODES}")
        self.engine.pause()
        return JSONResponse({"message": "Generation paused successfully.", "status": "ok"})

    async def resume(self, request: Request) -> JSONResponse:
        self.engine.resume()
        return JSONResponse({"message": "Generation continued successfully.", "status": "ok"})

    async def model_info(self, request: Request) -> JSONResponse:
        config = getattr(getattr(self.engine.engine, "model", None), "config", None)
        return JSONResponse(
            api.model_info_response(
                model_path=self.model_path,
                tokenizer_path=self.tokenizer_path,
                weight_version=self.weight_version,
                model_type=getattr(config, "model_type", None),
                architectures=getattr(config, "architectures", None),
            )
        )

    async def load(self, request: Request) -> JSONResponse:
        """SGLang's ``/get_load`` (one data-parallel rank): requests running and held."""
        running, waiting = self.engine.running, self.engine.waiting
        return JSONResponse(
            [
                {
                    "dp_rank": 0,
                    "num_reqs": running + waiting,
                    "num_waiting_reqs": waiting,
                    "num_tokens": 0,
                }
            ]
        )

    async def health_generate(self, request: Request) -> Response:
        """Generate one token (HTTP 503 if that fails); waits while paused, as SGLang's does."""
        try:
            await self.engine.generate([0], SamplingParams(temperature=0, max_tokens=1))
        except Exception:  # any failure means unhealthy
            return Response(status_code=503)
        return Response(status_code=200)


def _next_version(version: str) -> str:
    number = api.version_number(version)
    return str(number + 1) if number is not None else version


def _checkpoint_problem(path: Path, load_format: str | None, engine: Any) -> str | None:
    """Why the safetensors under ``path`` cannot be loaded into ``engine``'s model (or ``None``).

    Checked before loading, so that a bad checkpoint leaves the served weights untouched
    (``load_state_dict`` copies the tensors that fit before it reports those that do not)."""
    if load_format not in (None, "auto", "safetensors"):
        return f"load_format {load_format!r} is not supported; use 'auto' or 'safetensors'"
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not path.exists() or not files or not all(f.is_file() for f in files):
        return f"no safetensors weights at {path} (save them with save_pretrained)"
    model = getattr(engine, "model", None)
    if model is None:
        return None
    from safetensors import safe_open

    own = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    try:
        for file in files:
            with safe_open(str(file), framework="pt") as f:
                for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    shape = tuple(f.get_slice(name).get_shape())
                    if name not in own:
                        return f"{name} in {file.name} is not a parameter of the served model"
                    if shape != own[name]:
                        return f"{name} has shape {list(shape)}, the model's is {list(own[name])}"
    except Exception as e:  # safetensors raises its own SafetensorError
        return f"cannot read {file}: {e}"
    return None
