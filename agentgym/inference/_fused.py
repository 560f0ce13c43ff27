"""One decode step of a Llama-style causal LM (Llama, Qwen2) without transformers' forward.

``HFEngine`` decodes one token per row per step. For a small model transformers' forward is
mostly per-call Python and many small kernels (mask building, cache and attention dispatch,
separate q, k, v and gate, up projections); on a CPU that costs more than the arithmetic. This
step runs the same layers with the same weights: q, k and v in one matrix product, gate and up
in one, the model's own rotary embedding module, scaled dot-product attention over the batch's
``DynamicCache`` (each layer's new column written into spare columns of a buffer, not
concatenated), a boolean padding mask built once per step. Logits match transformers' to float
rounding (tests compare them).

Only the decode step is replaced; prompts are prefilled by the model's own forward. Models this
does not recognise exactly (other architectures, sliding windows, adapters wrapping the linear
layers, norms or activations of another kind) keep transformers' forward: ``FusedDecoder.build``
returns None for them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["FusedDecoder"]

_ARCHITECTURES = frozenset({"llama", "qwen2"})

_Fused = tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]
"""Per layer: q/k/v weight and bias, gate/up weight and bias (concatenated along outputs)."""


class FusedDecoder:
    """``decoder(ids [B, 1], mask [B, T], positions [B, 1], cache) -> logits [B, V]``.

    ``mask`` covers the cache's columns plus the new token (1 real, 0 padding), as the batch
    passes it to the model. The concatenated q/k/v and gate/up weights are rebuilt after
    ``invalidate()`` (every weight push calls it) and whenever a source parameter's version
    counter moved (``load_state_dict``). The counters alone are not enough: a fused optimizer
    step updates the parameters in place without bumping them, and an engine sharing the
    trainer's parameters then decoded with the q/k/v and gate/up weights of its first step.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.inner = model.model
        self.layers = list(self.inner.layers)
        attention = self.layers[0].self_attn
        self.heads = int(model.config.num_attention_heads)
        self.kv_heads = int(model.config.num_key_value_heads)
        self.head_dim = int(attention.head_dim)
        self.scale = float(attention.scaling)
        self.intermediate = int(self.layers[0].mlp.gate_proj.out_features)
        self._sources = [
            (
                layer.self_attn.q_proj,
                layer.self_attn.k_proj,
                layer.self_attn.v_proj,
                layer.mlp.gate_proj,
                layer.mlp.up_proj,
            )
            for layer in self.layers
        ]
        self._key: tuple[tuple[int, int], ...] | None = None
        self._fused: list[_Fused] = []

    @classmethod
    def build(cls, model: Any) -> FusedDecoder | None:
        """A decoder for ``model``, or None where its layers are not exactly the ones this
        step computes."""
        return cls(model) if _supported(model) else None

    def __call__(
        self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any
    ) -> torch.Tensor:
        fused = self._weights()
        rows = ids.shape[0]
        q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        x = self.inner.embed_tokens(ids)  # [B, 1, H]
        cos, sin = self.inner.rotary_emb(x, positions)  # [B, 1, D]
        cos, sin = cos[:, None], sin[:, None]  # [B, 1, 1, D], broadcast over heads
        # additive: 0 on real columns, -inf on padding; [B, 1, 1, T], broadcast over heads
        bias = torch.zeros(mask.shape, dtype=x.dtype, device=x.device)
        bias = bias.masked_fill_(mask == 0, float("-inf"))[:, None, None, :]
        for i, layer in enumerate(self.layers):
            qkv_weight, qkv_bias, gate_up_weight, gate_up_bias = fused[i]
            h = _rms_norm(x, layer.input_layernorm)
            q, k, v = F.linear(h, qkv_weight, qkv_bias).split([q_size, kv_size, kv_size], -1)
            q = _rotate(q.view(rows, 1, self.heads, self.head_dim).transpose(1, 2), cos, sin)
            k = _rotate(k.view(rows, 1, self.kv_heads, self.head_dim).transpose(1, 2), cos, sin)
            v = v.view(rows, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            k, v = _append(cache.layers[i], k, v)  # [B, kv_heads, T, D]
            attended = self._attend(q, k, v, bias)  # [B, kv_heads, groups, D]
            x = x + layer.self_attn.o_proj(attended.reshape(rows, 1, q_size))
            h = _rms_norm(x, layer.post_attention_layernorm)
            gate, up = F.linear(h, gate_up_weight, gate_up_bias).split([self.intermediate] * 2, -1)
            x = x + layer.mlp.down_proj(F.silu(gate) * up)
        x = _rms_norm(x, self.inner.norm)
        return self.model.lm_head(x)[:, -1]  # [B, V]

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, bias: Tensor) -> Tensor:
        """Attention of one query per row, as matrix products: each key/value head's group of
        query heads in one product, no repeated keys. On a CPU this beats
        ``scaled_dot_product_attention``'s flash kernel for a single query (~160 against
        ~210 µs per layer for 64 rows of the tiny policy on one thread)."""
        rows = q.shape[0]
        grouped = q.reshape(rows, self.kv_heads, self.heads // self.kv_heads, self.head_dim)
        scores = torch.matmul(grouped, k.transpose(-1, -2)).mul_(self.scale).add_(bias)
        return torch.matmul(torch.softmax(scores, dim=-1), v)  # [B, kv_heads, groups, D]

    def invalidate(self) -> None:
        """Rebuild the concatenated weights at the next step (the parameters changed)."""
        self._key = None

    def _weights(self) -> list[_Fused]:
        key = tuple(
            (p.data_ptr(), p._version)
            for modules in self._sources
            for module in modules
            for p in (module.weight, module.bias)
            if p is not None
        )
        if key != self._key:
            with torch.no_grad():
                self._fused = [_fuse(*modules) for modules in self._sources]
            self._key = key
        return self._fused


def _fuse(*linears: torch.nn.Linear) -> _Fused:
    q, k, v, gate, up = linears
    qkv_bias = None if q.bias is None else torch.cat([q.bias, k.bias, v.bias])
    gate_up_bias = None if gate.bias is None else torch.cat([gate.bias, up.bias])
    return (
        torch.cat([q.weight, k.weight, v.weight]),
        qkv_bias,
        torch.cat([gate.weight, up.weight]),
        gate_up_bias,
    )


_SPARE = 64
"""Columns a layer's key and value buffers get beyond what they hold when they are (re)made."""


def _append(layer: Any, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """``cache.update`` for one new column without copying the cache: the layer's keys and
    values become views of buffers with spare columns, and each step writes the new column into
    the next free one (``DynamicLayer.update`` concatenates, copying the whole cache every step
    and layer). Anything that replaces the layer's tensors (the batch selecting rows, trimming or
    joining) leaves them no longer views of the buffers; the next step makes new ones."""
    keys, values = layer.keys, layer.values
    used = keys.shape[-2]
    buffers = getattr(layer, "_agentgym_buffers", None)
    if buffers is None or not (_leads(keys, buffers[0], used) and _leads(values, buffers[1], used)):
        rows, heads, _, dim = keys.shape
        buffers = tuple(t.new_empty(rows, heads, used + _SPARE, dim) for t in (keys, values))
        buffers[0][..., :used, :] = keys
        buffers[1][..., :used, :] = values
        layer._agentgym_buffers = buffers
    key_buffer, value_buffer = buffers
    key_buffer[..., used, :] = k[..., 0, :]
    value_buffer[..., used, :] = v[..., 0, :]
    layer.keys, layer.values = key_buffer[..., : used + 1, :], value_buffer[..., : used + 1, :]
    return layer.keys, layer.values


def _leads(tensor: Tensor, buffer: Tensor, used: int) -> bool:
    """Whether ``tensor`` is the first ``used`` columns of ``buffer``, with a free one after."""
    return (
        tensor.data_ptr() == buffer.data_ptr()
        and tensor.stride() == buffer.stride()
        and tensor.shape[:2] == buffer.shape[:2]
        and used < buffer.shape[-2]
    )


def _rms_norm(x: torch.Tensor, norm: Any) -> torch.Tensor:
    # As Llama's and Qwen2's RMSNorm: normalise in float32, scale in the input's dtype.
    dtype = x.dtype
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * x32.to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _supported(model: Any) -> bool:
    config = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    if config is None or inner is None or getattr(config, "model_type", None) not in _ARCHITECTURES:
        return False
    if getattr(config, "hidden_act", None) != "silu" or getattr(config, "pretraining_tp", 1) != 1:
        return False
    if any(t != "full_attention" for t in getattr(config, "layer_types", None) or ()):
        return False  # sliding-window layers
    if getattr(config, "use_sliding_window", False):
        return False
    if not all(hasattr(inner, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb")):
        return False
    if type(getattr(model, "lm_head", None)) is not torch.nn.Linear or not len(inner.layers):
        return False
    # Weights made under torch.inference_mode have no version counter to watch for changes.
    if any(p.is_inference() for p in model.parameters()):
        return False
    return all(_plain_layer(layer) for layer in inner.layers) and _plain_norm(inner.norm)


def _plain_layer(layer: Any) -> bool:
    attention, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
    names = (("q_proj", "k_proj", "v_proj", "o_proj"), ("gate_proj", "up_proj", "down_proj"))
    # Exactly nn.Linear: an adapter (LoRA) or a quantised layer computes something else.
    linear = all(
        type(getattr(module, name, None)) is torch.nn.Linear
        for module, group in zip((attention, mlp), names, strict=True)
        for name in group
    )
    if not linear or not all(hasattr(attention, a) for a in ("head_dim", "scaling")):
        return False
    # Biases are concatenated with their weights: all of q, k, v have one or none do.
    if (
        len(
            {
                attention.q_proj.bias is None,
                attention.k_proj.bias is None,
                attention.v_proj.bias is None,
            }
        )
        > 1
    ):
        return False
    if (mlp.gate_proj.bias is None) != (mlp.up_proj.bias is None):
        return False
    norms = (
        getattr(layer, "input_layernorm", None),
        getattr(layer, "post_attention_layernorm", None),
    )
    return all(_plain_norm(norm) for norm in norms)


def _plain_norm(norm: Any) -> bool:
    return type(norm).__name__ in ("LlamaRMSNorm", "Qwen2RMSNorm") and hasattr(
        norm, "variance_epsilon"
    )
