"""A decode step over fixed-shape buffers, replayed as a CUDA graph on a GPU.

On a GPU, a small model's decode step is mostly kernel-launch and Python overhead: hundreds of
small kernels per step, each launched from Python. A CUDA graph records the step's kernels once
and replays them with one launch; ``torch.compile`` can first fuse them. Both need every tensor
the step touches to keep its shape and address between calls, which ``RunningBatch``'s cache
(rows join and leave, columns grow) does not. ``StaticDecoder`` gives the step that:

- a *slab* per layer for keys and values, ``[rows, kv_heads, columns, head_dim]``, zeroed when
  made (columns grow by ``_COLUMNS`` at a time; growing drops the recorded graphs);
- batch-size buckets (1, 2, 4, ... up to ``max_rows``): a batch of ``B`` rows runs the step of
  the smallest bucket >= B, its extra rows computing a throw-away token;
- static inputs per bucket (ids, positions, the column to write, an additive mask over all the
  slab's columns: 0 on a row's real tokens, -inf on padding and unused columns).

The batch's ``DynamicCache`` stays the source of truth: before a step, any layer whose keys and
values are not already the leading part of the slab (a join, a retirement, a trim replaced them)
is copied in; after it, the cache's layers are views of the slab, one column longer. In steady
decoding nothing is copied.

The layers are the model's own modules (separate q, k, v and gate, up projections: no
concatenated copy of the weights, which a trainer sharing them would make stale), attention over
the key/value heads without repeating them (each KV head's group of query heads in one product),
``agentgym``'s fused step's norms and rotary embedding. On a CPU the same step runs without a
graph (``mode="static"``): the tests compare its logprobs with a teacher-forced pass there.

Each bucket's first graph replay is checked against the same step run eagerly; a graph whose
logits differ beyond float rounding is dropped and the engine keeps the eager static step
(``StaticDecoder.fallback`` says why).
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from agentgym.core.errors import ConfigError
from agentgym.inference._fused import FusedDecoder, _rms_norm, _rotate

__all__ = ["DecodeMode", "StaticDecoder", "static_decoder"]

DecodeMode = Literal["static", "graphs", "compiled"]

_COLUMNS = 256
"""The slab's columns grow in steps of this many (each growth records new graphs)."""


