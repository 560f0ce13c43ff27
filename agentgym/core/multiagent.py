"""``MultiAgentEnv``: several roles take turns in one text episode (PettingZoo's AEC shape).

Why AEC and not Parallel: the text games and workflows this serves are turn-based (a move,
then the opponent's move; a solver's answer, then the judge's verdict), and a role's turn
often depends on what the previous role just said. AEC (Agent Environment Cycle, Terry et
al. 2021) models exactly that: one agent acts per step, ``agent_selection`` says which, and
rewards can land on any agent at any step without being lost (``_cumulative_rewards`` holds
them until that agent's next turn). A Parallel env is the special case where everybody acts
at once; its simultaneous moves can be written as an AEC cycle whose observations are withheld
until the cycle ends, so AEC loses nothing for these envs.

The names follow PettingZoo: ``possible_agents``, ``agents``, ``agent_selection``,
``rewards``, ``terminations``, ``truncations``, ``infos``, ``observe(agent)``, ``last()``,
``agent_iter()``, ``reset(seed=...)`` and ``step(action)`` (both return None). What is
text-specific: an agent's observation is the tuple of chat messages the env addressed to it
since its last action (``observe``), exactly what a single-agent ``AgentEnv.step`` returns,
so a role's conversation grows the same way a single-agent episode does.

A done agent (terminated or truncated) stays in ``agents`` until it is stepped once more
with ``None`` (PettingZoo's "dead step"), so the driver sees its final reward and final
messages through ``last()``; ``agent_iter`` ends when ``agents`` is empty.

Like ``AgentEnv``, a subclass writes either style and gets the other
(:mod:`agentgym.core.styles`): the async pair ``areset``/``astep`` (the base adds ``reset``/
``step``) or the Gymnasium pair ``reset``/``step``. A step is written with the helpers::

    async def astep(self, action):
        if self.dead_step(action):          # a done agent's last step: removes it
            return
        agent = self.begin_turn()           # clears its pending messages and last rewards
        ...                                 # apply the action, self.tell(...), self.reward(...)
        self.end_turn(next_agent)           # or self.end_game({...}) when the episode is over
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np
from gymnasium.utils import seeding

from agentgym.core.errors import EnvDefinitionError, EnvStateError
from agentgym.core.styles import WorkerOwner, install_adapters, style_of
from agentgym.core.types import Action, Message, Observation

__all__ = ["LastResult", "MultiAgentEnv"]

LastResult = tuple[Observation, float, bool, bool, dict[str, Any]]
"""``last()``: the selected agent's observation, cumulative reward, terminated, truncated, info."""


