"""``AgentVectorEnv``: a ``gymnasium.vector.VectorEnv`` of ``AgentEnv``s driven by asyncio."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from agentgym.core.aio import run_sync
from agentgym.core.env import AgentEnv
from agentgym.core.errors import ConfigError, EnvStateError, SpaceMismatchError
from agentgym.core.types import Action, Observation
from agentgym.registry import resolve_id
from agentgym.vector.batching import join_observations, split_actions
from agentgym.vector.checks import check_autoreset_mode, check_limits, split_reset_mask
from agentgym.vector.inbox import Inbox
from agentgym.vector.ragged import RaggedAPI
from agentgym.vector.runner import Runner, State, SubEnv, Transition, check_agent_env
from agentgym.vector.seeds import (
    lockstep_seeds,
    next_seed,
    random_root,
)

__all__ = ["AgentVectorEnv"]

log = logging.getLogger("agentgym.vector")

Observations = tuple[Observation, ...]
StepBatch = tuple[Observations, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


class AgentVectorEnv(RaggedAPI, VectorEnv[Observations, Sequence[Action], np.ndarray]):
    """A Gymnasium ``VectorEnv`` of ``AgentEnv``s whose calls run concurrently on asyncio.

    **Lockstep** (Gymnasium's API): ``reset``/``step``, or ``await areset``/``astep`` on a running
    loop, take and return one entry per env; every sub-env call of a batch runs concurrently;
    finished envs restart as ``metadata["autoreset_mode"]`` says, exactly as ``SyncVectorEnv``::

        venv = AgentVectorEnv.from_id("agentgym/FrozenLake-v0", num_envs=4)
        obs, infos = venv.reset(seed=0)              # obs: one tuple of messages per env
        obs, rewards, terminations, truncations, infos = venv.step(["```\\nright\\n```"] * 4)

    **Ragged** (for LLM rollouts): submit one env's work as soon as its action is ready and
    receive ``Transition`` s in completion order. Nothing resets by itself: reset finished envs
    explicitly::

        for i in range(venv.num_envs):
            venv.submit_reset(i)
        async for t in venv.transitions():         # until nothing is pending
            if not t.done:
                venv.submit_step(t.index, policy(t.observation))

    **Isolation**: a sub-env call that raises or passes its deadline gives, for that env only, a
    transition with observation ``()``, reward 0, ``truncated=True`` and an info of
    ``{"infra_error": True, "error": "<type>: <message>", "error_kind": "infra" | "env",
    "error_at": "<EnvClass>.<reset|step>", "truncation_reason": "infra_error"}`` (``error_kind``
    ``"env"``: the env's own code raised, logged once with its traceback); lockstep treats it as
    a truncation. A failed reset rebuilds the env from its factory and
    retries once; if that fails too, lockstep tries again at the env's next step (or, under
    ``DISABLED``, reports the failure again until the env is reset). Mistakes in using the vector
    env itself (wrong number of actions, stepping a finished env) raise ``agentgym.error.Error``.

    Batches are ``SyncVectorEnv``'s (see :mod:`agentgym.vector.batching`): observations of text
    envs are the sub-envs' own tuples, not copies; ``np_random_seed`` and ``np_random`` are the
    sub-envs'. A mistake Gymnasium reports as ``TypeError`` or ``RuntimeError`` (a ``reset_mask``
    of the wrong dtype, sub-envs with different spaces) is an agentgym error of that type too.

    Args:
        env_fns: one factory per sub-env, each returning an ``AgentEnv``.
        group_size: envs ``[kG, (k+1)G)`` form group ``k`` and share the task of every episode
            (for GRPO); see :mod:`agentgym.vector.seeds` for the seeds.
        max_concurrency: most sub-env calls in flight at once (``None``: no limit).
        step_timeout: seconds one sub-env step may run (``None``: no deadline); waiting for
            ``max_concurrency`` does not count.
        reset_timeout: the same for one sub-env reset (and for closing an env to rebuild it).
        autoreset_mode: Gymnasium's ``AutoresetMode`` for the lockstep API.
        max_episode_steps: truncate episodes after this many steps, as ``TimeLimit`` does (and
            like it, adding no info key: infos equal those of ``gym.make(...,
            max_episode_steps=...)``).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], AgentEnv]],
        *,
        group_size: int = 1,
        max_concurrency: int | None = None,
        step_timeout: float | None = None,
        reset_timeout: float | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = None,
    ) -> None:
        super().__init__()
        env_fns = list(env_fns)
        check_limits(
            num_envs=len(env_fns),
            group_size=group_size,
            max_concurrency=max_concurrency,
            step_timeout=step_timeout,
            reset_timeout=reset_timeout,
            max_episode_steps=max_episode_steps,
        )
        self.autoreset_mode = check_autoreset_mode(autoreset_mode)
        self.num_envs = len(env_fns)
        self.group_size = group_size
        self._subs = _build(env_fns, group_size)
        first = self._subs[0].env
        self.metadata = dict(first.metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = first.render_mode
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._runner = Runner(
            step_timeout=step_timeout,
            reset_timeout=reset_timeout,
            max_concurrency=max_concurrency,
            max_episode_steps=max_episode_steps,
        )
        self._inbox = Inbox()

    @classmethod
    def from_id(
        cls,
        env_id: str,
        /,
        num_envs: int = 1,
        *,
        group_size: int = 1,
        max_concurrency: int | None = None,
        step_timeout: float | None = None,
        reset_timeout: float | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = None,
        workers: str | None = None,
        **env_kwargs: Any,
    ) -> AgentVectorEnv:
        """``num_envs`` sub-envs of a registered id, each ``gym.make(env_id, **env_kwargs)``.

        Gymnasium's wrappers are not applied: the step limit (``max_episode_steps``, by default
        the spec's) is applied by the vector env itself, as ``TimeLimit`` would. This is the
        vector entry point of every registered id: ``gym.make_vec(env_id, num_envs,
        vectorization_mode="vector_entry_point", group_size=8, ...)`` takes the vector env's
        options as keyword arguments, beside the env's.

        ``workers``: where the sub-envs run. ``None``: where the env class asks (``worker`` on
        ``AgentEnv``: in this process, a synchronous env's calls on a thread of its own; or
        ``"process"``); ``"thread"``: in this process; ``"process"``: each in a child process
        (``agentgym.vector.process.ProcessEnv``), where a hung call can be killed; ``"ray"``: in
        Ray actors, spread over a cluster (``agentgym.vector.ray_workers``; with the options
        ``ray_address``, ``envs_per_actor``, ``ray_resources``).
        """
        spec = gym.spec(resolve_id(env_id))
        if spec.additional_wrappers:
            raise ConfigError(
                "env_id",
                env_id,
                "its spec adds wrappers, which an AgentVectorEnv cannot apply",
                "register it without additional_wrappers, or use vectorization_mode='sync'",
            )
        check_limits(
            num_envs=num_envs, group_size=group_size, max_concurrency=max_concurrency,
            step_timeout=step_timeout, reset_timeout=reset_timeout,
            max_episode_steps=max_episode_steps,
        )  # fmt: skip

        def make_env() -> AgentEnv:
            return gym.make(env_id, disable_env_checker=True, **env_kwargs).unwrapped  # type: ignore[return-value]

        def make_process_env() -> AgentEnv:
            from agentgym.vector.process import ProcessEnv

            return ProcessEnv(env_id, env_kwargs)

        ray_options = _ray_options(env_kwargs, workers)
        if workers == "ray":  # Ray actors (agentgym.vector.ray_workers); imports ray
            from agentgym.vector.ray_workers import ray_factories

            factories = ray_factories(env_id, env_kwargs, num_envs, ray_options)
        else:
            factories = [make_process_env if _in_processes(spec, workers) else make_env] * num_envs
        mode = check_autoreset_mode(autoreset_mode)
        max_episode_steps = max_episode_steps or spec.max_episode_steps
        venv = cls(
            factories,
            group_size=group_size,
            max_concurrency=max_concurrency,
            step_timeout=step_timeout,
            reset_timeout=reset_timeout,
            autoreset_mode=mode,
            max_episode_steps=max_episode_steps,
        )
        # What gym.make_vec(venv.spec) needs to build the same vector env again.
        options = {
            "group_size": group_size,
            "max_concurrency": max_concurrency,
            "step_timeout": step_timeout,
            "reset_timeout": reset_timeout,
            "autoreset_mode": mode.value,
            "max_episode_steps": max_episode_steps,
            "workers": workers,
            **ray_options,
        }
        kwargs = {**env_kwargs, **{k: v for k, v in options.items() if v is not None}}
        kwargs.update(num_envs=num_envs, vectorization_mode="vector_entry_point")
        venv.spec = dataclasses.replace(spec, kwargs=kwargs)
        return venv

    # --- lockstep API ------------------------------------------------------------------------

    async def areset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Observations, dict[str, Any]]:
        """Reset every env (or those ``options["reset_mask"]`` selects) concurrently.

        ``seed``: ``None``, an int (env ``i`` gets ``seed + i``; with groups, group ``k`` gets
        ``seed + k``) or one seed per env. Returns the observation of every env (the last one for
        envs not reset) and the infos of those reset.
        """
        options, mask = split_reset_mask(options, self.num_envs)
        chosen = [s for s in self._subs if mask is None or mask[s.index]]
        self._claim(chosen)
        try:
            seeds = lockstep_seeds(seed, self._subs, self.group_size, mask)
            done = await asyncio.gather(
                *(self._runner.reset(s, seeds[s.index], options) for s in chosen)
            )
        finally:
            self._release(chosen)
        infos: dict[str, Any] = {}
        for t in done:
            infos = self._add_info(infos, t.info, t.index)
        return join_observations(self.single_observation_space, [s.last for s in self._subs]), infos

    async def astep(self, actions: Sequence[Action]) -> StepBatch:
        """Step every env concurrently; finished envs restart as ``autoreset_mode`` says."""
        batch = split_actions(actions, self.single_action_space, self.num_envs)
        self._check_lockstep_step()
        self._claim(self._subs)
        try:
            results = await asyncio.gather(
                *(self._lockstep_one(s, a) for s, a in zip(self._subs, batch, strict=True))
            )
        finally:
            self._release(self._subs)
        return self._batch(results)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Observations, dict[str, Any]]:
        return run_sync(self.areset(seed=seed, options=options))

    def step(self, actions: Sequence[Action]) -> StepBatch:
        return run_sync(self.astep(actions))

    async def _lockstep_one(
        self, sub: SubEnv, action: Action
    ) -> tuple[Transition, Transition | None]:
        """``(what to report, the finished step's transition under SAME_STEP or None)``."""
        if sub.state is State.READY:
            stepped = await self._runner.step(sub, action)
            if self.autoreset_mode is AutoresetMode.SAME_STEP and stepped.done:
                seed = next_seed(sub, self.group_size)
                return await self._runner.reset(sub, seed, None), stepped
            return stepped, None
        if self.autoreset_mode is AutoresetMode.DISABLED and sub.last is not None:
            return sub.last, None  # BROKEN: report the failed reset again until reset_mask
        return await self._runner.reset(sub, next_seed(sub, self.group_size), None), None

    def _check_lockstep_step(self) -> None:
        for sub in self._subs:
            if sub.state is State.NEW:
                raise EnvStateError(f"env {sub.index} was never reset: call reset() before step()")
            if sub.state is State.DONE and self.autoreset_mode is AutoresetMode.DISABLED:
                raise EnvStateError(
                    f"env {sub.index} finished its episode and autoreset_mode is DISABLED: "
                    "reset it first with reset(options={'reset_mask': terminations | truncations})"
                )

    def _batch(self, results: list[tuple[Transition, Transition | None]]) -> StepBatch:
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i, (now, final) in enumerate(results):
            ended = now if final is None else final
            rewards[i], terminations[i], truncations[i] = (
                ended.reward,
                ended.terminated,
                ended.truncated,
            )
            if final is not None:
                infos = self._add_info(
                    infos, {"final_obs": final.observation, "final_info": final.info}, i
                )
            infos = self._add_info(infos, now.info, i)
        observations = join_observations(self.single_observation_space, [t for t, _ in results])
        return observations, rewards, terminations, truncations, infos

    # --- Gymnasium's utilities ---------------------------------------------------------------

    @property
    def envs(self) -> list[AgentEnv]:
        """The sub-envs (a failed reset may have replaced one with a fresh instance)."""
        return [s.env for s in self._subs]

    @property
    def np_random_seed(self) -> tuple[int | None, ...]:  # type: ignore[override]
        """The sub-envs' seeds, as ``SyncVectorEnv``: ``(42, 43, ...)`` after ``reset(seed=42)``
        (``(42, 42, 43, 43)`` with groups of 2)."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """The sub-envs' random generators, as ``SyncVectorEnv``."""
        return self.get_attr("np_random")

    def render(self) -> tuple[Any, ...]:
        return tuple(s.env.render() for s in self._subs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every sub-env (or read it, if it is not callable)."""
        results = []
        for sub in self._subs:
            attr = sub.env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute ``name`` of every sub-env: one value each (list/tuple) or one for all."""
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ConfigError(
                "len(values)",
                len(values),
                f"must equal num_envs={self.num_envs}",
                "pass one value per env",
            )
        for sub, value in zip(self._subs, values, strict=True):
            sub.env.set_wrapper_attr(name, value)

    def close_extras(self, **kwargs: Any) -> None:
        """Cancel pending ragged work and close every sub-env; one failing close stops none."""
        self._inbox.cancel()
        for sub in getattr(self, "_subs", ()):
            try:
                sub.env.close()
            except Exception:
                log.exception("closing env %d failed", sub.index)


def _ray_options(env_kwargs: dict[str, Any], workers: str | None) -> dict[str, Any]:
    """Take ``ray_address``, ``envs_per_actor`` and ``ray_resources`` out of ``env_kwargs``."""
    names = ("ray_address", "envs_per_actor", "ray_resources")
    options = {name: env_kwargs.pop(name) for name in names if name in env_kwargs}
    if workers not in (None, "thread", "process", "ray"):
        raise ConfigError(
            "workers", workers, "is not a place envs run", "pass None, 'thread', 'process' or 'ray'"
        )
    if options and workers != "ray":
        raise ConfigError("workers", workers, f"{sorted(options)} need Ray", "pass workers='ray'")
    return options


def _in_processes(spec: gym.envs.registration.EnvSpec, workers: str | None) -> bool:
    """Whether ``workers`` (or, for ``None``, the env class) puts each sub-env in a process."""
    if workers is not None:
        return workers == "process"
    creator = spec.entry_point
    if isinstance(creator, str):
        creator = gym.envs.registration.load_env_creator(creator)
    return getattr(creator, "worker", "thread") == "process"


def _build(env_fns: list[Callable[[], AgentEnv]], group_size: int) -> list[SubEnv]:
    """One ``SubEnv`` per factory, spaces checked against env 0's; on failure, closes those
    already built."""
    subs: list[SubEnv] = []
    roots = [random_root() for _ in range(len(env_fns) // group_size)]
    try:
        for i, make_env in enumerate(env_fns):
            env = check_agent_env(make_env(), i)
            subs.append(SubEnv(i, i // group_size, make_env, env, roots[i // group_size]))
            _check_spaces(env, subs[0].env, i)
    except BaseException:
        for sub in subs:
            sub.env.close()
        raise
    return subs


def _check_spaces(env: AgentEnv, first: AgentEnv, index: int) -> None:
    for name in ("observation_space", "action_space"):
        if getattr(env, name) != getattr(first, name):
            raise SpaceMismatchError(
                f"env_fns[{index}]().{name}",
                getattr(env, name),
                f"differs from env 0's {getattr(first, name)}",
                "make every sub-env with the same arguments (and the same tools)",
            )
