"""The module a backend trains: the causal-LM policy and, for PPO, a value model.

Positions follow ``Episode``: token ``t`` is predicted from the logits at ``t - 1``, so every
per-token output is ``[B, T]`` aligned with ``token_ids`` and 0 at position 0 (never sampled).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from agentgym.trainers.chunked_head import chunk_size, head_logprobs
from agentgym.trainers.logprobs import place, restrict_logits, shift, token_logprobs
from agentgym.trainers.prefix_sharing import find_shared_prefixes, shared_prefix_hidden

__all__ = ["PolicyModule", "PolicyOutput", "ValueModel", "restrict_logits", "token_logprobs"]


class PolicyOutput(NamedTuple):
    logprobs: Tensor  # [B, T] log π(token_t | tokens_<t) at the temperature, differentiable
    entropy: Tensor | None  # [B, T] entropy of that distribution, no gradient
    values: Tensor | None  # [B, T] V(s_t), the value before token t is sampled


def _selected_hidden(
    policy: Any, input_ids: Tensor, attention_mask: Tensor, positions: Tensor
) -> Tensor:
    """The policy's last hidden states at ``positions`` only (``[N, H]``): the output layer and
    the softmax are most of a small model's cost when they run on every prompt token."""
    hidden = policy.base_model(
        input_ids=input_ids, attention_mask=attention_mask, use_cache=False
    ).last_hidden_state[:, :-1]  # [B, T-1, H]
    return hidden[positions]  # [N, H]


def _plain_head(policy: Any) -> bool:
    """Whether the policy's logits are exactly its output layer applied to the last hidden state
    (not so for models that scale or soft-cap logits)."""
    config = policy.config
    scaled = getattr(config, "final_logit_softcapping", None) or getattr(
        config, "logit_scale", None
    )
    return (
        not scaled and policy.get_output_embeddings() is not None and hasattr(policy, "base_model")
    )


class ValueModel(nn.Module):
    """A transformer backbone with a scalar head: ``V(s_t)`` for every position.

    ``from_policy`` builds it from the policy's config and copies the policy's backbone weights
    (the usual critic initialisation); the head starts at zero, so initial values are 0.
    """

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_policy(cls, policy: Any) -> ValueModel:
        from transformers import AutoModel

        backbone = AutoModel.from_config(policy.config)
        backbone.load_state_dict(policy.base_model.state_dict())
        backbone.to(dtype=next(policy.parameters()).dtype)
        return cls(backbone, policy.config.hidden_size)

    def forward(
        self,
        input_ids: Tensor,  # [B, T]
        attention_mask: Tensor,  # [B, T]
        loss_mask: Tensor | None = None,  # [B, T]: only these tokens' values are needed
    ) -> Tensor:  # [B, T]
        """``V(s_t)`` for every token, or, with ``loss_mask``, for its tokens only (0 elsewhere;
        rows sharing a prompt run it once, as ``PolicyModule`` does)."""
        if loss_mask is None:
            out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            hidden = out.last_hidden_state[:, :-1]  # [B, T-1, H]: the state before token t
            return shift(self.head(hidden).squeeze(-1).float())
        positions = loss_mask[:, 1:].bool()  # [B, T-1]
        selected = None
        shared = find_shared_prefixes(input_ids, attention_mask, loss_mask)
        if shared is not None:
            selected = shared_prefix_hidden(
                self.backbone, input_ids, attention_mask, shared, positions
            )
        if selected is None:
            out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            selected = out.last_hidden_state[:, :-1][positions]  # [N, H]
        values = self.head(selected).squeeze(-1).float()
        full = values.new_zeros(positions.shape)
        full[positions] = values
        return shift(full)


