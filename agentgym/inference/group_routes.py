"""``agentgym serve``'s side of weight sync through a process group, SGLang's routes:

``POST /init_weights_update_group`` joins the trainer's group (rank ``rank_offset``; this
server has one worker), ``POST /update_weights_from_distributed`` receives one bucket and
loads it into the running engine (new requests held by ``/pause_generation`` stay held;
running ones finish first), ``POST /destroy_weights_update_group`` leaves the group, and
``POST /weights_checker`` with ``{"action": "checksum"}`` answers a digest of every tensor
the engine's model holds (``agentgym.inference.weight_group``).

``fault_tensor`` (``AGENTGYM_SERVE_FAULT_TENSOR`` for ``agentgym serve``) corrupts that tensor
after every received bucket that holds it: what a torn transfer would do, for the tests that
check that a sync catches it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentgym.core.errors import ConfigError, Error
from agentgym.inference import weight_group as wg
from agentgym.inference.sglang_routes import NativeRoutes, _body, _guarded

__all__ = ["GroupRoutes"]

JOIN_TIMEOUT = 300.0


def _answer(success: bool, message: str) -> JSONResponse:
    """SGLang's ``{"success", "message"}`` answer: HTTP 200, or 400 on failure."""
    return JSONResponse(
        {"success": success, "message": message}, status_code=200 if success else 400
    )


class GroupRoutes:
    """The process-group weight routes of one app, beside ``native`` (whose engine, update
    lock and weight-version names they share)."""

    def __init__(self, native: NativeRoutes, *, fault_tensor: str | None = None) -> None:
        self.native = native
        self.fault_tensor = fault_tensor
        self.groups: dict[str, tuple[Any, str]] = {}  # name -> (group, backend)

    def routes(self) -> list[Route]:
        return [
            Route(wg.INIT_WEIGHTS_UPDATE_GROUP, _guarded(self.init_group), methods=["POST"]),
            Route(wg.UPDATE_WEIGHTS_FROM_DISTRIBUTED, _guarded(self.update), methods=["POST"]),
            Route(wg.DESTROY_WEIGHTS_UPDATE_GROUP, _guarded(self.destroy), methods=["POST"]),
            Route(wg.WEIGHTS_CHECKER, _guarded(self.check), methods=["POST"]),
        ]

    @property
    def _model(self) -> Any:
        return getattr(self.native.engine.engine, "model", None)

    async def init_group(self, request: Request) -> JSONResponse:
        body = await _body(request)
        try:
            address, port = str(body["master_address"]), int(body["master_port"])
            rank, world = int(body["rank_offset"]), int(body["world_size"])
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(
                "body",
                sorted(body),
                f"lacks or mistypes {e}",
                "send InitWeightsUpdateGroupReqInput",
            ) from e
        name, backend = (
            str(body.get("group_name", wg.DEFAULT_GROUP_NAME)),
            body.get("backend", "nccl"),
        )
        if world != rank + 1:
            return _answer(False, f"world_size {world} must be rank_offset + 1 (one worker here)")
        if backend not in wg.BACKENDS:
            return _answer(False, f"backend {backend!r} is not one of {wg.BACKENDS}")
        try:
            group = await asyncio.to_thread(
                wg.join_group, address, port, rank, world, backend, JOIN_TIMEOUT
            )
        except (RuntimeError, OSError, ValueError) as e:
            return _answer(False, f"Failed to init group: {type(e).__name__}: {e}")
        self.groups[name] = (group, backend)
        return _answer(True, "Succeeded to initialize custom process group.")

    async def destroy(self, request: Request) -> JSONResponse:
        name = str((await _body(request)).get("group_name", wg.DEFAULT_GROUP_NAME))
        if self.groups.pop(name, None) is None:
            return _answer(False, f"no weight update group {name!r}")
        return _answer(True, "Succeeded to destroy custom process group.")

    async def update(self, request: Request) -> JSONResponse:
        body = await _body(request)
        name = str(body.get("group_name", wg.DEFAULT_GROUP_NAME))
        names, shapes = body.get("names"), body.get("shapes")
        dtypes = [wg.parse_dtype(d) for d in body.get("dtypes") or []]
        if not isinstance(names, list) or not isinstance(shapes, list) or not names:
            raise ConfigError(
                "names", names, "must be a non-empty list", "send names/dtypes/shapes"
            )
        if not len(names) == len(dtypes) == len(shapes):
            raise ConfigError(
                "names",
                len(names),
                f"must match {len(dtypes)} dtypes and {len(shapes)} shapes",
                "send one dtype and one shape per name",
            )
        if name not in self.groups:
            return _answer(
                False, f"no weight update group {name!r}: call {wg.INIT_WEIGHTS_UPDATE_GROUP} first"
            )
        group, backend = self.groups[name]
        flatten = body.get("load_format") == wg.FLATTENED
        version = body.get("weight_version")
        model = self._model
        device = (
            next(model.parameters()).device if backend == "nccl" and model is not None else "cpu"
        )
        async with self.native._update_lock:
            tensors = await asyncio.to_thread(
                wg.receive_bucket, group, names, dtypes, shapes, flatten=flatten, device=device
            )
            self._corrupt(tensors)
            try:
                await self.native.engine.update_weights(tensors)
            except (Error, RuntimeError, ValueError) as e:
                return _answer(False, f"Failed to update weights: {type(e).__name__}: {e}")
            if version is not None:
                self.native.weight_version = str(version)
                counted = getattr(self.native.engine.engine, "weight_version", None)
                self.native._names[counted] = str(version)
        message = "Succeeded to update parameter online."
        if version is not None:
            message += f" Weight version updated to {version}."
        return _answer(True, message)

    def _corrupt(self, tensors: dict[str, Any]) -> None:
        if self.fault_tensor in tensors:
            bad = tensors[self.fault_tensor].clone()
            bad.reshape(-1)[0] += 1
            tensors[self.fault_tensor] = bad

    async def check(self, request: Request) -> JSONResponse:
        action = (await _body(request)).get("action", "checksum")
        if action != "checksum":
            return _answer(
                False, f"action {action!r} is not supported by agentgym serve; use 'checksum'"
            )
        model = self._model
        if model is None:
            return _answer(False, "the served engine has no model to checksum")
        async with self.native._update_lock:
            answer = await asyncio.to_thread(wg.checksum_response, model.state_dict())
        return JSONResponse(answer)
