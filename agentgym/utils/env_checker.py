"""``check_env``: agentgym's env contract, stricter than Gymnasium's checker.

Gymnasium's ``check_env`` checks the Gymnasium API. This checks what an LLM agent env owes a
training loop on top of it: chat-message spaces, seeded determinism, valid tool schemas, the info
keys of :mod:`agentgym.core.info` in every reset and step (types, ``reward_components`` that sum
to the reward, ``success`` where an episode terminates, returns within the registered
``reward_range``), fresh data on every call, a bounded answer to any model output (garbage
included), idempotent close and a serialisable spec. It runs every check, collects every
failure, and raises one ``EnvCheckError`` listing them all: a problem found on many steps or by
several checks (an env whose ``step`` always raises) is one line with its count.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import gymnasium as gym
import jsonschema
import numpy as np
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.utils.passive_env_checker import data_shares_objects

from agentgym.core import info as info_keys
from agentgym.core.env import AgentEnv
from agentgym.core.errors import EnvCheckError, EnvStateError
from agentgym.core.spaces import AssistantTurn, Messages
from agentgym.utils.garbage import garbage_actions

__all__ = ["MAX_ECHO_CHARS", "CheckReport", "check_env", "garbage_actions"]

MAX_ECHO_CHARS = 100_000
"""Most characters the env's own messages may hold in answer to a 1 MB action: an env that echoes
a huge model output back whole would blow up the context of every later turn."""

_TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NUM_SAMPLES = 32
_NUM_SAMPLE_STEPS = 8
_SHOWN_PLACES = 3


@dataclass(frozen=True)
class CheckReport:
    """What ``check_env`` ran on an env that passed."""

    env_name: str
    checks: tuple[str, ...]
    skipped: tuple[str, ...] = ()
    steps: int = 0
    """Env steps taken by the checks."""

    @property
    def num_checks(self) -> int:
        return len(self.checks)


@dataclass
class _Failure:
    """One problem and every (check, call) where it was found, in order."""

    problem: str
    detail: str = ""
    places: list[tuple[str, str]] = field(default_factory=list)

    def line(self) -> str:
        """``[check] where problem``; a repeated one once, with its count and first places."""
        checks = ", ".join(dict.fromkeys(check for check, _ in self.places))
        problem = f"{self.problem}: {self.detail}" if self.detail else self.problem
        if len(self.places) == 1:
            where = self.places[0][1]
            return f"[{checks}] {where} {problem}" if where else f"[{checks}] {problem}"
        shown = ", ".join(where or check for check, where in self.places[:_SHOWN_PLACES])
        more = len(self.places) - _SHOWN_PLACES
        shown += f" and {more} more" if more > 0 else ""
        return f"[{checks}] {problem} ({len(self.places)} times: {shown})"


@dataclass
class _Run:
    """State of one ``check_env`` call: the env, the seed and the failures found so far."""

    env: gym.Env[Any, Any]
    seed: int
    reward_range: tuple[float, float] | None = None
    failures: dict[str, _Failure] = field(default_factory=dict)
    """By problem: one root cause found on many steps, or by several checks, is one failure."""
    check: str = ""
    steps: int = 0
    skipped: list[str] = field(default_factory=list)
    episode_return: float = 0.0

    def fail(self, problem: str, where: str = "", detail: str = "") -> None:
        """Record ``problem`` found by the current check at ``where`` (a call such as
        ``step(<empty string>)``); ``detail`` (e.g. the offending value) is shown for the first
        place only and does not tell problems apart."""
        failure = self.failures.setdefault(problem, _Failure(problem, detail))
        if (self.check, where) not in failure.places:
            failure.places.append((self.check, where))

    def failure_lines(self) -> list[str]:
        return [failure.line() for failure in self.failures.values()]

    def reset(self, where: str, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        result = self.env.reset(**kwargs)
        if not (isinstance(result, tuple) and len(result) == 2):
            self.fail("returned something other than an (obs, info) pair", where, _short(result))
            return (), {}
        self.check_obs(result[0], where)
        if not isinstance(result[1], dict):
            self.fail(f"returned info of type {_type_name(result[1])}, not dict", where)
        else:
            for problem in info_keys.problems(result[1], "reset"):
                self.fail(f"info: {problem}", where)
        self.episode_return = 0.0
        return result

    def step(self, action: Any, where: str) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        result = self.env.step(action)
        self.steps += 1
        if not (isinstance(result, tuple) and len(result) == 5):
            self.fail("returned something other than a 5-tuple", where, _short(result))
            return (), 0.0, True, False, {}
        obs, reward, terminated, truncated, info = result
        self.check_obs(obs, where)
        if not isinstance(reward, float | np.floating) or not math.isfinite(reward):
            self.fail(f"returned reward {reward!r}: it must be a finite float", where)
        for flag, value in (("terminated", terminated), ("truncated", truncated)):
            if not isinstance(value, bool):
                self.fail(f"returned {flag}={value!r} ({_type_name(value)}), not a bool", where)
        if not isinstance(info, dict):
            self.fail(f"returned info of type {_type_name(info)}, not dict", where)
        elif isinstance(reward, float | np.floating) and math.isfinite(reward):
            self.check_step_info(where, float(reward), bool(terminated), bool(truncated), info)
        return result

    def check_step_info(
        self, where: str, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> None:
        for problem in info_keys.problems(info, "step", reward=reward, truncated=truncated):
            self.fail(f"info: {problem}", where)
        if terminated and info_keys.SUCCESS not in info and not info_keys.is_infra_error(info):
            self.fail(
                "ended the episode (terminated) without info['success']: say whether the task "
                "was accomplished (a bool); trainers never guess it from the reward",
                where,
            )
        self.episode_return += reward
        if (terminated or truncated) and self.reward_range is not None:
            for problem in info_keys.return_problems(self.episode_return, self.reward_range):
                self.fail(f"ended the episode: {problem}", where)

    def check_obs(self, obs: Any, where: str) -> None:
        if obs not in self.env.observation_space:
            self.fail("returned an observation not in observation_space", where, _short(obs))


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _type_name(value: Any) -> str:
    module, name = type(value).__module__, type(value).__qualname__
    return name if module == "builtins" else f"{module}.{name}"


def _episode_over(result: tuple[Any, ...]) -> bool:
    return bool(result[2]) or bool(result[3])


# --- the checks ---------------------------------------------------------------------------------


def _check_spaces(run: _Run) -> None:
    obs_space, action_space = run.env.observation_space, run.env.action_space
    if not isinstance(obs_space, Messages):
        run.fail(f"observation_space is {obs_space!r}, not agentgym.core.spaces.Messages")
    if not isinstance(action_space, AssistantTurn):
        run.fail(f"action_space is {action_space!r}, not agentgym.core.spaces.AssistantTurn")
    for name, space in (("observation_space", obs_space), ("action_space", action_space)):
        if isinstance(space, gym.spaces.Text):
            run.fail(f"{name} is gymnasium.spaces.Text: it mangles unicode and vector batching")


def _tool_schema_problems(schema: Any) -> list[str]:
    if not isinstance(schema, dict) or schema.get("type") != "function":
        return [f'{_short(schema)} is not {{"type": "function", "function": {{...}}}}']
    function = schema.get("function")
    if not isinstance(function, dict):
        return [f"tool schema {_short(schema)} has no 'function' object"]
    name = function.get("name")
    problems = []
    if not (isinstance(name, str) and _TOOL_NAME_RE.match(name)):
        problems.append(f"tool name {_short(name)} does not match {_TOOL_NAME_RE.pattern}")
    if not isinstance(function.get("description"), str):
        problems.append(f"tool {name!r} has no description string")
    parameters = function.get("parameters")
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        return [*problems, f"tool {name!r}: parameters {_short(parameters)} is not an object"]
    try:
        jsonschema.Draft202012Validator.check_schema(parameters)
    except jsonschema.SchemaError as e:
        problems.append(f"tool {name!r}: parameters is not valid JSON Schema: {e.message}")
    return problems


def _tool_schemas_of(info: dict[str, Any]) -> list[dict[str, Any]]:
    """The well-formed tool schemas in a reset ``info`` (an empty list when there are none)."""
    tools = info.get("tools")
    if not isinstance(tools, list):
        return []
    return [t for t in tools if not _tool_schema_problems(t)]


def _check_reset_info(run: _Run) -> None:
    _, info = run.reset(f"reset(seed={run.seed})", seed=run.seed)
    tools = info.get("tools") if isinstance(info, dict) else None
    if not isinstance(tools, list):
        run.fail(f'reset info["tools"] is {_short(tools)}, not a list of tool schemas')
        return
    for schema in tools:
        for problem in _tool_schema_problems(schema):
            run.fail(f'reset info["tools"]: {problem}')
    names = [t["function"]["name"] for t in _tool_schemas_of(info)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        run.fail(f'reset info["tools"] declares these tool names more than once: {duplicates}')


def _compare(run: _Run, what: str, first: Any, second: Any) -> None:
    if not data_equivalence(first, second):
        run.fail(
            f"{what} differs between two runs with seed={run.seed}: "
            f"{_short(first)} != {_short(second)}"
        )


def _check_determinism(run: _Run) -> None:
    if run.env.spec is not None and run.env.spec.nondeterministic:
        run.skipped.append("determinism (spec.nondeterministic)")
        return
    where = f"reset(seed={run.seed})"
    first = copy.deepcopy(run.reset(where, seed=run.seed))
    second = run.reset(where, seed=run.seed)
    _compare(run, "reset observation", first[0], second[0])
    _compare(run, "reset info", first[1], second[1])
    run.env.action_space.seed(run.seed)
    action = run.env.action_space.sample()
    run.reset(where, seed=run.seed)
    one = copy.deepcopy(run.step(action, f"first step({_short(action, 60)})"))
    run.reset(where, seed=run.seed)
    two = run.step(action, f"first step({_short(action, 60)})")
    for what, a, b in zip(
        ("observation", "reward", "terminated", "truncated", "info"), one, two, strict=True
    ):
        _compare(run, f"first step {what}", a, b)


def _check_samples(run: _Run) -> None:
    for name, space in (
        ("action_space", run.env.action_space),
        ("observation_space", run.env.observation_space),
    ):
        space.seed(run.seed)
        for _ in range(_NUM_SAMPLES):
            sample = space.sample()
            if sample not in space:
                run.fail(
                    f"{name}.sample() returned a value it does not contain", "", _short(sample)
                )
    run.env.action_space.seed(run.seed)
    run.reset(f"reset(seed={run.seed})", seed=run.seed)
    for _ in range(_NUM_SAMPLE_STEPS):
        action = run.env.action_space.sample()
        if _episode_over(run.step(action, f"step({_short(action, 60)})")):
            run.reset("reset()")


def _env_chars(obs: Any) -> int:
    """Characters in the messages the env wrote (assistant turns are the agent's own)."""
    if not isinstance(obs, tuple):
        return 0
    return sum(
        len(str(value))
        for m in obs
        if isinstance(m, dict) and m.get("role") != "assistant"
        for value in m.values()
    )


def _check_garbage(run: _Run) -> None:
    _, info = run.reset(f"reset(seed={run.seed})", seed=run.seed)
    tools = _tool_schemas_of(info) if isinstance(info, dict) else []
    for label, action in garbage_actions(tools, run.seed):
        where = f"step(<{label}>)"
        try:
            result = run.step(action, where)
        except Exception as e:
            run.fail(f"raised {type(e).__name__}: {_short(str(e))}", where)
            run.reset("reset()")
            continue
        if "1 MB" in label and _env_chars(result[0]) >= MAX_ECHO_CHARS:
            run.fail(
                f"answered with messages of {_env_chars(result[0])} characters; keep them "
                f"under {MAX_ECHO_CHARS} (truncate echoed model output)",
                where,
            )
        if _episode_over(result):
            run.reset("reset()")


def _check_no_sharing(run: _Run) -> None:
    run.env.action_space.seed(run.seed)
    calls = [("reset (call 1)", run.reset(f"reset(seed={run.seed})", seed=run.seed))]
    for _ in range(3):
        result = run.step(run.env.action_space.sample(), "step")
        calls.append((f"step (call {len(calls) + 1})", (result[0], result[4])))
        if _episode_over(result):
            break
    calls.append((f"reset (call {len(calls) + 1})", run.reset("reset(seed)", seed=run.seed)))
    for (where_1, data_1), (where_2, data_2) in combinations(calls, 2):
        for what, a, b in (("observations", data_1[0], data_2[0]), ("infos", data_1[1], data_2[1])):
            if data_shares_objects(a, b):
                run.fail(f"the {what} returned by {where_1} and {where_2} share a mutable object")


def _check_spec(run: _Run) -> None:
    spec = run.env.spec
    if spec is None:
        run.skipped.append("spec (the env was not made by gym.make)")
        return
    if pickle.loads(pickle.dumps(spec)) != spec:
        run.fail(f"spec {spec.id!r} does not survive a pickle round trip unchanged")
    if callable(spec.entry_point):  # as gymnasium.register allows; EnvSpec.to_json refuses it
        run.skipped.append("spec JSON (a callable entry point)")
        return
    json.loads(spec.to_json())


def _check_close(run: _Run) -> None:
    run.env.close()
    run.env.close()
    try:
        run.env.reset(seed=run.seed)
    except EnvStateError:
        return
    except Exception as e:
        run.fail(f"reset after close raised {type(e).__name__}, not agentgym.error.EnvStateError")
        return
    run.fail("reset after close did not raise agentgym.error.EnvStateError")


_CHECKS: tuple[tuple[str, Callable[[_Run], None]], ...] = (
    ("spaces", _check_spaces),
    ("reset info", _check_reset_info),
    ("determinism", _check_determinism),
    ("samples", _check_samples),
    ("garbage actions", _check_garbage),
    ("fresh data", _check_no_sharing),
    ("spec", _check_spec),
    ("close", _check_close),  # last: it closes the env
)


def _reward_range(spec: Any) -> tuple[float, float] | None:
    """The registered ``reward_range`` of an env registered through ``agentgym.register``."""
    from agentgym.core.errors import RegistryError
    from agentgym.registry import env_info

    if spec is None:
        return None
    try:
        return env_info(spec.id).reward_range
    except RegistryError:  # registered with gymnasium.register: no range declared
        return None


def check_env(env: gym.Env[Any, Any], *, seed: int = 0) -> CheckReport:
    """Check ``env`` (an ``AgentEnv``, wrapped or not) against agentgym's env contract.

    Runs every check even after a failure, then raises ``agentgym.error.EnvCheckError`` listing
    all failures. The checks reset and step ``env`` many times and **close it** at the end.

    Args:
        env: the env, e.g. ``gym.make("agentgym/FrozenLake-v0")``.
        seed: the seed for resets, action sampling and generated garbage.

    Returns:
        A ``CheckReport`` naming the checks that ran.
    """
    unwrapped = getattr(env, "unwrapped", env)
    spec = getattr(env, "spec", None)
    name = spec.id if spec is not None else type(unwrapped).__name__
    if not isinstance(env, gym.Env) or not isinstance(unwrapped, AgentEnv):
        raise EnvCheckError(name, [f"env.unwrapped is {type(unwrapped).__name__}, not an AgentEnv"])
    run = _Run(env, seed, _reward_range(spec))
    ran = []
    for check, fn in _CHECKS:
        run.check = check
        skipped = len(run.skipped)
        try:
            fn(run)
        except Exception as e:
            run.fail(f"raised {type(e).__name__}: {_short(str(e))}")
        if len(run.skipped) == skipped:
            ran.append(check)
    if run.failures:
        raise EnvCheckError(name, run.failure_lines())
    return CheckReport(name, tuple(ran), tuple(run.skipped), run.steps)
