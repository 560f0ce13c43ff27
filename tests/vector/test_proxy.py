"""``ProxyEnv`` over the in-process transport: forwarding, failures of the transport as
``infra_error`` results, the env's own exceptions, deadlines, and what close leaves."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import gymnasium as gym
import pytest

from agentgym.core import AgentEnv, tool, user
from agentgym.core.env import StepResult
from agentgym.core.types import Action, Observation
from agentgym.error import EnvStateError, InfraError
from agentgym.vector.proxy import ProxyEnv
from agentgym.vector.transports.inprocess import InProcessTransport


class ToyEnv(AgentEnv):
    """The action says what the step does: ``"end"`` ends the episode, ``"infra"`` fails outside
    the model (``InfraError``), ``"bug"`` raises like a bug in the env, ``"hang"`` never
    answers; anything else is echoed."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}
    made: ClassVar[list[ToyEnv]] = []

    def __init__(self) -> None:
        @tool
        def look(what: str) -> str:
            """Look at something.

            Args:
                what: the thing.
            """
            return what

        super().__init__(tools=[look], tool_parser="json")
        ToyEnv.made.append(self)

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        task = int(self.np_random.integers(1000))
        return (user(f"task {task}"),), {"tools": self.tool_schemas(), "task": task}

    async def astep(self, action: Action) -> StepResult:
        if action == "infra":
            raise InfraError("the sandbox died")
        if action == "bug":
            raise RuntimeError("a bug in the env")
        if action == "hang":
            await asyncio.Event().wait()
        return (user(f"you said {action}"),), 1.0, action == "end", False, {"said": action}


@pytest.fixture
def proxy() -> Any:
    ToyEnv.made.clear()
    env = ProxyEnv(InProcessTransport(ToyEnv, name="toy"), step_timeout=5.0)
    yield env
    env.close()


def test_forwards_reset_and_step_and_mirrors_the_description(proxy: ProxyEnv) -> None:
    local = ToyEnv()
    assert proxy.reset(seed=3) == local.reset(seed=3)
    assert proxy.step("hello") == local.step("hello")
    assert proxy.action_space == local.action_space  # names the env's tool
    assert proxy.metadata == ToyEnv.metadata
    assert [t.name for t in proxy.tools] == ["look"]
    assert proxy.tool_parser == "json"
    assert proxy.step("end")[2] is True


def test_a_transport_failure_is_an_infra_error_step_and_the_next_reset_starts_afresh(
    proxy: ProxyEnv,
) -> None:
    proxy.reset(seed=0)
    obs, reward, terminated, truncated, info = proxy.step("infra")
    assert (obs, reward, terminated, truncated) == ((), 0.0, False, True)
    assert info["infra_error"] is True
    assert info["truncation_reason"] == "infra_error"
    assert info["error"] == "InfraError: the sandbox died"
    with pytest.raises(EnvStateError, match="after the episode ended"):
        proxy.step("again")
    first = ToyEnv.made[-1]
    proxy.reset(seed=0)
    assert ToyEnv.made[-1] is not first  # a fresh env
    assert first.closed  # the failed one was closed, not leaked
    assert proxy.step("hello")[1] == 1.0


def test_a_failed_start_is_an_infra_error_reset_and_its_step_ends_the_episode() -> None:
    makes = iter([ToyEnv, _refuse])
    proxy = ProxyEnv(InProcessTransport(lambda: next(makes)(), name="toy"))
    proxy.reset(seed=0)
    proxy.step("infra")  # the next reset starts a fresh env, which fails to start
    obs, info = proxy.reset(seed=1)
    assert obs == ()
    assert info == {"tools": [], "infra_error": True, "error": "InfraError: no sandbox left"}
    obs, reward, terminated, truncated, info = proxy.step("hello")
    assert (obs, reward, terminated, truncated) == ((), 0.0, False, True)
    assert info["error"] == "InfraError: no sandbox left"
    proxy.close()


def _refuse() -> AgentEnv:
    raise InfraError("no sandbox left")


def test_the_envs_own_exception_reaches_the_caller_and_keeps_the_env(proxy: ProxyEnv) -> None:
    proxy.reset(seed=0)
    with pytest.raises(RuntimeError, match="a bug in the env"):
        proxy.step("bug")
    made = len(ToyEnv.made)
    proxy.reset(seed=0)
    assert len(ToyEnv.made) == made  # not an infrastructure failure: the same env plays on


def test_the_step_deadline_is_an_infra_error_and_a_cancelled_step_remakes_the_env() -> None:
    ToyEnv.made.clear()
    proxy = ProxyEnv(InProcessTransport(ToyEnv, name="toy"), step_timeout=0.05)

    async def play() -> tuple[Any, int, int]:
        await proxy.areset(seed=0)
        timed_out = await proxy.astep("hang")
        await proxy.areset(seed=0)
        made = len(ToyEnv.made)
        with pytest.raises(TimeoutError):  # the caller's own deadline cancels the step
            await asyncio.wait_for(proxy.astep("hang"), 0.01)
        await proxy.areset(seed=0)
        return timed_out, made, len(ToyEnv.made)

    (obs, _, _, truncated, info), made, after = asyncio.run(play())
    assert (obs, truncated, info["infra_error"]) == ((), True, True)
    assert "DeadlineExceeded" in info["error"]
    assert made == 2  # the env that hung past the proxy's deadline was replaced
    assert after == 3  # and so was the one whose step its caller cancelled
    proxy.close()


def test_close_closes_the_env_and_every_later_call_is_refused(proxy: ProxyEnv) -> None:
    with pytest.raises(EnvStateError, match="before reset"):
        proxy.step("hello")
    proxy.reset(seed=0)
    proxy.close()
    proxy.close()  # idempotent
    assert ToyEnv.made[-1].closed
    assert not proxy.transport.alive()
    with pytest.raises(EnvStateError, match="was closed"):
        proxy.step("hello")
    with pytest.raises(EnvStateError, match="was closed"):
        proxy.reset(seed=0)


def test_a_fresh_env_per_reset_continues_the_proxys_seeded_stream() -> None:
    def play() -> list[Any]:
        make = InProcessTransport(lambda: gym.make("agentgym/FrozenLake-v0").unwrapped)
        proxy = ProxyEnv(make, fresh_env_per_reset=True)
        try:
            return [proxy.reset(seed=5)[0], proxy.reset()[0], proxy.reset()[0]]
        finally:
            proxy.close()

    first, second = play(), play()
    assert first == second
    assert first[1] != first[2]  # each reset without a seed draws a new one
