"""``PipeTransport`` satisfies the ``Transport`` contract, and leaves no child behind."""

from __future__ import annotations

import asyncio

from agentgym.vector.transports.pipe import PipeTransport

from .contract import check_transport


def test_the_pipe_transport_keeps_the_contract() -> None:
    transport = PipeTransport("agentgym/FrozenLake-v0")
    pids: list[int | None] = []
    asyncio.run(
        check_transport(transport, "```right```", started=lambda: pids.append(transport.pid))
    )
    assert len(pids) == 2
    assert None not in pids
    assert pids[0] != pids[1]
    assert transport.pid is None
