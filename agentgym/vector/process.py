"""``ProcessEnv``: a registered env made and run in a child process of its own.

For envs that ask for it (``worker = "process"`` on the class) or when the vector env is told to
(``workers="process"``): synchronous Python that holds the GIL for long, or code that can hang
where a thread cannot be stopped. A ``ProxyEnv`` over a ``PipeTransport``
(``agentgym.vector.transports.pipe``).

Isolation: a call cancelled by its deadline, a child that dies or a broken pipe kills the child;
a failed step ends that episode with ``info["infra_error"]`` and the next reset starts a fresh
child. The child exits when its parent does, and ``close`` kills it if it does not end in time.
An exception of the env raises ``RemoteEnvError`` with its type name and message.
"""

from __future__ import annotations

from typing import Any

from agentgym.vector.proxy import ProxyEnv
from agentgym.vector.transports.pipe import PipeTransport

__all__ = ["ProcessEnv"]


class ProcessEnv(ProxyEnv):
    """A proxy ``AgentEnv`` whose env lives in a child process (see the module docstring).

    Args:
        env_id: a registered id (made in the child with ``gym.make``).
        kwargs: its constructor arguments (picklable).
        start_timeout: seconds the child may take to make the env.
    """

    transport: PipeTransport

    def __init__(
        self, env_id: str, kwargs: dict[str, Any] | None = None, *, start_timeout: float = 60.0
    ) -> None:
        self.env_id, self.env_kwargs = env_id, dict(kwargs or {})
        super().__init__(PipeTransport(env_id, kwargs, start_timeout=start_timeout))

    @property
    def pid(self) -> int | None:
        """The child's process id (``None`` when none runs)."""
        return self.transport.pid