class MultiAgentEnv(WorkerOwner):
    """A turn-based text env of several agents (roles); see the module docstring.

    Subclasses set ``possible_agents`` (the role names, in seat order) and implement one step
    style. ``metadata["role_prompts"]`` may hold a one-line description of each role.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "multi_agent": True}
    possible_agents: ClassVar[tuple[str, ...]] = ()
    scripted_policies: ClassVar[Mapping[str, Any]] = {}
    """Name -> a scripted player, ``(observation, info, rng) -> action text`` (the callable or
    its ``"module:attribute"``): the fixed opponents a run can put in a role."""
    default_policies: ClassVar[Mapping[str, str]] = {}
    """Role -> the name of the scripted policy that plays the role when a run neither trains
    it nor gives it an engine (e.g. ``{"o": "random"}``)."""
    spec: Any = None  # gymnasium's make sets it

    def __init__(self, *, render_mode: str | None = None) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise EnvStateError(
                f"render_mode {render_mode!r} is not supported by {type(self).__name__}; "
                f"use one of {self.metadata['render_modes']} or None"
            )
        if not self.possible_agents:
            raise EnvDefinitionError(
                f"{type(self).__name__} declares no possible_agents. Fix: set the class "
                "attribute possible_agents = ('player_1', 'player_2') (its role names)"
            )
        if style_of(type(self), MultiAgentEnv)["step"] is None:
            raise EnvDefinitionError(
                f"{type(self).__name__} implements neither step style. Fix: define `async def "
                "areset(self, *, seed=None, options=None)` and `async def astep(self, action)`, "
                "or `def reset(...)` and `def step(self, action)`"
            )
        self.render_mode = render_mode
        self.agents: list[str] = []
        self.agent_selection: str = self.possible_agents[0]
        self.rewards: dict[str, float] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.infos: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, list[Message]] = {}
        self._after_dead: str | None = None
        self._last_observation: Any = ()
        self._closed = False
        self.np_random: np.random.Generator = seeding.np_random(None)[0]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        install_adapters(cls)

    # --- what the styles adapters need ---------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def unwrapped(self) -> MultiAgentEnv:
        """The env itself (``gymnasium.make`` sets ``unwrapped.spec``)."""
        return self

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        return len(self.possible_agents)

    # --- the bases: reset bookkeeping ------------------------------------------------------------

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start an episode: subclasses ``await super().areset(seed=seed, options=options)``
        first (it seeds ``self.np_random`` and empties every per-agent dict)."""
        self._start(seed)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode (the Gymnasium style); ``super().reset(seed=seed)`` seeds."""
        self._start(seed)

    def _start(self, seed: int | None) -> None:
        if self._closed:
            raise EnvStateError(f"{type(self).__name__} was closed; make a new env to reset")
        if seed is not None or not hasattr(self, "_seeded"):
            self.np_random, _ = seeding.np_random(seed)
            self._seeded = True
        self.agents = list(self.possible_agents)
        self.agent_selection = self.agents[0]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self._pending = {a: [] for a in self.agents}
        self._after_dead = None

    async def astep(self, action: Action | None) -> None:
        """The selected agent acts with ``action`` (``None`` for a done agent's dead step)."""
        raise NotImplementedError(f"{type(self).__name__} must implement astep or step")

    def step(self, action: Action | None) -> None:
        """The selected agent acts (the Gymnasium style)."""
        raise NotImplementedError(f"{type(self).__name__} must implement step or astep")

    async def aclose(self) -> None:
        self._mark_closed()

    def close(self) -> None:
        self._mark_closed()

    # --- what drivers call -----------------------------------------------------------------------

    def observe(self, agent: str) -> Observation:
        """The messages addressed to ``agent`` since its last action (on reset: its role prompt
        and the task)."""
        return tuple(self._pending.get(agent, ()))

    def last(self, observe: bool = True) -> LastResult:
        """What the selected agent sees before it acts: its observation, the reward it got since
        its last action, whether it is terminated/truncated, and its info."""
        agent = self.agent_selection
        observation = self.observe(agent) if observe else ()
        return (
            observation,
            float(self._cumulative_rewards.get(agent, 0.0)),
            bool(self.terminations.get(agent, False)),
            bool(self.truncations.get(agent, False)),
            dict(self.infos.get(agent, {})),
        )

    def agent_iter(self, max_iter: int = 2**63) -> Iterator[str]:
        """The selected agent, until every agent has been removed (or ``max_iter`` turns)."""
        for _ in range(max_iter):
            if not self.agents:
                return
            yield self.agent_selection

    def render(self) -> str | None:
        return None

    # --- helpers for subclasses' steps -----------------------------------------------------------

    def tell(self, agent: str, *messages: Message) -> None:
        """Address ``messages`` to ``agent`` (it sees them on its next ``observe``)."""
        self._pending[agent].extend(messages)

    def reward(self, agent: str, value: float) -> None:
        """Give ``agent`` ``value`` in this step (added to its cumulative reward)."""
        self.rewards[agent] = self.rewards.get(agent, 0.0) + float(value)
        self._cumulative_rewards[agent] = self._cumulative_rewards.get(agent, 0.0) + float(value)

    def done(self, agent: str) -> bool:
        return bool(self.terminations.get(agent) or self.truncations.get(agent))

    def dead_step(self, action: Action | None) -> bool:
        """Handle the step of a done agent (PettingZoo's dead step): the action must be
        ``None``; the agent leaves ``agents``. Returns True when it was one."""
        self._check_open()
        agent = self.agent_selection
        if not self.done(agent):
            return False
        if action is not None:
            raise EnvStateError(
                f"agent {agent!r} of {type(self).__name__} is done, so its step takes None, "
                f"got {str(action)[:60]!r}. Fix: step done agents with None (see last())"
            )
        self.agents.remove(agent)
        self._pending[agent] = []
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.rewards, 0.0)
        self._select_after_dead()
        return True

    def begin_turn(self) -> str:
        """Start the selected agent's (live) step: it has read its messages and its reward."""
        self._check_open()
        agent = self.agent_selection
        self._pending[agent] = []
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.rewards, 0.0)
        return agent

    def end_turn(self, next_agent: str) -> None:
        """End a step that did not end the episode: ``next_agent`` acts next."""
        if next_agent not in self.agents:
            raise EnvStateError(f"next agent {next_agent!r} is not among {self.agents}")
        self.agent_selection = next_agent

    def end_game(self, infos: Mapping[str, Mapping[str, Any]], *, truncated: bool = False) -> None:
        """End the episode for every agent (terminated, or ``truncated``), with each agent's
        final info; the done agents then get their dead steps in seat order."""
        for agent in self.agents:
            if truncated:
                self.truncations[agent] = True
            else:
                self.terminations[agent] = True
            self.infos[agent] = dict(infos.get(agent, {}))
        self._after_dead = None
        self._select_after_dead()

    def _select_after_dead(self) -> None:
        dead = [a for a in self.agents if self.done(a)]
        if dead:
            self.agent_selection = dead[0]
        elif self._after_dead is not None and self._after_dead in self.agents:
            self.agent_selection = self._after_dead

    def _check_open(self) -> None:
        if self._closed:
            raise EnvStateError(f"{type(self).__name__} was closed; make a new env")
        if not self.agents:
            raise EnvStateError(
                f"{type(self).__name__} has no agents left (the episode is over, or reset was "
                "never called). Fix: call reset(seed=...) first"
            )
