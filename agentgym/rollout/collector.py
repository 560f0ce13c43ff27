"""The collector: a policy (engine + chat template) against an ``AgentVectorEnv``, ragged.

Every sub-env runs its own episode: as soon as its reset or step comes back, its next prompt goes
to the engine, and as soon as that completion comes back, the env steps. Nothing waits for the
other envs. A group of ``group_size`` envs starts a new task together (``submit_reset_group``)
once all of its members have finished their episodes.

Everything runs on the caller's event loop: engine calls are tasks, env calls are the vector
env's ragged work, and one loop here waits for whichever finishes first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator
from typing import Any

import numpy as np

from agentgym.core.errors import Error
from agentgym.core.info import ACTION_CHOICES
from agentgym.core.types import Episode, Observation, Turn
from agentgym.inference.base import Completion, InferenceEngine, SamplingParams
from agentgym.inference.routing import EpisodeLost, episode_route
from agentgym.rollout.config import RolloutPlan
from agentgym.rollout.episode import EpisodeBuilder
from agentgym.rollout.memory import EpisodeMemory
from agentgym.rollout.render import ChatRenderer
from agentgym.vector import AgentVectorEnv, Transition

__all__ = ["Collector"]


class Collector:
    """Runs ``plan.num_episodes`` episodes of ``venv`` with ``engine``; see the module docstring.

    One instance serves one collect call (``episodes()`` once).
    """

    def __init__(
        self,
        engine: InferenceEngine,
        venv: AgentVectorEnv,
        renderer: ChatRenderer,
        plan: RolloutPlan,
    ) -> None:
        self.engine = engine
        self.venv = venv
        self.renderer = renderer
        self.plan = plan
        self.env_id = venv.spec.id if venv.spec is not None else None
        self.builders: dict[int, EpisodeBuilder] = {}  # env index -> its running episode
        self.submitted: dict[int, float] = {}  # env index -> when its env call was submitted
        self.completions: dict[int, Completion] = {}  # env index -> its last completion
        self.running: dict[int, int] = {}  # group slot -> members still playing
        self.launched = 0  # groups started so far
        self.generating: dict[asyncio.Task[Completion], int] = {}  # engine call -> env index
        self.receiving: asyncio.Task[Transition] | None = None
        # env index -> the choices its turn in flight was sampled among
        self.choices: dict[int, tuple[tuple[int, ...], ...]] = {}
        self._choice_ids: dict[tuple[str, ...], tuple[tuple[int, ...], ...]] = {}  # texts -> ids

    async def episodes(self) -> AsyncGenerator[Episode, None]:
        """Each episode as it finishes. Exceptions from the engine propagate, with context."""
        slots = self.venv.num_envs // self.plan.group_size
        for slot in range(min(slots, self.plan.num_groups)):
            self._launch(slot)
        try:
            while self.builders:
                for task in await self._wait():
                    episode = self._handle(task)
                    if episode is not None:
                        yield episode
        finally:
            await self._cancel()

    # --- the loop ------------------------------------------------------------------------------

    async def _wait(self) -> set[asyncio.Task[Any]]:
        if self.receiving is None and self.venv.pending:
            self.receiving = asyncio.ensure_future(self.venv.arecv())
        waiting: set[asyncio.Task[Any]] = set(self.generating)
        if self.receiving is not None:
            waiting.add(self.receiving)
        if not waiting:  # a bug here, not in the env or the engine
            raise Error(f"collector stalled: envs {sorted(self.builders)} have nothing in flight")
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        return done

    def _handle(self, task: asyncio.Task[Any]) -> Episode | None:
        if task is self.receiving:
            self.receiving = None
            return self._on_transition(task.result())
        index = self.generating.pop(task)
        error = task.exception()
        if isinstance(error, EpisodeLost):  # its server is gone, others run: an infra episode
            builder = self.builders[index]
            self.choices.pop(index, None)
            builder.lose(str(error))
            return self._finish(builder)
        self._on_completion(index, task.result())  # any other engine failure raises here
        return None

    async def _cancel(self) -> None:
        tasks = [*self.generating, *([self.receiving] if self.receiving else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.generating.clear()
        self.receiving = None
        for builder in self.builders.values():
            builder.route.end()

    # --- groups --------------------------------------------------------------------------------

    def _launch(self, slot: int) -> None:
        """Start the next group of the plan on the envs of group slot ``slot``."""
        group, size = self.launched, self.plan.group_size
        self.launched += 1
        seed = self.plan.seed + group
        now = time.perf_counter()
        for index in range(slot * size, (slot + 1) * size):
            self.builders[index] = EpisodeBuilder(self.env_id, index, group, seed)
            self.submitted[index] = now
        self.running[slot] = size
        options = self.plan.task_options
        self.venv.submit_reset_group(slot, seed=seed, options=options and options[group])

    def _finish(self, builder: EpisodeBuilder) -> Episode:
        builder.route.end()
        del self.builders[builder.index]
        self.completions.pop(builder.index, None)
        slot = builder.index // self.plan.group_size
        self.running[slot] -= 1
        if self.running[slot] == 0 and self.launched < self.plan.num_groups:
            self._launch(slot)
        return builder.finish()

    # --- one env's episode ---------------------------------------------------------------------

    def _on_transition(self, transition: Transition) -> Episode | None:
        builder = self.builders[transition.index]
        builder.env_time += time.perf_counter() - self.submitted.pop(transition.index)
        if transition.kind == "reset":
            builder.start(self._shown(transition), transition.info)
            if transition.infra_error:
                return self._finish(builder)
            prompt = self.renderer.prompt_ids(builder.episode.messages, builder.tools)
            return self._next_turn(builder, prompt, new_context=self._windowed)
        return self._on_step(builder, transition)

    def _on_step(self, builder: EpisodeBuilder, transition: Transition) -> Episode | None:
        episode = builder.episode
        action = episode.messages[builder.turn_started]
        shown = self._shown(transition)
        builder.add_turn(
            Turn(
                action,
                transition.observation,
                transition.reward,
                transition.terminated,
                transition.truncated,
                dict(transition.info),
            ),
            shown,
        )
        if transition.done:
            return self._finish(builder)
        if self.plan.max_turns is not None and builder.num_turns >= self.plan.max_turns:
            builder.truncate("max_turns")
            return self._finish(builder)
        if self._windowed:
            return self._next_turn(builder, self._window(builder, shown), new_context=True)
        delta = self.renderer.delta_ids(
            episode.messages[: builder.turn_started],
            shown,
            builder.tools,
            self.completions[builder.index],
        )
        return self._next_turn(builder, delta)

    def _shown(self, transition: Transition) -> Observation:
        """What the model sees of ``transition``: the scaffold's messages (the env's own for a
        failed env call, which ends the episode)."""
        if transition.infra_error:
            return transition.observation
        scaffold = self.plan.scaffold
        if transition.kind == "reset":
            return scaffold.reset_messages(transition.observation, transition.info)
        return scaffold.step_messages(transition.observation, transition.info)

    @property
    def _windowed(self) -> bool:
        return self.plan.history_turns is not None

    def _window(self, builder: EpisodeBuilder, shown: Observation) -> list[int]:
        """The next turn's prompt under the plan's history window: the system messages, the
        scaffold's memory of the turns before the window (if any), the observation
        ``history_turns`` turns back, and the turns since (sampled ids as sampled, env deltas
        rendered as in a whole conversation)."""
        window = self.plan.history_turns or 0
        builder.observations.append(tuple(shown))
        if window > 0:
            completion = self.completions[builder.index]
            delta = self.renderer.delta_ids(
                builder.episode.messages[: builder.turn_started],
                shown,
                builder.tools,
                completion,
            )
            builder.exchanges.append([*completion.token_ids, *delta])
        start = max(0, builder.num_turns - window)
        memory = self._memory(builder.episode.turns[:start])
        first = builder.observations[start]
        head = self.renderer.prompt_ids([*builder.system, *memory, *first], builder.tools)
        return builder.window_prompt(window, head)

    def _memory(self, turns: list[Turn]) -> Observation:
        """The scaffold's memory of ``turns`` (the turns before the window), if it keeps one."""
        scaffold = self.plan.scaffold
        if isinstance(scaffold, EpisodeMemory):
            return scaffold.memory_messages(turns)
        return ()

    def _next_turn(
        self, builder: EpisodeBuilder, prompt_ids: list[int], *, new_context: bool = False
    ) -> Episode | None:
        """Append ``prompt_ids`` (as a new context with ``new_context``) and ask the engine for
        the next turn, or end the episode if the context cannot hold them and one sampled
        token."""
        max_tokens = self.plan.sampling.max_tokens
        limit = self.plan.max_context_tokens
        if limit is not None:
            used = 0 if new_context else builder.context_tokens
            room = limit - used - len(prompt_ids)
            if room < 1:
                builder.truncate("context_length")
                return self._finish(builder)
            max_tokens = min(max_tokens, room)
        choices = self._turn_choices(builder)
        if choices:
            longest = max(map(len, choices))
            if limit is not None and longest > room:
                builder.truncate("context_length")
                return self._finish(builder)
            max_tokens = max(max_tokens, longest)
        if new_context:
            builder.start_context(prompt_ids)
        else:
            builder.append_prompt(prompt_ids)
        self.choices[builder.index] = choices
        sampling = dataclasses.replace(
            self.plan.sampling,
            max_tokens=max_tokens,
            seed=self._request_seed(builder),
            choices=choices,
        )
        task = asyncio.ensure_future(self._generate(builder, sampling))
        self.generating[task] = builder.index
        return None

    async def _generate(self, builder: EpisodeBuilder, sampling: SamplingParams) -> Completion:
        prompt = builder.episode.token_ids[builder.context_start :]
        start = time.perf_counter()
        try:
            with episode_route(builder.route):  # several servers: its turns stay on one
                completion = await self.engine.generate(prompt, sampling)
        except EpisodeLost:
            raise
        except Exception as error:
            error.add_note(
                f"agentgym.rollout: engine.generate failed for env {builder.index} (group "
                f"{builder.group}, turn {builder.num_turns + 1}, prompt of {len(prompt)} tokens)"
            )
            raise
        builder.llm_time += time.perf_counter() - start
        return completion

    def _on_completion(self, index: int, completion: Completion) -> None:
        builder = self.builders[index]
        text = completion.text
        if text is None:
            text = str(
                self.renderer.tokenizer.decode(completion.token_ids, skip_special_tokens=True)
            )
        choices = self.choices.pop(index, ())
        builder.append_completion(completion, text, choices if self.plan.action_choices else None)
        self.completions[index] = completion
        self.submitted[index] = time.perf_counter()
        self.venv.submit_step(index, self.plan.scaffold.action(text))

    def _turn_choices(self, builder: EpisodeBuilder) -> tuple[tuple[int, ...], ...]:
        """The token ids of the actions the env offers for the next turn
        (``info["action_choices"]`` of its reset or last step), with the plan's
        ``action_choices``; ``()``: sample freely."""
        if not self.plan.action_choices:
            return ()
        episode = builder.episode
        info = episode.turns[-1].info if episode.turns else episode.reset_info
        texts = info.get(ACTION_CHOICES)
        if texts is None:
            return ()
        if (
            isinstance(texts, str)
            or not isinstance(texts, list | tuple)
            or not texts
            or not all(isinstance(t, str) and t for t in texts)
        ):
            raise Error(
                f"env {builder.index} ({self.env_id}) offered info['action_choices'] = "
                f"{texts!r}; it must be a non-empty list of non-empty action texts. Fix the "
                "env, or collect without action_choices"
            )
        key = tuple(texts)
        if key not in self._choice_ids:
            self._check_choices(key)
            self._choice_ids[key] = tuple(
                tuple(self.renderer.reply_ids(t)) for t in dict.fromkeys(key)
            )
        return self._choice_ids[key]

    def _check_choices(self, texts: tuple[str, ...]) -> None:
        """A constrained reply is one of ``texts``: the scaffold must hand it to the env as it
        is (ReAct's would read it as a reply without an ``Action:`` line)."""
        scaffold = self.plan.scaffold
        changed = [t for t in texts if scaffold.action(t) != t]
        if changed:
            raise Error(
                f"constrained decoding samples the env's action texts as replies, but the "
                f"scaffold {type(scaffold).__name__} does not pass {changed[0]!r} to the env "
                "as it is. Fix: collect without action_choices, or with a scaffold whose "
                "action(text) returns the env's action texts unchanged (the default)"
            )

    def _request_seed(self, builder: EpisodeBuilder) -> int | None:
        """A distinct, reproducible seed per request from ``sampling_seed`` (one seed for every
        request would make a group's members sample the same tokens)."""
        base = self.plan.sampling.seed
        if base is None:
            return None
        group = self.plan.first_group + builder.group
        key = [base, group, builder.index % self.plan.group_size, builder.num_turns]
        return int(np.random.SeedSequence(key).generate_state(1)[0])
