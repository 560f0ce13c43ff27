"""The sampling distribution, as pure torch functions shared by the engine and by trainers.

``sampling_logprobs`` is the exact distribution ``HFEngine`` draws from, so a trainer that
recomputes "old" log-probabilities with a teacher-forced forward pass and this function gets the
engine's numbers (to float rounding)::

    logits = model(input_ids).logits[0, prompt_len - 1 : -1]      # [T, V]
    logp = sampling_logprobs(logits, temperature=0.7, top_p=0.9)   # [T, V]
    token_logp = logp.gather(-1, completion_ids[:, None])[:, 0]    # [T]

Order of operations (as in transformers and vLLM): divide by the temperature, keep the top-k
tokens, then keep the smallest most-likely set whose probability reaches top_p (a token is kept
when the mass of the tokens ranked above it is below top_p), renormalise.

With ``SamplingParams.choices`` the engine first sets the logits of every token outside
``choice_next_tokens(choices, completion_ids[:t])`` to -inf at step ``t``; a trainer rebuilds
the same mask from the same choices before calling ``sampling_logprobs``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["choice_next_tokens", "sample_rows", "sampling_logprobs"]


def choice_next_tokens(choices: Sequence[Sequence[int]], prefix: Sequence[int]) -> list[int]:
    """The token ids that may follow ``prefix`` under choice-constrained decoding.

    Sorted distinct ``c[len(prefix)]`` over every choice ``c`` that starts with ``prefix`` and is
    longer than it; ``[]`` when no choice continues ``prefix`` (it is a complete choice, or on
    no choice's path). A pure function of its arguments, so the engine that samples and a trainer
    that recomputes log-probabilities build the same masks.
    """
    n = len(prefix)
    head = tuple(prefix)
    return sorted({int(c[n]) for c in choices if len(c) > n and tuple(c[:n]) == head})


def sampling_logprobs(
    logits: torch.Tensor,
    temperature: float | torch.Tensor = 1.0,
    top_k: int | torch.Tensor = 0,
    top_p: float | torch.Tensor = 1.0,
) -> torch.Tensor:
    """Log-probabilities ``[..., V]`` of the sampling distribution over the last dimension.

    Each parameter is a number or a tensor broadcastable to ``logits.shape[:-1]`` (per-row
    settings). Temperature 0 (greedy) is reported as temperature 1 without filtering. Filtered-out
    tokens get ``-inf``. Computed in float32.
    """
    logits = logits.float()
    if _unfiltered(temperature, top_k, top_p):  # one setting for every row, no filter
        divisor = float(temperature) or 1.0  # type: ignore[arg-type]
        return torch.log_softmax(logits if divisor == 1 else logits / divisor, dim=-1)
    lead = logits.shape[:-1]
    vocab = logits.shape[-1]
    temp = torch.as_tensor(temperature, dtype=torch.float32, device=logits.device).expand(lead)
    greedy = temp == 0
    scaled = logits / torch.where(greedy, torch.ones_like(temp), temp).unsqueeze(-1)
    k = torch.as_tensor(top_k, dtype=torch.long, device=logits.device).expand(lead)
    p = torch.as_tensor(top_p, dtype=torch.float32, device=logits.device).expand(lead)
    k = torch.where((k <= 0) | greedy, torch.full_like(k, vocab), k.clamp(max=vocab))
    p = torch.where(greedy, torch.ones_like(p), p)
    if bool((k < vocab).any()) or bool((p < 1).any()):
        scaled = _filter(scaled, k, p)
    return torch.log_softmax(scaled, dim=-1)


def _unfiltered(temperature: object, top_k: object, top_p: object) -> bool:
    """Whether the settings are plain numbers that filter nothing (the common case, and the
    cheap one: no per-row tensors)."""
    numbers = (int, float)
    return (
        isinstance(temperature, numbers)
        and isinstance(top_k, numbers)
        and isinstance(top_p, numbers)
        and top_k <= 0
        and top_p >= 1
    )


def _filter(scaled: torch.Tensor, k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """``scaled`` with every token outside the top-k / top-p set set to -inf."""
    ordered, order = scaled.sort(dim=-1, descending=True)  # [..., V]
    ranks = torch.arange(scaled.shape[-1], device=scaled.device)
    drop = ranks >= k.unsqueeze(-1)
    ordered = ordered.masked_fill(drop, float("-inf"))
    probs = torch.softmax(ordered, dim=-1)
    mass_above = probs.cumsum(dim=-1) - probs
    drop = drop | (mass_above >= p.unsqueeze(-1))
    drop[..., 0] = False  # the most likely token always stays
    return scaled.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))


def sample_rows(
    logprobs: torch.Tensor,
    greedy: list[bool],
    generators: list[torch.Generator | None],
) -> torch.Tensor:
    """One token id per row of ``logprobs`` ``[B, V]``: argmax for greedy rows, else a draw from
    ``exp(logprobs)`` with that row's own generator (so a request's tokens do not depend on which
    other requests share its batch).

    A draw inverts the row's cumulative distribution at one uniform number: exact, one random
    number per row instead of one per vocabulary entry, and one vectorised search for the batch.
    The probabilities are ``exp(logprobs)`` in the logprobs' precision, summed in float64, so the
    draw follows exactly the probabilities the logprobs state (to their own rounding) and
    summation rounding moves a draw across a token boundary with probability ~1e-16 per token.
    """
    drawn = [row for row, is_greedy in enumerate(greedy) if not is_greedy]
    if not drawn:
        return logprobs.argmax(dim=-1)
    # u in (0, 1]: the first token whose cumulative mass reaches u * total has positive mass.
    draws = [torch.rand(1, generator=generators[row], dtype=torch.float64) for row in drawn]
    u = 1 - torch.cat(draws)
    every = len(drawn) == len(greedy)
    rows = logprobs if every else logprobs[drawn]
    # a float64 exp costs several times the float32 one, for accuracy the logprobs do not have
    cdf = torch.cumsum(rows.exp(), dim=-1, dtype=torch.float64)  # [R, V]
    target = (u.to(cdf.device) * cdf[:, -1]).unsqueeze(-1)  # [R, 1]
    picked = torch.searchsorted(cdf, target)[:, 0].clamp(max=cdf.shape[-1] - 1)
    if every:
        return picked
    tokens = logprobs.argmax(dim=-1)
    tokens[drawn] = picked
    return tokens
