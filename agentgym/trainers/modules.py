"""The module a backend trains: the causal-LM policy and, for PPO, a value model.

Positions follow ``Episode``: token ``t`` is predicted from the logits at ``t - 1``, so every
per-token output is ``[B, T]`` aligned with ``token_ids`` and 0 at position 0 (never sampled).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

__all__ = ["PolicyModule", "PolicyOutput", "ValueModel", "token_logprobs"]


class PolicyOutput(NamedTuple):
    logprobs: Tensor  # [B, T] log π(token_t | tokens_<t) at the temperature, differentiable
    entropy: Tensor | None  # [B, T] entropy of that distribution, no gradient
    values: Tensor | None  # [B, T] V(s_t), the value before token t is sampled


def _shift(x: Tensor) -> Tensor:  # [B, T-1] → [B, T], 0 at position 0
    return torch.cat([x.new_zeros(x.shape[0], 1), x], dim=1)


def token_logprobs(
    logits: Tensor,  # [B, T, V]
    token_ids: Tensor,  # [B, T]
    temperature: float,
    *,
    with_entropy: bool = True,
) -> tuple[Tensor, Tensor | None]:  # [B, T], [B, T] | None
    """``log softmax(logits / temperature)`` of each next token, and the entropy of that
    distribution: what the sampler drew from (before top-k / top-p)."""
    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)  # [B, T-1, V]
    picked = logp.gather(-1, token_ids[:, 1:, None]).squeeze(-1)  # [B, T-1]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = _shift(-(logp.exp() * logp).sum(-1))  # [B, T]
    return _shift(picked), entropy


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

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:  # [B, T]
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        hidden = out.last_hidden_state[:, :-1]  # [B, T-1, H]: the state before token t
        return _shift(self.head(hidden).squeeze(-1).float())


class PolicyModule(nn.Module):
    """``policy`` (a transformers causal LM) and an optional ``value`` model as one module, so
    a backend wraps, shards and checkpoints them together under one optimizer."""

    def __init__(self, policy: Any, value: ValueModel | None = None) -> None:
        super().__init__()
        self.policy: Any = policy  # a transformers PreTrainedModel (save_pretrained, config)
        self.value = value

    def forward(
        self,
        input_ids: Tensor,  # [B, T]
        attention_mask: Tensor,  # [B, T]
        temperature: float = 1.0,
        with_entropy: bool = True,
    ) -> PolicyOutput:
        logits = self.policy(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False
        ).logits  # [B, T, V]
        logprobs, entropy = token_logprobs(
            logits, input_ids, temperature, with_entropy=with_entropy
        )
        values = None if self.value is None else self.value(input_ids, attention_mask)
        return PolicyOutput(logprobs, entropy, values)