class _Bucket:
    """Static inputs and output of the step for ``rows`` rows, and its recorded graph."""

    def __init__(self, rows: int, columns: int, dtype: torch.dtype, device: torch.device) -> None:
        self.rows = rows
        self.ids = torch.zeros(rows, 1, dtype=torch.long, device=device)
        self.positions = torch.zeros(rows, 1, dtype=torch.long, device=device)
        self.column = torch.zeros(1, dtype=torch.long, device=device)
        self.bias = torch.zeros(rows, 1, 1, columns, dtype=dtype, device=device)
        self.graph: Any = None  # torch.cuda.CUDAGraph once recorded
        self.logits: Tensor | None = None  # the graph's output buffer

    def inputs(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return self.ids, self.positions, self.column, self.bias


class StaticDecoder:
    """``decoder(ids [B, 1], mask [B, T], positions [B, 1], cache) -> logits [B, V]``, the
    same call as ``FusedDecoder``; see the module docstring."""

    def __init__(self, fused: FusedDecoder, max_rows: int, mode: DecodeMode = "static") -> None:
        self.fused = fused
        self.mode: DecodeMode = mode
        self.buckets = _buckets(max_rows)
        self.fallback: str | None = None
        """Why the graphs were turned off, when they were."""
        self.version: int = 0
        """The engine's weight version; the recorded graphs are checked when it changes."""
        self._slab: list[tuple[Tensor, Tensor]] = []
        self._columns = 0
        self._steps: dict[int, _Bucket] = {}
        self._pool: Any = None
        self._checked_version = -1
        self._weights_key: tuple[int, ...] = ()
        step = self._forward
        if mode == "compiled":
            step = torch.compile(self._forward, dynamic=False)  # type: ignore[assignment]
        self._step = step

    def __call__(self, ids: Tensor, mask: Tensor, positions: Tensor, cache: Any) -> Tensor:
        rows, used = ids.shape[0], mask.shape[1] - 1
        keys = cache.layers[0].keys
        self._ensure_slab(used + 1, keys.dtype, keys.device)
        self._adopt(cache, rows, used)
        bucket = self._bucket(next(b for b in self.buckets if b >= rows))
        self._fill(bucket, ids, mask, positions, used)
        eager = self.mode == "static"
        logits = self._forward(*bucket.inputs()) if eager else self._replay(bucket)
        for layer, (k, v) in zip(cache.layers, self._slab, strict=True):
            layer.keys, layer.values = k[:rows, :, : used + 1], v[:rows, :, : used + 1]
        return logits[:rows].clone()

    # -- the step ---------------------------------------------------------------------------

    def _forward(self, ids: Tensor, positions: Tensor, column: Tensor, bias: Tensor) -> Tensor:
        """One token for each of the bucket's rows; writes its keys and values into
        ``column`` of the slab. Every tensor it touches is static (graph-safe)."""
        f = self.fused
        rows = ids.shape[0]
        x = f.inner.embed_tokens(ids)  # [b, 1, H]
        cos, sin = f.inner.rotary_emb(x, positions)
        cos, sin = cos[:, None], sin[:, None]  # [b, 1, 1, D]
        for layer, (slab_k, slab_v) in zip(f.layers, self._slab, strict=True):
            attention, mlp = layer.self_attn, layer.mlp
            h = _rms_norm(x, layer.input_layernorm)
            q = attention.q_proj(h).view(rows, 1, f.heads, f.head_dim).transpose(1, 2)
            k = attention.k_proj(h).view(rows, 1, f.kv_heads, f.head_dim).transpose(1, 2)
            v = attention.v_proj(h).view(rows, 1, f.kv_heads, f.head_dim).transpose(1, 2)
            keys, values = slab_k[:rows], slab_v[:rows]  # [b, kv_heads, C, D]
            keys.index_copy_(2, column, _rotate(k, cos, sin))
            values.index_copy_(2, column, v)
            attended = f._attend(_rotate(q, cos, sin), keys, values, bias)
            x = x + attention.o_proj(attended.reshape(rows, 1, f.heads * f.head_dim))
            h = _rms_norm(x, layer.post_attention_layernorm)
            x = x + mlp.down_proj(F.silu(mlp.gate_proj(h)) * mlp.up_proj(h))
        x = _rms_norm(x, f.inner.norm)
        return f.model.lm_head(x)[:, -1]  # [b, V]

    # -- buffers ----------------------------------------------------------------------------

    def _ensure_slab(self, needed: int, dtype: torch.dtype, device: torch.device) -> None:
        if self._slab and needed <= self._columns and self._slab[0][0].dtype == dtype:
            return
        columns = -(-needed // _COLUMNS) * _COLUMNS
        rows, f = self.buckets[-1], self.fused
        shape = (rows, f.kv_heads, columns, f.head_dim)
        # zeros: unused columns are masked, but a masked NaN would still poison the softmax
        self._slab = [
            (
                torch.zeros(shape, dtype=dtype, device=device),
                torch.zeros(shape, dtype=dtype, device=device),
            )
            for _ in f.layers
        ]
        self._columns = columns
        self._steps.clear()  # their inputs and graphs address the old slab

    def _adopt(self, cache: Any, rows: int, used: int) -> None:
        """Copy into the slab every cache layer that is not already its leading part."""
        for layer, (slab_k, slab_v) in zip(cache.layers, self._slab, strict=True):
            for tensor, slab in ((layer.keys, slab_k), (layer.values, slab_v)):
                if _leads(tensor, slab, rows, used):
                    continue
                if tensor.untyped_storage().data_ptr() == slab.untyped_storage().data_ptr():
                    tensor = tensor.clone()  # a trimmed view of the slab: do not overlap
                slab[:rows, :, :used] = tensor

    def _bucket(self, rows: int) -> _Bucket:
        bucket = self._steps.get(rows)
        if bucket is None:
            keys = self._slab[0][0]
            bucket = _Bucket(rows, self._columns, keys.dtype, keys.device)
            self._steps[rows] = bucket
        return bucket

    def _fill(self, bucket: _Bucket, ids: Tensor, mask: Tensor, pos: Tensor, used: int) -> None:
        rows = ids.shape[0]
        bucket.ids[:rows].copy_(ids)
        bucket.ids[rows:] = 0
        bucket.positions[:rows].copy_(pos)
        bucket.positions[rows:] = 0
        bucket.column.fill_(used)
        bias = bucket.bias[:, 0, 0]  # [b, C]
        bias.fill_(float("-inf"))
        bias[:rows, : used + 1].masked_fill_(mask.to(torch.bool), 0.0)
        bias[rows:, used] = 0.0  # the throw-away rows see their own token only

    # -- graphs -----------------------------------------------------------------------------

    def _replay(self, bucket: _Bucket) -> Tensor:
        self._check_weights()
        if bucket.graph is None:
            try:
                graph = self._record(bucket)
            except Exception as error:  # a model or torch version the capture cannot take
                return self._give_up(bucket, f"recording a CUDA graph failed: {error!r}")
            assert bucket.logits is not None
            graph.replay()
            eager = self._forward(*bucket.inputs())  # rewrites the same column: idempotent
            gap = _gap(bucket.logits, eager)
            if gap is not None:
                return self._give_up(bucket, gap, eager)
            return eager
        bucket.graph.replay()
        assert bucket.logits is not None
        return bucket.logits

    def _record(self, bucket: _Bucket) -> Any:
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up (and compilation) outside the capture
                self._step(*bucket.inputs())
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # thread-local: the engine records on its worker thread; CUDA work another thread does
        # meanwhile must not fail the capture (nor be captured)
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            bucket.logits = self._step(*bucket.inputs())
        bucket.graph = graph
        return graph

    def _check_weights(self) -> None:
        """Graphs address the parameters they were recorded with: after a weight update that
        replaced (rather than overwrote) any, record them again."""
        if self._checked_version == self.version:
            return
        key = tuple(p.data_ptr() for p in self.fused.model.parameters())
        if key != self._weights_key:
            for bucket in self._steps.values():
                bucket.graph, bucket.logits = None, None
            self._weights_key = key
        self._checked_version = self.version

    def _give_up(self, bucket: _Bucket, why: str, eager: Tensor | None = None) -> Tensor:
        warnings.warn(
            f"HFEngine: decode with CUDA graphs turned off ({why}); decoding eagerly. "
            "Fix: report it with the model's config; pass decode='eager' to silence this.",
            RuntimeWarning,
            stacklevel=2,
        )
        self.fallback, self.mode = why, "static"
        self._steps.clear()
        return eager if eager is not None else self._forward(*bucket.inputs())


_DECODE_MODES = ("auto", "eager", "static", "graphs", "compiled")


def static_decoder(model: Any, decode: str, max_rows: int) -> StaticDecoder | None:
    """The fixed-shape decode step ``decode`` asks for (None: eager)."""
    if decode not in _DECODE_MODES:
        raise ConfigError("decode", decode, f"is not one of {_DECODE_MODES}", "use auto")
    on_gpu = next(model.parameters()).device.type == "cuda"
    wanted = decode != "eager" and (decode != "auto" or on_gpu)
    fused = FusedDecoder.build(model) if wanted else None
    if decode == "auto":
        return StaticDecoder(fused, max_rows, "graphs") if fused is not None and on_gpu else None
    if decode == "eager":
        return None
    if fused is None:
        raise ConfigError(
            "decode",
            decode,
            f"needs a Llama or Qwen2 model, not {type(model).__name__}",
            "use decode='eager'",
        )
    if decode != "static" and not on_gpu:
        raise ConfigError("decode", decode, "needs the model on a CUDA device", "use static")
    return StaticDecoder(fused, max_rows, decode)  # type: ignore[arg-type]


def _gap(graphed: Tensor, eager: Tensor) -> str | None:
    """None when the graph's logits equal the eager step's to float rounding; else why not."""
    scale = max(1.0, float(eager.float().abs().max()))
    tolerance = (2e-2 if eager.dtype in (torch.bfloat16, torch.float16) else 1e-4) * scale
    worst = float((graphed.float() - eager.float()).abs().max())
    if worst <= tolerance:  # NaN compares False: refused
        return None
    return f"its logits differ from the eager step's by {worst:.3g} (tolerance {tolerance:.3g})"


def _buckets(max_rows: int) -> list[int]:
    """1, 2, 4, ... below ``max_rows``, then ``max_rows``."""
    sizes, size = [], 1
    while size < max_rows:
        sizes.append(size)
        size *= 2
    return [*sizes, max_rows]


def _leads(tensor: Tensor, slab: Tensor, rows: int, used: int) -> bool:
    """Whether ``tensor`` is ``slab[:rows, :, :used]`` itself (a view, no copy needed)."""
    return (
        tensor.data_ptr() == slab.data_ptr()
        and tensor.stride() == slab.stride()
        and tuple(tensor.shape) == (rows, slab.shape[1], used, slab.shape[3])
    )
