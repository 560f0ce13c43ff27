"""Games of a ``MultiAgentEnv`` with a policy per role → one token-exact ``Episode`` per role.

Each role keeps its own conversation: the messages the env addressed to it and its own turns.
A role played by an ``EnginePolicy`` is recorded as the single-agent collector records an
episode (:mod:`agentgym.rollout`, whose ``ChatRenderer`` and ``EpisodeBuilder`` it reuses):
its first prompt is rendered once, its sampled ids are appended as sampled (``loss_mask`` 1,
their sampling ``logprobs``), and only what the env says to it between its turns is
tokenized, as an env delta. A role's turn ``k`` is completed when the role is selected again
(or at its dead step): the messages it got since, and the reward it got since
(``last()``'s cumulative reward), are that turn's observation and reward, so a role's return
is everything the env gave it. A scripted role's episode has its messages and rewards but no
tokens (``trainable`` False), as has a role whose game ended before its first turn.

Every game runs as a task on the caller's event loop; games of a call run concurrently (up to
``concurrency``), so an engine that batches concurrent requests (``HFEngine``) serves many
games' turns at once. Game ``i`` of a call belongs to group ``i // group_size`` and resets
with seed ``seed + group``; its scripted players' random generators and its engine requests'
sampling seeds derive from ``(sampling_seed, group, member, role)``, so a call is a function
of its seeds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError
from agentgym.core.info import ACTION_CHOICES
from agentgym.core.multiagent import MultiAgentEnv
from agentgym.core.types import Episode, Observation, Turn, assistant, system
from agentgym.inference.base import Completion, SamplingParams
from agentgym.multiagent.policies import EnginePolicy, Policy, ScriptedPolicy, resolve_policies
from agentgym.rollout.config import default_context, resolve_tokenizer
from agentgym.rollout.episode import EpisodeBuilder
from agentgym.rollout.render import ChatRenderer

__all__ = ["ROLE", "GamePlan", "aplay_games", "play_games", "role_episodes"]

ROLE = "role"
"""``Episode.reset_info[ROLE]``: the role the episode was played in."""

MAX_STEPS = 256
"""Steps of one game after which the rollout truncates it (a safety net for envs that never
end; ``GamePlan.max_steps``)."""


@dataclass(frozen=True)
class GamePlan:
    """How games are played: sampling, context limits, constrained decoding, seeds."""

    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_context_tokens: int | None = None
    action_choices: bool = False
    sampling_seed: int | None = None
    max_steps: int = MAX_STEPS


@dataclass
class _Seat:
    """One role in one game: its policy and the episode it is building."""

    role: str
    index: int
    policy: Policy
    builder: EpisodeBuilder
    renderer: ChatRenderer | None
    rng: np.random.Generator
    completion: Completion | None = None
    pending: bool = False
    """It acted and the env's answer is not recorded yet."""

    def observe(self, observation: Observation, reward: float, done: tuple[bool, bool],
                info: dict[str, Any]) -> None:  # fmt: skip
        builder = self.builder
        if not builder.episode.messages:
            lead = self.policy.system if isinstance(self.policy, EnginePolicy) else None
            builder.start((*([system(lead)] if lead else []), *observation), info)
            return
        action = builder.episode.messages[builder.turn_started]
        builder.add_turn(Turn(action, observation, reward, done[0], done[1], dict(info)))
        self.pending = False

    def close_truncated(self, reason: str) -> None:
        if self.pending:
            action = self.builder.episode.messages[self.builder.turn_started]
            self.builder.add_turn(Turn(action, (), 0.0, False, True, {}))
            self.pending = False
        self.builder.truncate(reason)


