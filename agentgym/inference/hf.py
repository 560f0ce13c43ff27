"""``HFEngine``: a transformers model in-process, with dynamic batching and a KV cache.

Requests go into a queue; one worker task on the running event loop admits queued requests
between decode steps (up to ``max_batch_size`` rows), so a request that arrives while a batch runs
joins it at the next step, and a finished request leaves at once. Each step (prefill of the
joining rows, one decode step for the others, sampling) runs on the engine's own worker thread
(``loop.run_in_executor``; a dedicated thread, so envs using ``asyncio.to_thread`` cannot starve
it), and the event loop keeps serving envs and HTTP while the model computes.

Sampling follows ``agentgym.inference.sampling_logprobs``; every request has its own
``torch.Generator`` (seeded from ``SamplingParams.seed``, else from the engine's seed), so a seeded
request gives the same tokens whatever else is in the batch, up to float rounding.

The worker task runs only while there is work: an idle engine holds no task, so an engine
dropped without ``close()`` leaves nothing pending on its loop.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agentgym.core.errors import ConfigError, Error
from agentgym.inference._batch import Row, RunningBatch
from agentgym.inference._prefix import PrefixCache
from agentgym.inference._static import static_decoder
from agentgym.inference._threads import ThreadTuner
from agentgym.inference.base import Completion, EngineClosedError, SamplingParams

__all__ = ["EngineStats", "HFEngine"]


@dataclass
class EngineStats:
    """Counters for tests and benchmarks."""

    steps: int = 0
    """Decode steps run (a step samples one token for every row)."""
    tokens: int = 0
    """Tokens sampled."""
    max_rows: int = 0
    """Most rows ever decoded together."""
    joins: int = 0
    """Prefills that joined a batch already running."""
    prefill_tokens: int = 0
    """Prompt tokens run through the model (identical prompts joining together count once)."""
    prefix_hits: int = 0
    """Prompts that continued a kept cache (see ``prefix_cache_bytes``)."""
    prefix_tokens: int = 0
    """Prompt tokens those hits did not have to prefill."""
    weights_copied: int = 0
    """Tensors the latest ``update_weights`` copied: 0 where every tensor it got is the model's
    own parameter (an engine sharing the trainer's weights; the update is a version bump)."""
    decode: str = ""
    """The decode path of the latest step: transformers, fused, static, graphs or compiled."""
    decode_threads: dict[int, int] = field(default_factory=dict)
    """Batch-size bucket (its largest row count) -> torch threads its decode steps run on now, as
    their latest timings found fastest (``threads=None`` on a CPU with more than one thread;
    empty otherwise or while still measuring)."""


class HFEngine:
    """Generate with a transformers causal LM in this process (CPU or one GPU).

    Args:
        model: a ``PreTrainedModel`` whose forward takes a KV cache (any causal LM).
        tokenizer: its tokenizer (EOS ids, decoding for stop strings and ``Completion.text``).
        max_batch_size: most requests decoded together; more wait in the queue.
        device: move the model there first (default: leave it where it is).
        seed: seeds the generators of requests that bring no ``SamplingParams.seed``.
        prefix_cache_bytes: KV cache kept from finished requests so that a prompt continuing one
            (the next turn of a conversation) prefills only its new tokens; 0 turns it off.
            Dropped on ``update_weights``. Independently of it, distinct prompts that join the
            batch together and start with the same 16 or more tokens (one system prompt, one
            tool schema) prefill that start once and then only their own tokens
            (``EngineStats.prefill_tokens`` counts it once).
        fused_decode: decode Llama and Qwen2 models with ``agentgym``'s own step (q/k/v and
            gate/up in one matrix product each, no per-step mask building): transformers'
            logits to float rounding, in about half the time per step for the tiny policy on a
            CPU (``benchmarks/README.md``). Other models always use transformers' forward;
            False: every model does.
        threads: torch threads of the engine's worker, which runs every prefill and decode step.
            None (the default), on a CPU with ``torch.get_num_threads()`` > 1 (as it is when the
            engine is made): prefills use that many and decode steps 1 or that many, whichever
            the engine's latest timings of its steps show to be faster for the batch's size
            (``EngineStats.decode_threads``; one step in 32 tries the other count); a small
            model's decode kernels can be too small to share, and how much a second thread costs
            depends on the machine's load, OpenMP's wait policy and the process's other threads,
            and changes as they do. An int: every step uses that many.
        decode: how decode steps run (``agentgym.inference._static``). ``eager``: one call of
            the fused step (or transformers' forward) per step, over the batch's growing cache.
            ``static``: fixed-shape buffers (a key/value slab, batch-size buckets), run eagerly
            (any device; what the graphs replay). ``graphs``: ``static`` recorded once per
            bucket as a CUDA graph and replayed (CUDA only). ``compiled``: ``graphs`` of a
            ``torch.compile``'d step (CUDA only; compiles once per bucket, minutes for a large
            model). ``auto`` (the default): ``graphs`` on a GPU for the models the fused step
            takes (Llama, Qwen2), else ``eager``. A bucket's first graph replay is checked
            against the eager step and the engine keeps the eager static step if they differ
            (``EngineStats.decode`` says which path runs).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 64,
        device: torch.device | str | None = None,
        seed: int | None = None,
        prefix_cache_bytes: int = 256 * 2**20,
        fused_decode: bool = True,
        threads: int | None = None,
        decode: str = "auto",
    ) -> None:
        if max_batch_size < 1:
            raise ConfigError("max_batch_size", max_batch_size, "must be >= 1", "use e.g. 64")
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise ConfigError(
                "threads", threads, "must be an int >= 1 or None", "use e.g. 1, or None for torch's"
            )
        if not isinstance(prefix_cache_bytes, int) or prefix_cache_bytes < 0:
            raise ConfigError(
                "prefix_cache_bytes", prefix_cache_bytes, "must be an int >= 0", "use 0 to turn off"
            )
        self.model = model.to(device) if device is not None else model
        self.model.eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.eos_ids = _eos_ids(model, tokenizer)
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        pad = (
            tokenizer.pad_token_id
            if tokenizer.pad_token_id is not None
            else min(self.eos_ids, default=0)
        )
        max_positions = getattr(model.config, "max_position_embeddings", None)
        self._prefixes = PrefixCache(prefix_cache_bytes) if prefix_cache_bytes else None
        self._batch = RunningBatch(
            self.model,
            self._decode,
            int(pad),
            max_positions,
            self._prefixes,
            fused_decode,
            static_decoder(self.model, decode, max_batch_size),
        )
        self._pending: deque[tuple[Row, asyncio.Future[Completion]]] = deque()
        self._futures: dict[int, asyncio.Future[Completion]] = {}
        self._seeds = random.Random(seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None
        # OpenMP and MKL keep thread counts per thread: without this the worker's matrix
        # products use every core, whatever torch.set_num_threads said.
        self._threads = threads or torch.get_num_threads()
        self._executor = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="agentgym-hfengine",
            initializer=torch.set_num_threads,
            initargs=(self._threads,),
        )
        self._worker_threads = self._threads  # what the worker's torch is set to now
        tuned = threads is None and self._threads > 1 and self._batch.device.type == "cpu"
        self._tuner = ThreadTuner(self._threads) if tuned else None
        self._paused = 0
        self._closed = False
        self.weight_version = 0
        self.stats = EngineStats()

    # -- public API ---------------------------------------------------------------------------

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams | None = None
    ) -> Completion:
        """Sample one completion; see ``InferenceEngine.generate``."""
        if self._closed:
            raise EngineClosedError("HFEngine.generate() after close(). Fix: make a new engine.")
        sampling = sampling or SamplingParams()
        prompt = self._check_prompt(prompt_token_ids)
        self._check_choices(sampling)
        max_positions = self._batch.max_positions
        if max_positions is not None and len(prompt) >= max_positions:
            return Completion(
                [],
                [],
                "length",
                text="",
                weight_version=self.weight_version,
                info={
                    "reason": f"prompt of {len(prompt)} tokens fills the "
                    f"{max_positions}-token context"
                },
            )
        self._ensure_worker()
        stop_ids = frozenset(sampling.stop_token_ids) | (
            frozenset() if sampling.ignore_eos else self.eos_ids
        )
        seed = sampling.seed if sampling.seed is not None else self._seeds.getrandbits(63)
        generator = None if sampling.greedy else torch.Generator().manual_seed(seed)
        row = Row(prompt, sampling, stop_ids, generator)
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._pending.append((row, future))
        self._futures[id(row)] = future
        self._wake.set()
        return await future

    async def update_weights(
        self, weights: Mapping[str, torch.Tensor] | str | os.PathLike[str]
    ) -> None:
        """Copy ``weights`` (a state dict, or a directory of ``*.safetensors``) into the model in
        place. New requests wait; running ones finish on the old weights first.

        A tensor that already is the model's own (same storage, as when the engine shares the
        trainer's parameters) is not copied: the update then only bumps ``weight_version`` and
        drops the prefix cache. Tensors on another device are copied straight to the model's
        (GPU to GPU without passing through the CPU)."""
        if self._closed:
            raise EngineClosedError(
                "HFEngine.update_weights() after close(). Fix: make a new engine."
            )
        self._ensure_worker()
        self._paused += 1
        try:
            await self._idle.wait()
            async with self._step_lock:
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._load, weights
                )
                self.weight_version += 1
        finally:
            self._paused -= 1
            self._wake.set()

    async def close(self) -> None:
        """Stop the worker; queued and running requests end with finish_reason "abort".

        The worker is cancelled and awaited on the loop it runs on, whichever loop awaits
        ``close()``: a task cancelled from another loop would be left pending there.
        """
        if self._closed:
            return
        self._closed = True
        loop = self._loop
        if loop is None or loop is asyncio.get_running_loop():
            await self._stop()
        elif loop.is_running():  # another thread's loop
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._stop(), loop))
        elif not loop.is_closed():  # stopped: run it on a thread, as this one's loop is busy
            await asyncio.to_thread(loop.run_until_complete, self._stop())
        self._executor.shutdown(wait=False)

    async def _stop(self) -> None:
        """``close()`` on the worker's loop: cancel the worker, abort what it held."""
        if self._worker is not None and not self._worker.done():
            async with self._step_lock:
                self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        rows = self._batch.clear() + [row for row, _ in self._pending]
        self._pending.clear()
        for row in rows:
            row.finish = row.finish or "abort"
            self._resolve(row, self._batch.completion(row, self.weight_version))

    # -- worker -------------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None and self._loop.is_running():
                raise Error(
                    "HFEngine is serving another running event loop. Fix: call it from that "
                    "loop, or make one engine per loop."
                )
            # Requests and events of a finished loop can never be resumed on this one.
            self._batch.clear()
            self._pending.clear()
            self._futures.clear()
            self._loop = loop
            self._wake = asyncio.Event()
            self._idle = asyncio.Event()
            self._idle.set()
            self._step_lock = asyncio.Lock()
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._work(), name="agentgym-hfengine")

    async def _work(self) -> None:
        while True:
            self._abort_cancelled()
            joining = self._admit()
            if not joining and not self._batch.rows:
                self._idle.set()
                if not self._pending:
                    # Nothing queued: end, rather than park a task that outlives an engine
                    # nobody closes; the next request starts a new worker.
                    return
                self._wake.clear()
                await self._wake.wait()  # requests queued while update_weights pauses
                continue
            self._idle.clear()
            async with self._step_lock:
                try:
                    loop = asyncio.get_running_loop()
                    finished = await loop.run_in_executor(self._executor, self._step, joining)
                except Exception as error:  # a model failure fails its requests, not the engine
                    self._fail(joining + self._batch.clear(), error)
                    continue
            for row, completion in finished:
                self._resolve(row, completion)

    def _admit(self) -> list[Row]:
        joining: list[Row] = []
        room = self.max_batch_size - len(self._batch.rows)
        while self._pending and not self._paused and len(joining) < room:
            row, future = self._pending.popleft()
            if future.cancelled():
                self._futures.pop(id(row), None)
                continue
            joining.append(row)
        return joining

    def _abort_cancelled(self) -> None:
        for row in self._batch.rows:
            future = self._futures.get(id(row))
            if future is None or future.cancelled():
                row.finish = "abort"

    def _step(self, joining: list[Row]) -> list[tuple[Row, Completion]]:
        rows = len(self._batch.rows)
        # Only pure decode steps are timed and tuned; a step with a prefill uses every thread.
        tuner = self._tuner if rows and not joining else None
        threads = self._threads if tuner is None else tuner.threads_for(rows)
        if threads != self._worker_threads:
            torch.set_num_threads(threads)
            self._worker_threads = threads
        start = time.perf_counter()
        training = self.model.training  # a model shared with a trainer that set train()
        if training:
            self.model.eval()
        try:
            with torch.inference_mode():
                if joining and self._batch.rows:
                    self.stats.joins += 1
                finished = self._batch.step(joining, self.weight_version)
        finally:
            if training:
                self.model.train()
        if tuner is not None:
            tuner.record(rows, threads, time.perf_counter() - start)
            self.stats.decode_threads = tuner.chosen
        self.stats.steps += 1
        self.stats.decode = self._batch.decode_path
        self.stats.tokens += len(self._batch.rows) + len(finished)
        self.stats.max_rows = max(self.stats.max_rows, len(self._batch.rows) + len(finished))
        self.stats.prefill_tokens = self._batch.prefilled
        if self._prefixes is not None:
            self.stats.prefix_hits = self._prefixes.hits
            self.stats.prefix_tokens = self._prefixes.reused_tokens
        return finished

    def _resolve(self, row: Row, completion: Completion) -> None:
        future = self._futures.pop(id(row), None)
        if future is not None and not future.done():
            future.set_result(completion)

    def _fail(self, rows: list[Row], error: Exception) -> None:
        for row in rows:
            future = self._futures.pop(id(row), None)
            if future is not None and not future.done():
                future.set_exception(error)

    # -- helpers ------------------------------------------------------------------------------

    def _decode(self, tokens: list[int], skip_special: bool) -> str:
        return str(self.tokenizer.decode(tokens, skip_special_tokens=skip_special))

    def _check_prompt(self, prompt_token_ids: Sequence[int]) -> list[int]:
        prompt = [int(t) for t in prompt_token_ids]
        if not prompt:
            raise ConfigError("prompt_token_ids", prompt, "is empty", "render at least one token")
        bad = [t for t in prompt if not 0 <= t < self.vocab_size]
        if bad:
            raise ConfigError(
                "prompt_token_ids",
                bad[:5],
                f"are outside the vocabulary [0, {self.vocab_size})",
                "tokenize with this model's tokenizer",
            )
        return prompt

    def _check_choices(self, sampling: SamplingParams) -> None:
        # An id outside the vocabulary would fail the whole batch's step, not just this request.
        bad = sorted({t for choice in sampling.choices for t in choice if t >= self.vocab_size})
        if bad:
            raise ConfigError(
                "choices",
                bad[:5],
                f"hold ids outside the vocabulary [0, {self.vocab_size})",
                "tokenize the choices with this model's tokenizer",
            )

    def _load(self, weights: Mapping[str, torch.Tensor] | str | os.PathLike[str]) -> None:
        if self._prefixes is not None:
            self._prefixes.clear()  # caches computed by the old weights
        self._batch.weights_changed()  # also when every tensor is shared: updated in place
        if isinstance(weights, str | os.PathLike):
            weights = _read_safetensors(Path(weights))
        own = self.model.state_dict()
        unexpected = sorted(name for name in weights if name not in own)
        if unexpected:
            raise ConfigError(
                "weights",
                unexpected[:5],
                "are not parameters of this model",
                "pass model.state_dict() keys",
            )
        changed = {name: t for name, t in weights.items() if not _same_tensor(t, own[name])}
        if changed:
            with torch.no_grad():
                self.model.load_state_dict(changed, strict=False)
        self.stats.weights_copied = len(changed)


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` is ``b``'s very storage (a detached view of the same parameter)."""
    return (
        a.data_ptr() == b.data_ptr()
        and a.device == b.device
        and a.dtype == b.dtype
        and a.shape == b.shape
        and a.stride() == b.stride()
    )


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    ids: set[int] = set()
    config = getattr(model, "generation_config", None) or model.config
    eos = getattr(config, "eos_token_id", None)
    ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return frozenset(ids)


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise ConfigError(
            "weights",
            str(path),
            "holds no .safetensors file",
            "pass a state dict, or a checkpoint saved with save_pretrained",
        )
    state: dict[str, torch.Tensor] = {}
    for file in files:
        state.update(load_file(file))
    return state
