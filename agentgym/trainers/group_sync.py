"""Weights to an SGLang server (or ``agentgym serve``) through a process group, verified.

``GroupSync`` is what a ``ServerPolicy`` built with ``sync=GroupSync(...)`` does at each push
instead of writing a model directory:

1. at the first push, the trainer opens a process group as rank 0 (``backend``: ``"nccl"``
   on GPUs, ``"gloo"`` on CPUs) and has the server join it (``/init_weights_update_group``);
2. the policy's tensors (one of tied tensors) go in buckets of one dtype, at most
   ``bucket_bytes`` each (``/update_weights_from_distributed`` per bucket while the trainer
   broadcasts it), the
   whole bracketed as a push by disk is: generation paused (SGLang's ``pause_mode``), the
   buckets loaded, the cache flushed, generation continued; the last bucket names the policy
   version;
3. the server's checksum of every tensor it now holds (``/weights_checker``) is compared with
   the trainer's own of what it sent (cast to the dtype the server holds): a tensor that
   differs, or that the server lacks, stops the run with ``WeightSyncMismatch`` naming the
   tensor and the server. A server that gives no checksums agentgym can reproduce (SGLang's
   are its own hash) is not verified, and a warning says so once.
"""

from __future__ import annotations

import asyncio
import copy
import socket
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import torch

from agentgym.core.errors import ConfigError, InfraError
from agentgym.inference import weight_group as wg

__all__ = ["GroupSync", "WeightSyncMismatch"]

T = TypeVar("T")


class WeightSyncMismatch(InfraError):
    """After a sync, a tensor the server holds differs from the trainer's (or is missing)."""


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


