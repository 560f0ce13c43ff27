"""``OpenEnvTransport`` satisfies the ``Transport`` contract, against a small OpenEnv server in
this process (``tests/envs/remote/test_serve_env.py`` plays ``agentgym serve-env`` itself)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from agentgym.vector.transports.openenv import OpenEnvTransport

from .contract import check_transport


async def session(ws: ServerConnection) -> None:
    """One session's env: reset shows the seed, a step before reset is the env's error."""
    seed = None
    async for raw in ws:
        message: dict[str, Any] = json.loads(raw)
        if message["type"] == "close":
            break
        if message["type"] == "reset":
            seed = message["data"].get("seed")
        elif seed is None:
            error = {"code": "EXECUTION_ERROR", "message": "EnvStateError: step before reset"}
            await ws.send(json.dumps({"type": "error", "data": error}))
            continue
        text = f"task {seed}" if message["type"] == "reset" else message["data"]["message"]
        obs = {"messages": [{"role": "user", "content": text}], "info": {}, "terminated": False}
        data = {"observation": obs, "reward": 0.0, "done": False}
        await ws.send(json.dumps({"type": "observation", "data": data}))


def test_the_openenv_transport_keeps_the_contract() -> None:
    async def check() -> None:
        async with serve(session, "127.0.0.1", 0) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            await check_transport(OpenEnvTransport(f"ws://127.0.0.1:{port}"), "hello")

    asyncio.run(check())
