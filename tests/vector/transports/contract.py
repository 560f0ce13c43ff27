"""What every ``Transport`` of ``agentgym.vector.proxy`` does (a helper module, not a test
module): each transport's test runs ``check_transport`` on one of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentgym.error import EnvStateError, InfraError
from agentgym.vector.proxy import Description, RemoteEnvError, Transport


async def check_transport(
    transport: Any,
    action: Any,
    *,
    env_raises: bool = True,
    started: Callable[[], None] = lambda: None,
) -> None:
    """Start, reset, step, start afresh, close; then a call is a transport failure.

    ``action``: a step the env answers. ``env_raises``: the env refuses a step before reset
    (``EnvStateError``), and the transport must say so as the env's error, not its own.
    ``started``: called after each start (to look at what the transport started).
    """
    assert isinstance(transport, Transport)
    assert isinstance(transport.name, str)
    assert transport.name
    description = await transport.start()
    started()
    assert set(description) <= set(Description.__annotations__)
    assert transport.alive()
    if env_raises:
        with pytest.raises((EnvStateError, RemoteEnvError)):
            await transport.call("step", action)
    observation, info = await transport.call("reset", seed=3, options=None)
    assert isinstance(observation, tuple)
    assert observation
    assert isinstance(info, dict)
    observation_2, reward, terminated, truncated, info_2 = await transport.call("step", action)
    assert isinstance(observation_2, tuple)
    assert isinstance(info_2, dict)
    assert isinstance(reward, float | int)
    assert isinstance(terminated, bool)
    assert isinstance(truncated, bool)
    await transport.start()  # a fresh env, seeded alike: the same first observation
    started()
    assert transport.alive()
    assert (await transport.call("reset", seed=3, options=None))[0] == observation
    await transport.close()
    assert not transport.alive()
    with pytest.raises(InfraError):
        await transport.call("reset", seed=3, options=None)
    await transport.close()  # twice: nothing left to free
