"""``SGLangEngine``: an SGLang server, launched here or attached to, through its native API.

* ``generate``: ``POST /generate`` with ``input_ids``, ``sampling_params`` and
  ``return_logprob=True``; ids and logprobs come from ``output_ids`` and
  ``meta_info.output_token_logprobs`` (``[logprob, token_id, text]`` triples or dicts).
  SGLang's logprobs are ``log_softmax(logits / temperature)`` before top-k / top-p
  (``logprob_mode="temperature"``) unless the server runs with ``SGLANG_RETURN_ORIGINAL_LOGPROB``
  (raw); SGLang honours ``sampling_seed`` only under ``--enable-deterministic-inference``.
* ``update_weights(path)``: new requests wait and running ones finish, then
  ``/pause_generation``, ``/update_weights_from_disk`` (``flush_cache``), ``/flush_cache``,
  ``/continue_generation``. ``update_weights(state_dict)`` with ``colocated=True`` goes through
  ``/update_weights_from_tensor`` (CUDA IPC handles serialized by SGLang's own serializer; the
  trainer and the server must share the GPU).

Verified only against an in-process fake of the HTTP API (SGLang needs CUDA).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from agentgym.core.errors import ConfigError, InfraError
from agentgym.inference._http import HTTPStatusError, JSONClient
from agentgym.inference.base import (
    Completion,
    EngineClosedError,
    SamplingParams,
    reject_choices,
)

__all__ = ["SGLangEngine", "sglang_sampling"]


def sglang_sampling(sampling: SamplingParams) -> dict[str, Any]:
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
                await self._http.get("/health")
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
                "/generate",
                {
                    "input_ids": [int(t) for t in prompt_token_ids],
                    "sampling_params": sglang_sampling(sampling),
                    "return_logprob": True,
                    "logprob_start_len": -1,
                },
            )
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._drained.set()
        return _completion(answer, self.weight_version)

    async def update_weights(self, weights: Mapping[str, Any] | str | os.PathLike[str]) -> None:
        """Load new weights: a checkpoint directory, or (colocated) a state dict of GPU tensors."""
        if isinstance(weights, str | os.PathLike):
            path = str(Path(weights).resolve())
            update: tuple[str, dict[str, Any]] = ("/update_weights_from_disk", {"model_path": path})
        elif self.colocated:
            update = (
                "/update_weights_from_tensor",
                {"serialized_named_tensors": _serialize(weights)},
            )
        else:
            raise ConfigError(
                "weights",
                "a state dict",
                "needs colocated=True (CUDA IPC to the server)",
                "save the weights with save_pretrained and pass the directory",
            )
        await self.start()
        self._open.clear()
        try:
            if self._in_flight:
                await self._drained.wait()
            await self._optional("/pause_generation", {"mode": self.pause_mode})
            answer = await self._http.post(
                update[0],
                {**update[1], "flush_cache": True, "weight_version": str(self.weight_version + 1)},
            )
            if isinstance(answer, dict) and answer.get("success") is False:
                raise InfraError(f"SGLang refused the weights: {answer.get('message')}")
            await self._optional("/flush_cache", None)
            self.weight_version += 1
        finally:
            await self._optional("/continue_generation", {})
            self._open.set()

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


def _completion(answer: Any, version: int) -> Completion:
    if not isinstance(answer, dict) or "meta_info" not in answer:
        raise InfraError(f"SGLang's /generate answer has no meta_info: {str(answer)[:300]}")
    meta = answer["meta_info"]
    ids, logprobs = _token_logprobs(meta)
    if answer.get("output_ids") is not None:
        ids = [int(t) for t in answer["output_ids"]]
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else finish
    matched = finish.get("matched") if isinstance(finish, dict) else None
    if len(logprobs) != len(ids):
        raise InfraError(f"SGLang returned {len(ids)} tokens but {len(logprobs)} logprobs")
    return Completion(
        token_ids=ids,
        logprobs=logprobs,
        finish_reason=kind if kind in ("stop", "length") else "abort",
        text=answer.get("text"),
        logprob_mode="temperature",
        weight_version=version,
        stop=matched if isinstance(matched, str | int) else None,
        info={
            "meta_info": {
                k: v for k, v in meta.items() if not k.startswith(("output_token", "input_token"))
            }
        },
    )


def _token_logprobs(meta: dict[str, Any]) -> tuple[list[int], list[float]]:
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
