"""``InProcessTransport``: the env itself, in this process.

The ``Transport`` with nothing between the proxy and the env: what ``ProxyEnv`` does about
forwarding, deadlines and failures can be tested without a process, an actor or a server. The
env's exceptions reach the proxy as they are (an ``InfraError`` of the env is the transport's
failure, anything else the env's own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentgym.core.env import AgentEnv
from agentgym.core.errors import InfraError
from agentgym.vector.proxy import Description, describe

__all__ = ["InProcessTransport"]


class InProcessTransport:
    """Makes its env with ``make`` at every ``start``, closing the one before.

    Args:
        make: a factory of the env (e.g. ``lambda: gym.make(env_id).unwrapped``).
        name: how messages name the env.
    """

    def __init__(self, make: Callable[[], AgentEnv], name: str | None = None) -> None:
        self.make = make
        self.name = name or "in-process env"
        self.env: AgentEnv | None = None
        self.starts = 0  # how many envs were made: a test sees when the proxy starts afresh

    async def start(self) -> Description:
        await self._drop()
        self.env = self.make()
        self.starts += 1
        return describe(self.env)

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.env is None or self.env.closed:
            raise InfraError(f"{self.name} is gone (closed, or never started)")
        return await getattr(self.env, f"a{method}")(*args, **kwargs)

    def alive(self) -> bool:
        return self.env is not None and not self.env.closed

    async def close(self) -> None:
        await self._drop()

    async def _drop(self) -> None:
        env, self.env = self.env, None
        if env is not None and not env.closed:
            await env.aclose()
