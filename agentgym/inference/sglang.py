"""``SGLangEngine``: an SGLang server, launched here or attached to, through its native API.

* ``generate``: ``POST /generate`` with ``input_ids``, ``sampling_params`` and
  ``return_logprob=True``; ids and logprobs come from ``output_ids`` and
  ``meta_info.output_token_logprobs`` (``[logprob, token_id, text]`` triples or dicts).
  SGLang's logprobs are ``log_softmax(logits / temperature)`` before top-k / top-p
  (``logprob_mode="temperature"``) unless the server runs with ``SGLANG_RETURN_ORIGINAL_LOGPROB``
  (raw); ``agentgym serve`` says which kind it returns (``meta_info.logprob_mode``: its
  ``HFEngine``'s are ``"sampling"``). SGLang honours ``sampling_seed`` only under
  ``--enable-deterministic-inference``.
* ``update_weights(path)``: new requests wait and running ones finish, then
  ``/pause_generation``, ``/update_weights_from_disk`` (``flush_cache``, ``weight_version``
  ``n + 1``), ``/flush_cache``, ``/continue_generation``; a refused update (``success: false``,
  HTTP 400) raises ``InfraError`` with the server's message and keeps ``weight_version``.
  ``update_weights(state_dict)`` with ``colocated=True`` goes through
  ``/update_weights_from_tensor`` (CUDA IPC handles serialized by SGLang's own serializer; the
  trainer and the server must share the GPU).
* weights through a process group (``agentgym.inference.weight_group``):
  ``init_weights_group`` (``/init_weights_update_group``), ``update_weights_from_group``
  (one ``/update_weights_from_distributed`` per bucket while the caller broadcasts it,
  bracketed as above) and ``weight_checksums`` (``/weights_checker``).

Requests and answers are built and read by ``agentgym.inference.sglang_api``, the same module
``agentgym serve``'s native routes use; tests check it against answers recorded from real SGLang
servers, and run this client against ``agentgym serve`` over HTTP (SGLang itself needs CUDA).
A completion's ``weight_version`` is the one the server reports, when it is a number.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from agentgym.core.errors import ConfigError, InfraError
from agentgym.inference import sglang_api as api
from agentgym.inference import weight_group as wg
from agentgym.inference._http import HTTPStatusError, JSONClient
from agentgym.inference.base import (
    Completion,
    EngineClosedError,
    SamplingParams,
    reject_choices,
)

__all__ = ["SGLangEngine", "sglang_sampling"]


sglang_sampling = api.sampling_params
"""``SamplingParams`` as SGLang ``sampling_params``."""


class SGLangEngine:
    """Generate with SGLang.

    Args:
        base_url: a running server to attach to; ``None`` launches one (needs ``model_path``).
        model_path: the model to launch the server with.
        launch: launch a server (default: when ``base_url`` is ``None``).
        host, port: where a launched server listens (default: a free local port).
        server_args: extra ``sglang.launch_server`` flags, e.g. ``["--tp", "2"]``.
        colocated: the server shares this process's GPU, so state dicts go by CUDA IPC.
        pause_mode: ``/pause_generation`` mode around updates ("abort", "retract", "in_place").
        timeout, startup_timeout: seconds per request / for a launched server to come up.
        transport: an ``httpx`` transport (tests pass ``httpx.MockTransport``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        model_path: str | os.PathLike[str] | None = None,
        launch: bool | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        server_args: Sequence[str] = (),
        colocated: bool = False,
        pause_mode: str = "retract",
        timeout: float = 600.0,
        startup_timeout: float = 900.0,
        transport: httpx.AsyncBaseTransport | None = None,
        python: str = sys.executable,
    ) -> None:
        self.launch = base_url is None if launch is None else launch
        if self.launch and model_path is None:
            raise ConfigError(
                "model_path",
                None,
                "is needed to launch an SGLang server",
                "pass model_path=, or base_url= of a running server",
            )
        if not self.launch and base_url is None:
            raise ConfigError(
                "base_url", None, "is needed when launch=False", "pass the server's URL"
            )
        if pause_mode not in ("abort", "retract", "in_place"):
            raise ConfigError(
                "pause_mode",
                pause_mode,
                "is not an SGLang pause mode",
                'use "abort", "retract" or "in_place"',
            )
        self.port = port or (_free_port(host) if self.launch else None)
        self.base_url = (base_url or f"http://{host}:{self.port}").rstrip("/")
        self.model_path, self.host = model_path, host
        self.server_args, self.python = list(server_args), python
        self.colocated, self.pause_mode = colocated, pause_mode
        self.startup_timeout = startup_timeout
        self._http = JSONClient(self.base_url, timeout=timeout, transport=transport)
        self._transport = transport
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._started = not self.launch
        self._start_lock = asyncio.Lock()
        self._in_flight = 0
        self._drained = asyncio.Event()
        self._open = asyncio.Event()
        self._open.set()
        self._closed = False
        self.weight_version = 0

    def launch_command(self) -> list[str]:
        """The command that launches the server."""
        return [
            self.python,
            "-m",
            "sglang.launch_server",
            "--model-path",
            str(self.model_path),
            "--host",
            self.host,
            "--port",
            str(self.port),
            *self.server_args,
        ]

    async def start(self) -> None:
        """Launch the server (if this engine launches one) and wait until it answers."""
        async with self._start_lock:
            if self._started:
                return
            self._log = tempfile.TemporaryFile()  # noqa: SIM115 (open while the server runs)
            self._process = subprocess.Popen(
                self.launch_command(), stdout=self._log, stderr=subprocess.STDOUT
            )
            await self._wait_ready()
            self._started = True

    async def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise InfraError(
                    f"the SGLang server exited with code {self._process.returncode} "
                    f"before answering:\n{self._log_tail()}"
                )
            try:
                await self._http.get(api.HEALTH)
                return
            except InfraError:
                await asyncio.sleep(1.0)
        await self.close()
        raise InfraError(f"the SGLang server did not answer within {self.startup_timeout:g} s")

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        if self._closed:
            raise EngineClosedError("SGLangEngine used after close(). Fix: make a new engine.")
        reject_choices(sampling, "SGLangEngine")
        await self.start()
        await self._open.wait()  # closed while weights are updated
        self._in_flight += 1
        self._drained.clear()
        try:
            answer = await self._http.post(
                api.GENERATE, api.generate_request(prompt_token_ids, sampling)
            )
        except InfraError as e:
            if (down := self._down(e, api.GENERATE)) is None:
                raise
            raise down from e
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._drained.set()
        return api.parse_generate_response(answer, self.weight_version)

    async def update_weights(self, weights: Mapping[str, Any] | str | os.PathLike[str]) -> None:
        """Load new weights: a checkpoint directory, or (colocated) a state dict of GPU tensors."""
        version = self.weight_version + 1
        if isinstance(weights, str | os.PathLike):
            path = str(Path(weights).resolve())
            update: tuple[str, dict[str, Any]] = (
                api.UPDATE_WEIGHTS_FROM_DISK,
                api.update_request(path, version),
            )
        elif self.colocated:
            path = "the state dict"
            update = (
                api.UPDATE_WEIGHTS_FROM_TENSOR,
                {
                    "serialized_named_tensors": _serialize(weights),
                    "flush_cache": True,
                    "weight_version": str(version),
                },
            )
        else:
            raise ConfigError(
                "weights",
                "a state dict",
                "needs colocated=True (CUDA IPC to the server)",
                "save the weights with save_pretrained and pass the directory",
            )
        await self._bracketed(update[0], lambda: self._post_update(*update, path))
        self.weight_version = version

    async def _bracketed(self, route: str, load: Callable[[], Awaitable[None]]) -> None:
        """Run ``load`` with generation held: new requests wait and running ones finish, then
        ``/pause_generation``, ``load()``, ``/flush_cache``; ``/continue_generation`` after,
        whatever happened."""
        await self.start()
        self._open.clear()
        failed = True
        try:
            if self._in_flight:
                await self._drained.wait()
            await self._optional(api.PAUSE_GENERATION, {"mode": self.pause_mode})
            await load()
            await self._optional(api.FLUSH_CACHE, None)
            failed = False
        except InfraError as e:
            if (down := self._down(e, route)) is None:
                raise
            raise down from e
        finally:
            try:
                await self._optional(api.CONTINUE_GENERATION, {})
            except InfraError:
                if not failed:  # else the first failure is the one to report
                    raise
            finally:
                self._open.set()

    async def init_weights_group(self, body: dict[str, Any]) -> None:
        """``/init_weights_update_group`` (``weight_group.init_group_request``): the server
        joins the trainer's process group. Returns once it did; ``InfraError`` if refused."""
        await self.start()
        answer = await self._post_or_refusal(wg.INIT_WEIGHTS_UPDATE_GROUP, body)
        api.check_update_response(
            answer,
            f"process group {body.get('group_name')}",
            "check that the server reaches master_address:master_port (--weight-sync-address) "
            "and that its backend is available there",
        )

    async def update_weights_from_group(
        self,
        buckets: Sequence[wg.Bucket],
        send: Callable[[wg.Bucket], Awaitable[None]],
        *,
        group_name: str = wg.DEFAULT_GROUP_NAME,
        flatten: bool = False,
    ) -> None:
        """Load ``buckets`` through the process group, bracketed as ``update_weights``: one
        ``/update_weights_from_distributed`` per bucket while ``send(bucket)`` broadcasts it;
        the last names the new ``weight_version``."""
        version = self.weight_version + 1

        async def load() -> None:
            for i, bucket in enumerate(buckets):
                body = wg.update_request(
                    bucket,
                    group_name=group_name,
                    weight_version=version if i == len(buckets) - 1 else None,
                    flatten=flatten,
                )
                post = asyncio.ensure_future(
                    self._post_or_refusal(wg.UPDATE_WEIGHTS_FROM_DISTRIBUTED, body)
                )
                sent = asyncio.ensure_future(send(bucket))
                await asyncio.wait({post, sent}, return_when=asyncio.FIRST_EXCEPTION)
                if sent.done() and sent.exception() is not None:
                    post.cancel()
                    await sent  # raises the broadcast's error
                # a refusal raises here, leaving the broadcast to its group's timeout
                api.check_update_response(
                    await post,
                    f"bucket {i} of {group_name}",
                    "restart the server (its weights are partly updated) and rerun with --resume",
                )
                await sent

        await self._bracketed(wg.UPDATE_WEIGHTS_FROM_DISTRIBUTED, load)
        self.weight_version = version

    async def weight_checksums(self) -> tuple[dict[str, str], dict[str, str], str | None]:
        """``/weights_checker`` ``{"action": "checksum"}``: ``(checksums, dtypes, algorithm)``
        (``weight_group.parse_checksums``); empty for a server without the route (404)."""
        await self.start()
        try:
            answer = await self._post_or_refusal(wg.WEIGHTS_CHECKER, {"action": "checksum"})
        except HTTPStatusError as e:
            if e.status == 404:
                return {}, {}, None
            raise
        api.check_update_response(answer, "its weights' checksums", "see the server's log")
        return wg.parse_checksums(answer)

    async def _post_or_refusal(self, route: str, body: dict[str, Any]) -> Any:
        """POST ``body``; an HTTP 400 answer in SGLang's ``{"success": false}`` shape is
        returned (for ``check_update_response``), any other failure raised."""
        try:
            return await self._http.post(route, body)
        except HTTPStatusError as e:
            answer = _json_or_none(e.body)
            if not isinstance(answer, dict) or "success" not in answer:
                raise
            return answer

    async def _post_update(self, route: str, body: dict[str, Any], path: str) -> None:
        # SGLang answers a failed update with HTTP 400
        api.check_update_response(await self._post_or_refusal(route, body), path)

    def _down(self, error: InfraError, route: str) -> InfraError | None:
        """For ``error`` from a server that did not answer at all (connection refused or
        dropped), an error that says so and what to do; ``None`` for any other error (an HTTP
        status, a deadline, a refused update: those say what happened already)."""
        if type(error) is not InfraError or not isinstance(error.__cause__, httpx.HTTPError):
            return None
        return InfraError(
            f"the SGLang server at {self.base_url} did not answer {route}: {error}. "
            "Fix: check that the server runs (restart it; a training run resumes from its last "
            "checkpoint)."
        )

    async def health(self, timeout: float = 5.0) -> bool:
        """Whether the server answers ``GET /health`` within ``timeout`` seconds (a probe of a
        server that stopped answering: never raises)."""
        try:
            async with httpx.AsyncClient(timeout=timeout, transport=self._transport) as client:
                response = await client.get(f"{self.base_url}{api.HEALTH}")
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def server_weight_version(self) -> int | None:
        """The weight version the server reports (``/get_model_info``) as a number; ``None``
        for SGLang's ``"default"`` (no update has named one) or a server without the field.

        ``update_weights`` names version ``weight_version + 1``; a trainer that attaches to a
        server it has updated before sets ``weight_version`` from this to keep one numbering."""
        await self.start()
        info = await self._http.get(api.GET_MODEL_INFO)
        return api.version_number(info.get("weight_version")) if isinstance(info, dict) else None

    async def _optional(self, path: str, body: dict[str, Any] | None) -> None:
        """POST to an endpoint that older SGLang versions lack (404 is fine)."""
        try:
            await self._http.post(path, body)
        except HTTPStatusError as e:
            if e.status != 404:
                raise

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._http.aclose()
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                await asyncio.to_thread(self._process.wait, 30)
            except subprocess.TimeoutExpired:
                self._process.kill()
        if self._log is not None:
            self._log.close()

    def _log_tail(self, size: int = 4000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-size:]


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _serialize(weights: Mapping[str, Any]) -> list[str]:
    try:
        from sglang.srt.utils import MultiprocessingSerializer
    except ImportError as e:
        raise ConfigError(
            "colocated",
            True,
            "needs the sglang package in this process",
            "pip install sglang, or pass a checkpoint directory",
        ) from e
    return [MultiprocessingSerializer.serialize(list(weights.items()), output_str=True)]


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