async def _in_daemon(fn: Callable[[], T]) -> T:
    """``fn()`` on a daemon thread: a collective that never completes (its peer refused)
    must not keep the interpreter from exiting, as an executor thread would."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            result = fn()
        except BaseException as error:  # handed to the awaiting coroutine
            if not future.done():
                loop.call_soon_threadsafe(_settle, future, None, error)
        else:
            loop.call_soon_threadsafe(_settle, future, result, None)

    threading.Thread(target=run, name="agentgym-weight-group", daemon=True).start()
    return await future


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class GroupSync:
    """How a ``ServerPolicy`` pushes through a process group (see the module docstring).

    Args:
        backend: ``"gloo"`` (CPU tensors) or ``"nccl"`` (GPU); None: nccl when CUDA is
            available, else gloo.
        bucket_bytes: the most bytes one ``/update_weights_from_distributed`` call carries.
        flatten: send each bucket as one flat uint8 buffer, one broadcast
            (``load_format="flattened_bucket"``, which agentgym serve and recent SGLang
            receive); False: one broadcast per tensor (SGLang's default receiver).
        master_address: the address the server reaches this process at.
        master_port: the group's port; None: a free one.
        group_name: SGLang's ``group_name``.
        server_ranks: the server's workers (its tensor-parallel size).
        verify: compare checksums after every sync.
        timeout: seconds for the server to join, and for a collective.
    """

    def __init__(
        self,
        *,
        backend: str | None = None,
        bucket_bytes: int = wg.DEFAULT_BUCKET_BYTES,
        flatten: bool = True,
        master_address: str = "127.0.0.1",
        master_port: int | None = None,
        group_name: str = wg.DEFAULT_GROUP_NAME,
        server_ranks: int = 1,
        verify: bool = True,
        timeout: float = 300.0,
    ) -> None:
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend not in wg.BACKENDS:
            raise ConfigError(
                "weight_sync_backend",
                backend,
                "is not a process-group backend",
                f"use {wg.BACKENDS}",
            )
        if bucket_bytes < 2**20:
            raise ConfigError(
                "bucket_bytes", bucket_bytes, "must be at least 1 MiB", "use e.g. 512 MiB"
            )
        if server_ranks < 1:
            raise ConfigError("server_ranks", server_ranks, "must be >= 1", "pass the server's tp")
        self.backend, self.bucket_bytes, self.flatten = backend, bucket_bytes, flatten
        self.master_address, self.master_port = master_address, master_port
        self.group_name, self.server_ranks = group_name, server_ranks
        self.verify, self.timeout = verify, timeout
        self.group: Any = None
        # NCCL sends from the current GPU, gloo from CPU memory (a GPU policy is copied there)
        self.device = "cuda" if backend == "nccl" else "cpu"
        self.unverified_warned = False
        self.calls = 0
        """``/update_weights_from_distributed`` calls so far (one per bucket)."""

    def for_server(self, index: int) -> GroupSync:
        """This sync for the run's server ``index`` (0: itself): the same settings, a process
        group of its own (``master_port + index`` when a port was given)."""
        if index == 0:
            return self
        other = copy.copy(self)
        other.group, other.calls, other.unverified_warned = None, 0, False
        if self.master_port is not None:
            other.master_port = self.master_port + index
        return other

    async def connect(self, engine: Any) -> None:
        """Open the group as rank 0 and have ``engine``'s server join it."""
        port = self.master_port or _free_port(self.master_address)
        world = 1 + self.server_ranks
        body = wg.init_group_request(
            self.master_address,
            port,
            world,
            rank_offset=1,
            group_name=self.group_name,
            backend=self.backend,
        )
        joined = asyncio.ensure_future(
            _in_daemon(
                lambda: wg.join_group(
                    self.master_address, port, 0, world, self.backend, self.timeout
                )
            )
        )
        try:
            await engine.init_weights_group(body)
        except BaseException:
            joined.add_done_callback(lambda task: task.cancelled() or task.exception())
            raise
        self.group = await joined

    async def push(self, engine: Any, weights: Mapping[str, torch.Tensor]) -> None:
        """Send ``weights`` to ``engine``'s server (bracketed by the engine), then verify."""
        if self.group is None:
            await self.connect(engine)
        buckets = wg.plan_buckets(wg.without_aliases(weights), self.bucket_bytes)
        group, flatten, device = self.group, self.flatten, self.device

        async def send(bucket: wg.Bucket) -> None:
            await _in_daemon(lambda: wg.send_bucket(group, bucket, flatten=flatten, device=device))

        try:
            await engine.update_weights_from_group(
                buckets, send, group_name=self.group_name, flatten=flatten
            )
        except BaseException:
            self.group = None  # a broken collective leaves the group unusable: rejoin next
            raise
        self.calls += len(buckets)
        if self.verify:
            await self.check(engine, weights)

    async def check(self, engine: Any, weights: Mapping[str, torch.Tensor]) -> None:
        """Raise ``WeightSyncMismatch`` unless the server's checksum of each of ``weights``
        equals the trainer's."""
        if self.unverified_warned:  # a server whose checksums are not agentgym's
            return
        url = getattr(engine, "base_url", type(engine).__name__)
        # the trainer's digests are computed while the server computes its own
        own = asyncio.ensure_future(asyncio.to_thread(_checksums, weights, {}))
        try:
            served, dtypes, algorithm = await engine.weight_checksums()
        finally:
            expected = await own
        if algorithm != wg.CHECKSUM_ALGORITHM:
            if not self.unverified_warned:
                self.unverified_warned = True
                warnings.warn(
                    f"the inference server at {url} gives no {wg.CHECKSUM_ALGORITHM} checksums "
                    "of its weights: syncs to it are not verified tensor by tensor",
                    stacklevel=2,
                )
            return
        recast = {
            n: t
            for n, t in weights.items()
            if dtypes.get(n, wg.dtype_name(t.dtype)) != wg.dtype_name(t.dtype)
        }
        if recast:  # the server holds another dtype: compare that
            expected |= await asyncio.to_thread(_checksums, recast, dtypes)
        for name, digest in expected.items():
            held = served.get(name)
            if held != digest:
                state = "does not hold" if held is None else f"holds {held} for"
                raise WeightSyncMismatch(
                    f"weight sync to the inference server at {url}: the server {state} tensor "
                    f"{name!r}, the trainer sent {digest}. The server's weights are not the "
                    "policy's; nothing more is trained on its samples. Fix: restart the server "
                    "and rerun with --resume (the last checkpoint is intact); if it recurs, "
                    'sync by files (weight_sync = "disk").'
                )


def _checksums(weights: Mapping[str, torch.Tensor], dtypes: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, tensor in weights.items():
        held = dtypes.get(name)
        if held is not None and held != wg.dtype_name(tensor.dtype):
            tensor = tensor.to(wg.parse_dtype(held))
        out[name] = wg.tensor_checksum(tensor)
    return out