class _Game:
    """Plays one game; see the module docstring."""

    def __init__(
        self,
        env: MultiAgentEnv,
        policies: Mapping[str, Policy],
        plan: GamePlan,
        renderers: Mapping[int, ChatRenderer],
        where: tuple[int, int, int],
    ) -> None:
        self.env, self.plan = env, plan
        self.group, self.member, self.seed = where
        env_id = env.spec.id if env.spec is not None else None
        self.seats: dict[str, _Seat] = {}
        for index, role in enumerate(env.possible_agents):
            policy = policies[role]
            key = [plan.sampling_seed or 0, self.group, self.member, index]
            self.seats[role] = _Seat(
                role,
                index,
                policy,
                EpisodeBuilder(env_id, self.member, self.group, self.seed),
                renderers.get(id(policy)),
                np.random.default_rng(key),
            )

    async def play(self) -> dict[str, Episode]:
        env, steps = self.env, 0
        await env.areset(seed=self.seed)
        for agent in env.agent_iter():
            seat = self.seats[agent]
            observation, reward, terminated, truncated, info = env.last()
            seat.observe(observation, reward, (terminated, truncated), info)
            if terminated or truncated:
                await env.astep(None)
                continue
            steps += 1
            over = steps > self.plan.max_steps
            text = None if over else await self._act(seat, observation, info)
            if text is None:
                self._truncate_all("max_turns" if over else "context_length")
                break
            await env.astep(text)
        return {role: self._finish(seat) for role, seat in self.seats.items()}

    def _truncate_all(self, reason: str) -> None:
        for seat in self.seats.values():
            seat.close_truncated(reason)

    def _finish(self, seat: _Seat) -> Episode:
        episode = seat.builder.finish()
        episode.reset_info = {**episode.reset_info, ROLE: seat.role}
        episode.metrics["role_index"] = float(seat.index)
        if seat.renderer is None or not episode.turns:  # scripted, or never moved: no tokens
            episode.trainable = False
        return episode

    async def _act(
        self, seat: _Seat, observation: Observation, info: dict[str, Any]
    ) -> str | None:
        builder = seat.builder
        seat.pending = True
        if isinstance(seat.policy, ScriptedPolicy):
            text = seat.policy.player(observation, info, seat.rng)
            builder.turn_started = len(builder.episode.messages)
            builder.episode.messages.append(assistant(text))
            return text
        return await self._generate(seat, info)

    async def _generate(self, seat: _Seat, info: dict[str, Any]) -> str | None:
        builder, renderer = seat.builder, seat.renderer
        assert renderer is not None
        assert isinstance(seat.policy, EnginePolicy)
        messages = builder.episode.messages
        if seat.completion is None:
            ids = renderer.prompt_ids(messages, builder.tools)
        else:
            observation = messages[builder.turn_started + 1 :]
            conversation = messages[: builder.turn_started]
            ids = renderer.delta_ids(conversation, observation, builder.tools, seat.completion)
        choices = self._choices(renderer, info)
        max_tokens = self.plan.sampling.max_tokens
        limit = self.plan.max_context_tokens
        if limit is not None:
            room = limit - builder.num_tokens - len(ids)
            if room < max([1, *map(len, choices)]):
                seat.pending = False
                return None
            max_tokens = min(max_tokens, room)
        if choices:
            max_tokens = max(max_tokens, *map(len, choices))
        builder.append_prompt(ids)
        sampling = dataclasses.replace(
            self.plan.sampling, max_tokens=max_tokens, seed=self._seed(seat), choices=choices
        )
        start = time.perf_counter()
        completion = await seat.policy.engine.generate(list(builder.episode.token_ids), sampling)
        builder.llm_time += time.perf_counter() - start
        text = completion.text
        if text is None:
            tokenizer = renderer.tokenizer
            text = str(tokenizer.decode(completion.token_ids, skip_special_tokens=True))
        builder.append_completion(completion, text, choices if self.plan.action_choices else None)
        seat.completion = completion
        return text

    def _choices(
        self, renderer: ChatRenderer, info: Mapping[str, Any]
    ) -> tuple[tuple[int, ...], ...]:
        texts = info.get(ACTION_CHOICES) if self.plan.action_choices else None
        if not texts:
            return ()
        return tuple(tuple(renderer.reply_ids(str(t))) for t in dict.fromkeys(texts))

    def _seed(self, seat: _Seat) -> int | None:
        base = self.plan.sampling_seed
        if base is None:
            return None
        key = [base, self.group, self.member, seat.index, seat.builder.num_turns]
        return int(np.random.SeedSequence(key).generate_state(1)[0])


