"""``AgentEnv``: the base of every agentgym env.

Subclasses implement either style, and the base gives them the other (see
:mod:`agentgym.core.styles`): the async pair ``areset``/``astep`` (the base adds the synchronous
``reset``/``step`` Gymnasium expects) or the Gymnasium pair ``reset``/``step`` (the base adds
``areset``/``astep``, which run them on the env's worker thread).

The base refuses, in both styles, a step before the first reset, after a reset that raised,
after the episode ended (a step returned ``terminated`` or ``truncated``, raised, or was
cancelled) until the next ``reset``, and after ``close``: ``EnvStateError``; subclasses do not
check this themselves.
It also gives idempotent ``close`` and the tool plumbing every tool-using env needs: parse an
action with the env's parser, run the declared tools concurrently with a deadline, and answer
every call (good or malformed) with a tool message.

Async style::

    class MyEnv(AgentEnv):
        async def areset(self, *, seed=None, options=None):
            await super().areset(seed=seed, options=options)   # seeds self.np_random
            return (user("the task"),), {"tools": self.tool_schemas()}

        async def astep(self, action):
            parsed = self.parse(action)
            ...

Gymnasium style::

    class MyEnv(AgentEnv):
        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)                            # seeds self.np_random
            return (user("the task"),), {"tools": []}

        def step(self, action):
            ...
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, SupportsFloat

import gymnasium as gym

from agentgym.core.aio import deadline
from agentgym.core.errors import (
    ConfigError,
    DeadlineExceeded,
    EnvDefinitionError,
    EnvStateError,
)
from agentgym.core.parsing import ParsedAction, ParsedCall, get_parser, parse_action
from agentgym.core.spaces import AssistantTurn, Messages
from agentgym.core.styles import WorkerOwner, install_adapters, style_of
from agentgym.core.tools import InvalidArguments, Tool, ToolCallFailed, clip
from agentgym.core.types import Action, Message, Observation, tool_message

__all__ = ["AgentEnv", "StepResult", "ToolReport"]

log = logging.getLogger(__name__)

StepResult = tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]

Phase = Literal["new", "running", "ended", "interrupted", "reset failed"]
"""Where an env is between its episodes; a step needs ``"running"``."""

_REFUSED_WHEN: dict[Phase, str] = {
    "new": "before reset()",
    "ended": "after the episode ended",
    "interrupted": "after the episode ended (its last step was cancelled or failed midway)",
    "reset failed": "after a reset() that raised",
}


@dataclass
class ToolReport:
    """How the tool calls of the last ``run_tool_calls`` went, for the step's ``info``:
    ``calls`` answered (malformed ones included); ``invalid``: malformed, to an unknown tool or
    with arguments that break its schema (the model's format errors); ``timed_out``: ran into a
    deadline (``tool_timeout``, or a tool's own: it calls ``note_timeout``)."""

    calls: int = 0
    invalid: int = 0
    timed_out: int = 0

    def note_timeout(self) -> None:
        self.timed_out += 1

    def invalid_action(self, parsed: ParsedAction) -> bool:
        """Whether the step was nothing but format errors: no call at all, or none valid."""
        return not parsed.has_calls or self.invalid >= self.calls


class AgentEnv(WorkerOwner, gym.Env[Observation, Action]):
    """A Gymnasium env whose observations are chat messages and whose actions are model turns.

    Args:
        tool_parser: name of the parser for tool calls written as text (``hermes`` by default;
            see :mod:`agentgym.core.parsing`).
        tool_timeout: seconds one tool call may run before it is answered with a timeout error.
        render_mode: ``"ansi"`` returns the last observation as text; ``"human"`` prints it.
    """

    # render_fps: Gymnasium's checker warns without it whenever render modes are declared.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}
    worker: ClassVar[Literal["thread", "process"]] = "thread"
    """Where a vector env runs this env: ``"thread"`` (in its process; synchronous methods on a
    worker thread of the env's own) or ``"process"`` (a child process each, for CPU-bound Python
    or code that may hang: ``agentgym.vector.process.ProcessEnv``)."""
    _phase: Phase = "new"  # a class default: some subclasses reset before calling __init__

    def __init__(
        self,
        *,
        tools: Sequence[Tool] = (),
        tool_parser: str = "hermes",
        tool_timeout: float | None = 30.0,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(
                "render_mode",
                render_mode,
                "is not supported by this env",
                f"use one of {self.metadata['render_modes']} or None",
            )
        if tool_timeout is not None and tool_timeout <= 0:
            raise ConfigError(
                "tool_timeout", tool_timeout, "must be positive", "pass seconds > 0 or None"
            )
        get_parser(tool_parser)  # fail at construction on an unknown name
        self.tools: tuple[Tool, ...] = tuple(tools)
        self.tool_parser = tool_parser
        self.tool_timeout = tool_timeout
        self.render_mode = render_mode
        self.observation_space = Messages()
        self.action_space = AssistantTurn(tool_names=[t.name for t in self.tools])
        self._last_observation: Observation = ()
        self._closed = False
        self._turn = 0
        self.tool_report = ToolReport()
        self._check_style()

    # --- the two styles -------------------------------------------------------------------------

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        install_adapters(cls, guard=True)

    def _check_style(self) -> None:
        if style_of(type(self), AgentEnv)["step"] is None:
            raise EnvDefinitionError(
                f"{type(self).__name__} implements neither step style. Fix: define the async pair "
                "`async def areset(self, *, seed=None, options=None)` and `async def astep(self, "
                "action)`, or the Gymnasium pair `def reset(self, *, seed=None, options=None)` and "
                "`def step(self, action)`"
            )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_worker", None)  # a thread does not pickle; a copy starts its own
        return state

    # --- the bases: seeding and state only ------------------------------------------------------
    # A subclass overrides one side of each pair (see agentgym.core.styles); these bases are what
    # ``super()`` reaches from either side, so they never call back into the subclass.

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start an episode. Subclasses call ``await super().areset(seed=seed, options=options)``
        (or ``super().reset(seed=seed)``) first: it seeds ``self.np_random`` through Gymnasium's
        ``Env.reset``."""
        return self._seed(seed, options)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start an episode (the Gymnasium style); ``super().reset(seed=seed)`` seeds
        ``self.np_random``. An async subclass gets a ``reset`` that runs its ``areset``."""
        return self._seed(seed, options)

    def _seed(
        self, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[Observation, dict[str, Any]]:
        if self._closed:
            raise EnvStateError(f"{type(self).__name__} was closed; make a new env to reset")
        gym.Env.reset(self, seed=seed, options=options)
        self._turn = 0
        self.tool_report = ToolReport()
        self._phase = "running"  # the subclass's reset may step; a raise undoes this
        return (), {}

    async def astep(self, action: Action) -> StepResult:
        """Apply one model turn; returns ``(new_messages, reward, terminated, truncated, info)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement astep or step")

    def step(self, action: Action) -> StepResult:
        """Apply one model turn (the Gymnasium style). An async subclass gets a ``step`` that
        runs its ``astep``."""
        raise NotImplementedError(f"{type(self).__name__} must implement step or astep")

    # --- the step-after-end guard: agentgym.core.styles reports the subclass's resets and steps

    def _reset_ended(self, ok: bool) -> None:
        self._phase = "running" if ok else "reset failed"

    def _step_starting(self) -> None:
        if self._closed:
            raise EnvStateError(f"{type(self).__name__} was closed; make a new env")
        if self._phase != "running":
            raise EnvStateError(
                f"{type(self).__name__}.step() called {_REFUSED_WHEN[self._phase]}; "
                "call reset() first"
            )

    def _step_ended(self, result: Any) -> None:
        if self._phase != "running":  # a step abandoned by its caller may finish later
            return
        if result is None:
            self._phase = "interrupted"
        elif isinstance(result, tuple) and len(result) == 5 and (result[2] or result[3]):
            self._phase = "ended"

    async def aclose(self) -> None:
        """Release what the env holds (sandboxes, servers). Subclasses end with
        ``await super().aclose()``; ``close()`` runs this at most once, and async owners (the
        vector env) check ``closed`` first."""
        self._mark_closed()

    def close(self) -> None:
        """Release what the env holds (the Gymnasium style); idempotent."""
        self._mark_closed()

    @property
    def closed(self) -> bool:
        return self._closed

    def render(self) -> str | None:  # type: ignore[override]
        text = "\n\n".join(
            f"[{m['role']}]\n{m.get('content') or ''}" for m in self._last_observation
        )
        if self.render_mode == "human":
            print(text)
            return None
        return text

    # --- tool plumbing --------------------------------------------------------------------------

    def tool_schemas(self) -> list[dict[str, Any]]:
        """Fresh copies of the declared tools' schemas, for ``info["tools"]``."""
        return [t.schema() for t in self.tools]

    def parse(self, action: Action) -> ParsedAction:
        """Split ``action`` into text and tool calls; call ids are unique within the episode."""
        self._turn += 1
        return parse_action(action, self.tool_parser, id_prefix=f"call_{self._turn}_")

    async def run_tool_calls(self, parsed: ParsedAction) -> tuple[Message, ...]:
        """Answer every call in ``parsed``: run the well-formed ones concurrently, each under
        ``tool_timeout``; malformed calls, unknown tools, bad arguments, failures and timeouts
        all become tool messages. Order follows the calls' order in the action."""
        by_name = {t.name: t for t in self.tools}
        self.tool_report = report = ToolReport(calls=len(parsed.calls) + len(parsed.malformed))
        report.invalid = len(parsed.malformed)

        async def answer(call: ParsedCall) -> Message:
            name = call.name if call.name in by_name else clip(call.name, 64)
            return tool_message(await self._run_one(by_name.get(call.name), call), call.id, name)

        results = await asyncio.gather(*(answer(c) for c in parsed.calls))
        errors = [
            tool_message(
                f"Error: malformed tool call: {clip(m.error)}", m.id, clip(m.name, 64) or "invalid"
            )
            for m in parsed.malformed
        ]
        ids = parsed.order or [c.id for c in [*parsed.calls, *parsed.malformed]]
        order = {call_id: i for i, call_id in enumerate(ids)}
        return tuple(sorted([*results, *errors], key=lambda m: order.get(m["tool_call_id"], 0)))

    async def _run_one(self, found: Tool | None, call: ParsedCall) -> str:
        if found is None:
            self.tool_report.invalid += 1
            names = ", ".join(t.name for t in self.tools) or "none"
            return f"Error: unknown tool {clip(call.name, 64)!r}; available tools: {names}"
        try:
            async with deadline(self.tool_timeout, f"tool {call.name}"):
                return await found.call(call.arguments)
        except InvalidArguments as e:
            self.tool_report.invalid += 1
            return f"Error: {e}"
        except ToolCallFailed as e:
            return f"Error: {e}"
        except DeadlineExceeded as e:
            self.tool_report.note_timeout()
            return f"Error: {e}"
        except Exception as e:  # a tool bug must not end a training run; it is logged loudly
            log.exception("tool %s raised on arguments %r", call.name, call.arguments)
            return f"Error: tool {call.name} failed: {type(e).__name__}: {clip(str(e))}"
