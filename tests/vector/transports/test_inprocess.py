"""``InProcessTransport`` satisfies the ``Transport`` contract."""

from __future__ import annotations

import asyncio

import gymnasium as gym

from agentgym.vector.transports.inprocess import InProcessTransport

from .contract import check_transport


def test_the_in_process_transport_keeps_the_contract() -> None:
    transport = InProcessTransport(lambda: gym.make("agentgym/FrozenLake-v0").unwrapped)
    asyncio.run(check_transport(transport, "```right```"))