def _renderers(policies: Mapping[str, Policy]) -> dict[int, ChatRenderer]:
    by_tokenizer: dict[int, ChatRenderer] = {}
    out: dict[int, ChatRenderer] = {}
    for policy in policies.values():
        if isinstance(policy, EnginePolicy):
            tokenizer = resolve_tokenizer(policy.engine, policy.tokenizer)
            renderer = by_tokenizer.setdefault(id(tokenizer), ChatRenderer(tokenizer))
            out[id(policy)] = renderer
    return out


def _context(policies: Mapping[str, Policy], given: int | None) -> int | None:
    if given is not None:
        return given
    limits = [
        default_context(p.engine, resolve_tokenizer(p.engine, p.tokenizer))
        for p in policies.values()
        if isinstance(p, EnginePolicy)
    ]
    known = [x for x in limits if x is not None]
    return min(known) if known else None


async def aplay_games(
    env: str,
    policies: Mapping[str, Any],
    num_games: int,
    seed: int = 0,
    *,
    group_size: int = 1,
    env_kwargs: Mapping[str, Any] | None = None,
    max_context_tokens: int | None = None,
    action_choices: bool = False,
    sampling_seed: int | None = None,
    concurrency: int = 64,
    max_steps: int = MAX_STEPS,
    **sampling: Any,
) -> list[dict[str, Episode]]:
    """Play ``num_games`` games of the multi-agent env ``env``; per game, role -> ``Episode``.

    Args:
        env: a multi-agent env id (each game makes its own env with ``env_kwargs``).
        policies: role -> ``EnginePolicy``, a scripted policy name of the env, or a callable;
            roles left out get the env's ``default_policies``.
        num_games: a multiple of ``group_size``.
        seed: games of group ``j`` reset with seed ``seed + j``.
        group_size: games per group (they share a reset seed and differ in sampling seeds).
        max_context_tokens: most tokens of a role's episode; default the smallest of the
            engines' models' context lengths. A turn that would not fit truncates the game.
        action_choices: constrained decoding among the env's ``info["action_choices"]`` (see
            ``agentgym.rollout.acollect``).
        sampling_seed: makes engine sampling and scripted players reproducible.
        concurrency: games in flight at once.
        max_steps: steps after which a game is truncated (``truncation_reason`` max_turns).
        **sampling: ``SamplingParams`` fields (``temperature``, ``max_tokens``, ...).
    """
    from agentgym.registry.multiagent import make

    if num_games < 1 or group_size < 1 or num_games % group_size:
        raise ConfigError(
            "num_games", num_games, f"is not a positive multiple of group_size={group_size}",
            "pass whole groups",
        )  # fmt: skip
    probe = make(env, **dict(env_kwargs or {}))
    resolved = resolve_policies(probe, policies)
    probe.close()
    plan = GamePlan(
        SamplingParams(**sampling),
        _context(resolved, max_context_tokens),
        action_choices,
        sampling_seed,
        max_steps,
    )
    renderers = _renderers(resolved)
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> dict[str, Episode]:
        async with gate:
            game_env = make(env, **dict(env_kwargs or {}))
            try:
                where = (i // group_size, i % group_size, seed + i // group_size)
                return await _Game(game_env, resolved, plan, renderers, where).play()
            finally:
                await game_env.aclose()

    return list(await asyncio.gather(*(one(i) for i in range(num_games))))


def play_games(*args: Any, **kwargs: Any) -> list[dict[str, Episode]]:
    """``aplay_games`` from synchronous code."""
    return run_sync(aplay_games(*args, **kwargs))


def role_episodes(
    games: Sequence[Mapping[str, Episode]], roles: Sequence[str], group_size: int
) -> list[Episode]:
    """The episodes of ``roles``, as groups a trainer takes: for each group of games, for each
    role, that role's ``group_size`` episodes (``Episode.group`` renumbered so that each
    (game group, role) is a group of its own)."""
    out: list[Episode] = []
    for start in range(0, len(games), group_size):
        block = games[start : start + group_size]
        for offset, role in enumerate(roles):
            for game in block:
                episode = game[role]
                episode.group = (start // group_size) * len(roles) + offset
                out.append(episode)
    return out
