"""One episode in the making: its token sequence, turns, timings, and the ``Episode`` it becomes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import Error
from agentgym.core.info import (
    ERROR,
    ERROR_KIND,
    INFRA_ERROR,
    TRUNCATION_REASON,
    is_infra_error,
)
from agentgym.core.types import Episode, Message, Observation, Turn, assistant
from agentgym.inference.base import Completion
from agentgym.inference.routing import EpisodeRoute
from agentgym.inference.sampling import choice_next_tokens

__all__ = ["EpisodeBuilder"]


@dataclass
class EpisodeBuilder:
    """Accumulates one episode of one sub-env.

    ``token_ids``/``loss_mask``/``logprobs`` stay aligned: ``append_prompt`` adds ids with mask 0
    and logprob 0.0, ``append_completion`` adds the sampled ids exactly as the engine returned
    them, with mask 1 and their sampling logprobs.
    """

    env_id: str | None
    index: int
    """The sub-env it runs in."""
    group: int
    """Which of the collect call's groups it belongs to (members share a task)."""
    seed: int | None
    """The reset seed of its task."""
    episode: Episode = field(init=False)
    tools: list[dict[str, Any]] | None = None
    """The tool schemas of ``reset_info["tools"]`` (rendered into the prompt)."""
    turn_started: int = 0
    """``len(messages)`` before the assistant turn now in progress."""
    context_start: int = 0
    """Where the context the next generation sees begins in ``token_ids``."""
    system: list[Message] = field(default_factory=list)
    """The reset's leading system messages (a history window always keeps them)."""
    observations: list[Observation] = field(default_factory=list)
    """What the env said before each turn, without ``system`` (history windows only)."""
    exchanges: list[list[int]] = field(default_factory=list)
    """Per finished turn, its sampled ids and the env delta after them (windows of >= 1)."""
    llm_time: float = 0.0
    env_time: float = 0.0
    route: EpisodeRoute = field(default_factory=EpisodeRoute)
    """Its place on one of several inference servers (``agentgym.inference.routing``)."""

    def __post_init__(self) -> None:
        self.episode = Episode(self.env_id, group=self.group, seed=self.seed)

    # --- building ------------------------------------------------------------------------------

    def start(self, observation: Observation, info: dict[str, Any]) -> None:
        """Record the reset: its messages and info."""
        self.episode.messages.extend(observation)
        self.episode.reset_info = info
        lead = 0
        while lead < len(observation) and observation[lead].get("role") == "system":
            lead += 1
        self.system = list(observation[:lead])
        self.observations = [tuple(observation[lead:])]
        tools = info.get("tools")
        self.tools = list(tools) if tools else None

    def start_context(self, ids: list[int]) -> None:
        """Begin a new context (a history window) with prompt ``ids``."""
        self.context_start = len(self.episode.token_ids)
        self.episode.context_starts.append(self.context_start)
        self.append_prompt(ids)

    def window_prompt(self, history_turns: int, head: list[int]) -> list[int]:
        """The prompt of the next turn under a window of ``history_turns``: ``head`` (the system
        messages and the observation the window starts at, rendered as a first prompt), then
        the sampled ids and env deltas of the turns since, as they were."""
        first = max(0, self.num_turns - history_turns)
        return head + [i for ids in self.exchanges[first:] for i in ids]

    @property
    def context_tokens(self) -> int:
        """Tokens of the context the next generation sees, so far."""
        return len(self.episode.token_ids) - self.context_start

    def append_prompt(self, ids: list[int]) -> None:
        episode = self.episode
        episode.token_ids.extend(ids)
        episode.loss_mask.extend([0] * len(ids))
        episode.logprobs.extend([0.0] * len(ids))

    def append_completion(
        self,
        completion: Completion,
        action_text: str,
        choices: tuple[tuple[int, ...], ...] | None = None,
    ) -> Message:
        """Append the sampled ids and the assistant message; returns that message.

        ``choices``: the turn was sampled under constrained decoding among these token-id
        sequences (``()``: freely, in an episode whose other turns may be constrained); a token
        that was the only one allowed gets ``loss_mask`` 0 (it was forced, not sampled).
        ``None``: the episode is not constrained."""
        ids, logprobs = completion.token_ids, completion.logprobs
        if completion.finish_reason == "abort" or not ids or len(logprobs) != len(ids):
            raise Error(
                f"the engine returned a completion with {len(ids)} token ids, {len(logprobs)} "
                f"logprobs and finish_reason {completion.finish_reason!r} for env {self.index} "
                f"(turn {len(self.episode.turns) + 1}); the collector needs a finished "
                "completion with >= 1 token and one logprob per token. Fix: keep the engine "
                "open while collecting, and check its server"
            )
        episode = self.episode
        start = len(episode.token_ids)
        episode.token_ids.extend(int(t) for t in ids)
        episode.loss_mask.extend(_sampled(ids, choices))
        episode.logprobs.extend(float(x) for x in logprobs)
        episode.turn_spans.append((start, len(episode.token_ids)))
        episode.weight_versions.append(completion.weight_version)
        if choices is not None:
            episode.turn_choices.append(choices)
        if not completion.trainable:
            episode.trainable = False
        self.turn_started = len(episode.messages)
        message = assistant(action_text)
        episode.messages.append(message)
        return message

    def add_turn(self, turn: Turn, shown: Observation | None = None) -> None:
        """Record the env's answer to the assistant turn in progress; ``shown``: the messages
        the model sees of it (the scaffold's; default ``turn.observation``)."""
        self.episode.turns.append(turn)
        self.episode.messages.extend(turn.observation if shown is None else shown)
        if is_infra_error(turn.info):
            self.episode.trainable = False

    def truncate(self, reason: str) -> None:
        """End the episode here: the last turn becomes truncated with ``reason``."""
        if not self.episode.turns:
            # Nothing was generated (the first prompt did not fit): nothing to learn from.
            self.episode.trainable = False
            self.episode.reset_info = {**self.episode.reset_info, TRUNCATION_REASON: reason}
            return
        last = self.episode.turns[-1]
        last.truncated = True
        last.info = {**last.info, TRUNCATION_REASON: reason}

    def lose(self, cause: str) -> None:
        """End the episode here as an infrastructure failure (outcome ``infra``: dropped, with
        ``cause``): the engine could not generate its next turn (its server stopped answering)."""
        failed = {INFRA_ERROR: True, ERROR: cause, ERROR_KIND: "infra"}
        self.episode.trainable = False
        if not self.episode.turns:
            self.episode.reset_info = {**self.episode.reset_info, **failed}
            return
        last = self.episode.turns[-1]
        last.truncated = True
        last.info = {**last.info, **failed, TRUNCATION_REASON: "infra_error"}

    @property
    def num_tokens(self) -> int:
        return len(self.episode.token_ids)

    @property
    def num_turns(self) -> int:
        return len(self.episode.turns)

    # --- finishing -----------------------------------------------------------------------------

    def finish(self) -> Episode:
        """The episode, with its metrics."""
        episode = self.episode
        if episode.infra_error:
            episode.trainable = False
        sampled = sum(episode.loss_mask)
        metrics = {
            "turns": float(len(episode.turns)),
            "prompt_tokens": float(len(episode.token_ids) - sampled),
            "sampled_tokens": float(sampled),
            "total_tokens": float(len(episode.token_ids)),
            "llm_time": self.llm_time,
            "env_time": self.env_time,
            "return": episode.total_reward,
            "env_index": float(self.index),  # a group's members: consecutive sub-envs
        }
        if episode.success is not None:
            metrics["success"] = float(episode.success)
        episode.metrics = metrics
        return episode


def _sampled(ids: list[int], choices: tuple[tuple[int, ...], ...] | None) -> list[int]:
    """The loss mask of a completion: 1 on each token that was drawn from a distribution, 0 on
    a token that constrained decoding forced (the only continuation of the choices)."""
    if not choices:
        return [1] * len(ids)
    return [int(len(choice_next_tokens(choices, ids[:k])) > 1) for k in range(len(ids))]
