"""The engine seam: ``SamplingParams`` in, ``Completion`` out, behind ``InferenceEngine``.

Engines are token-in, token-out: a prompt is a list of token ids (the collector renders the chat
template once and appends sampled ids exactly as sampled), and a completion carries the sampled
ids with their log-probabilities. What a log-probability means differs between servers, so each
completion says which kind it carries (``logprob_mode``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal, Protocol, runtime_checkable

from agentgym.core.errors import ConfigError, Error
from agentgym.core.types import Message

__all__ = [
    "Completion",
    "EngineClosedError",
    "FinishReason",
    "InferenceEngine",
    "LogprobMode",
    "SamplingParams",
]

FinishReason = Literal["stop", "length", "abort"]

LogprobMode = Literal["sampling", "temperature", "raw", "none"]
"""What ``Completion.logprobs`` are the log of.

``"sampling"``: the distribution the token was drawn from: ``softmax(logits / temperature)``
restricted to the top-k / top-p set and renormalised (``agentgym.inference.sampling_logprobs``).
``"temperature"``: ``log_softmax(logits / temperature)`` before top-k / top-p filtering (SGLang's
default); equal to ``"sampling"`` when neither filter is on. ``"raw"``: ``log_softmax(logits)``
(vLLM's default). ``"none"``: the server returned none (``logprobs`` are zeros).
"""


class EngineClosedError(Error, RuntimeError):
    """``generate`` or ``update_weights`` was called on an engine after ``close()``."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion. Validated at construction.

    Greedy decoding is ``temperature=0``; its reported log-probabilities are then those of the
    unscaled, unfiltered distribution (``log_softmax(logits)``), because the greedy "distribution"
    is a point mass whose log-probability is always 0.
    """

    temperature: float = 1.0
    """Softmax temperature, >= 0; 0 means greedy (argmax)."""
    top_p: float = 1.0
    """Nucleus sampling: keep the smallest set of most likely tokens whose mass reaches top_p."""
    top_k: int = 0
    """Keep only the k most likely tokens; 0 or -1 turns the filter off."""
    max_tokens: int = 256
    """Most tokens to sample; the completion ends with finish_reason "length" there."""
    stop: tuple[str, ...] = ()
    """Strings that end the completion once the decoded text contains one."""
    stop_token_ids: tuple[int, ...] = ()
    """Token ids that end the completion (besides the tokenizer's EOS)."""
    seed: int | None = None
    """Seeds this request's own random generator: same seed, same prompt, same tokens."""
    ignore_eos: bool = False
    """Keep sampling past EOS (benchmarks); ``stop_token_ids`` still apply."""
    choices: tuple[tuple[int, ...], ...] = ()
    """Constrained decoding: the completion is exactly one of these token-id sequences.

    At each step the tokens that continue no choice (``choice_next_tokens``) get -inf logits
    before temperature / top-k / top-p, and the reported logprobs are those of the resulting
    renormalised distribution; a token that is the only one allowed is still emitted, with
    logprob 0.0. The completion ends ("stop", ``Completion.stop`` = its last id) when it equals
    a choice, and only then: stop strings, stop ids and EOS inside a choice do not cut it short.
    End a choice with the EOS / end-of-turn id if the turn should end there. Applied by
    ``HFEngine`` only; empty = unconstrained."""

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        object.__setattr__(self, "choices", _as_choices(self.choices))
        _check(
            self.temperature >= 0 and math.isfinite(self.temperature),
            "temperature",
            self.temperature,
            "must be a finite number >= 0",
            "use 0 for greedy, 1.0 to sample",
        )
        _check(
            0 < self.top_p <= 1, "top_p", self.top_p, "must be in (0, 1]", "use 1.0 to turn it off"
        )
        _check(
            self.top_k >= -1,
            "top_k",
            self.top_k,
            "must be >= 1, or 0 / -1 for off",
            "use 0 to turn it off",
        )
        _check(
            self.max_tokens >= 1,
            "max_tokens",
            self.max_tokens,
            "must be >= 1",
            "ask for at least one token",
        )
        _check(
            all(isinstance(s, str) and s for s in self.stop),
            "stop",
            self.stop,
            "must be non-empty strings",
            "drop empty stop strings",
        )
        _check(
            all(t >= 0 for t in self.stop_token_ids),
            "stop_token_ids",
            self.stop_token_ids,
            "must be token ids >= 0",
            "pass ids from the tokenizer",
        )
        if self.choices:
            self._check_choices()

    def _check_choices(self) -> None:
        for choice in self.choices:
            _check(bool(choice), "choices", choice, "must be non-empty", "drop the empty choice")
            _check(
                all(t >= 0 for t in choice),
                "choices",
                choice,
                "must be token ids >= 0",
                "pass ids from the tokenizer",
            )
        # Sorted, a choice that is a prefix of others (or equal to one) comes right before one.
        ordered = sorted(self.choices)
        for first, second in pairwise(ordered):
            _check(first != second, "choices", first, "appears twice", "list each choice once")
            _check(
                second[: len(first)] != first,
                "choices",
                (first, second),
                "must be prefix-free (no choice is a proper prefix of another)",
                "end each choice with the EOS id",
            )
        longest = max(len(choice) for choice in self.choices)
        _check(
            self.max_tokens >= longest,
            "max_tokens",
            self.max_tokens,
            f"must be >= the longest choice ({longest} tokens)",
            f"raise max_tokens to {longest}",
        )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def filtered(self) -> bool:
        """Whether top-k or top-p restricts the distribution."""
        return self.top_k > 0 or self.top_p < 1


def _check(ok: bool, name: str, value: object, rule: str, fix: str) -> None:
    if not ok:
        raise ConfigError(name, value, rule, fix)


def _as_choices(choices: Any) -> tuple[tuple[int, ...], ...]:
    """``choices`` as a tuple of tuples of ints (lists and numpy / torch ints accepted)."""
    try:
        return tuple(tuple(int(t) for t in choice) for choice in choices)
    except (TypeError, ValueError):
        raise ConfigError(
            "choices",
            choices,
            "must be a sequence of token-id sequences",
            "pass e.g. [[12, 7, eos_id], [12, 9, eos_id]]",
        ) from None


def reject_choices(sampling: SamplingParams, engine: str) -> None:
    """Raise ``ConfigError`` for an engine that cannot constrain decoding to ``choices``."""
    if sampling.choices:
        raise ConfigError(
            "choices",
            sampling.choices,
            f"are applied by HFEngine only, not {engine}",
            "collect with HFEngine, or leave choices empty",
        )


@dataclass
class Completion:
    """One sampled completion.

    ``token_ids`` are exactly the sampled ids, including the EOS or stop token that ended the
    completion; ``logprobs[i]`` is the log-probability of ``token_ids[i]`` (see ``logprob_mode``).
    ``text`` is the decoded completion without special tokens, cut before a matched stop string.
    """

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    text: str | None = None
    logprob_mode: LogprobMode = "sampling"
    trainable: bool = True
    """False when the tokens did not come from the engine token-for-token (a chat-completions
    fallback that re-tokenized text): a trainer must not learn from them."""
    stop: str | int | None = None
    """The stop string or stop token id that ended the completion, if any."""
    weight_version: int | None = None
    """The engine's weight version that produced it (bumped by each ``update_weights``)."""
    message: Message | None = None
    """The assistant message, for engines that answer in chat messages (tool calls parsed)."""
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class InferenceEngine(Protocol):
    """Anything that samples completions for token-id prompts."""

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        """Sample one completion of ``prompt_token_ids``. Many calls may run concurrently."""
        ...

    async def update_weights(self, weights: Any) -> None:
        """Replace the policy's weights (a state dict, or a checkpoint path for servers)."""
        ...

    async def close(self) -> None:
        """Release the engine's resources; pending requests end with finish_reason "abort"."""
        ...