class PolicyModule(nn.Module):
    """``policy`` (a transformers causal LM) and an optional ``value`` model as one module, so
    a backend wraps, shards and checkpoints them together under one optimizer.

    With ``share_prefixes`` (and a ``loss_mask``), rows that start with the same prompt, such as
    a GRPO group, run it once (``agentgym.trainers.prefix_sharing``): same results to float
    rounding, about half the compute when prompts are as long as completions. It turns itself
    off for models whose KV cache does not keep every key (sliding-window layers), and in
    gradient passes of a policy with gradient checkpointing on (its layers then keep no cache).

    ``logits_chunk``: with a ``loss_mask``, the output layer, log-softmax and entropy run this
    many positions at a time, each chunk recomputed in the backward pass, so the full
    ``[tokens × vocab]`` logits never exist (``agentgym.trainers.chunked_head``; None: the
    automatic rule there, 0: one pass).
    """

    def __init__(
        self,
        policy: Any,
        value: ValueModel | None = None,
        *,
        share_prefixes: bool = True,
        logits_chunk: int | None = None,
    ) -> None:
        super().__init__()
        self.policy: Any = policy  # a transformers PreTrainedModel (save_pretrained, config)
        self.value = value
        self.share_prefixes = share_prefixes
        self.logits_chunk = logits_chunk
        self.checkpointing = False

    def enable_gradient_checkpointing(self) -> None:
        """Recompute each decoder layer's activations in the backward pass (transformers'
        ``gradient_checkpointing_enable``, non-reentrant) in the policy and the value model:
        activation memory of one layer instead of all, for about one more forward pass."""
        models: list[Any] = [self.policy] + ([] if self.value is None else [self.value.backbone])
        for model in models:
            if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x
                model.activation_checkpointing_enable({"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable({"use_reentrant": False})
        self.train()  # transformers checkpoints only in training mode
        self.checkpointing = True

    def forward(
        self,
        input_ids: Tensor,  # [B, T]
        attention_mask: Tensor,  # [B, T]
        temperature: float = 1.0,
        with_entropy: bool = True,
        loss_mask: Tensor | None = None,  # [B, T]: only these tokens' logprobs are needed
        allowed: Tensor | None = None,  # [B, T, K]: constrained tokens' allowed ids
        entropy_grad: bool = False,
    ) -> PolicyOutput:
        scoring: dict[str, Any] = {
            "with_entropy": with_entropy,
            "allowed": allowed,
            "entropy_grad": entropy_grad,
        }
        if loss_mask is not None and _plain_head(self.policy):
            positions = loss_mask[:, 1:].bool()  # [B, T-1]
            hidden = self._shared_hidden(input_ids, attention_mask, loss_mask, positions)
            if hidden is None:
                hidden = _selected_hidden(self.policy, input_ids, attention_mask, positions)
            logprobs, entropy = self._head_logprobs(
                hidden, input_ids, positions, temperature, **scoring
            )
        else:
            logits = self.policy(
                input_ids=input_ids, attention_mask=attention_mask, use_cache=False
            ).logits  # [B, T, V]
            logprobs, entropy = token_logprobs(logits, input_ids, temperature, **scoring)
        values = None if self.value is None else self.value(input_ids, attention_mask, loss_mask)
        return PolicyOutput(logprobs, entropy, values)

    def _head_logprobs(
        self,
        hidden: Tensor,  # [N, H] at ``positions``
        input_ids: Tensor,  # [B, T]
        positions: Tensor,  # [B, T-1] bool
        temperature: float,
        *,
        with_entropy: bool,
        allowed: Tensor | None,
        entropy_grad: bool,
    ) -> tuple[Tensor, Tensor | None]:  # [B, T], [B, T] | None
        head = self.policy.get_output_embeddings()
        chunk = chunk_size(self.logits_chunk, head.weight.shape[0], hidden.shape[0])
        chosen, entropy = head_logprobs(
            hidden,
            head,
            input_ids[:, 1:][positions],
            temperature,
            allowed=None if allowed is None else allowed[:, 1:][positions],
            with_entropy=with_entropy,
            chunk=chunk,
        )
        return place(chosen, entropy, positions, with_entropy, entropy_grad)

    def _shared_hidden(
        self, input_ids: Tensor, attention_mask: Tensor, loss_mask: Tensor, positions: Tensor
    ) -> Tensor | None:  # [N, H] at ``positions``, or None: no prompt worth sharing
        if not self.share_prefixes:
            return None
        if torch.is_grad_enabled() and self.checkpointing:
            return None  # checkpointed layers drop the prefix's cache
        shared = find_shared_prefixes(input_ids, attention_mask, loss_mask)
        if shared is None:
            return None
        base = self.policy.base_model
        hidden = shared_prefix_hidden(base, input_ids, attention_mask, shared, positions)
        if hidden is None:  # this model's cache cannot be shared: stop trying
            self.share_prefixes = False
        return hidden
