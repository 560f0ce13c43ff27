"""Agent programs that tests train by name (``agentgym train --agent tests.gateway.agents:...``)."""

from __future__ import annotations

from typing import Any


async def chatter(client: Any, task: dict[str, Any]) -> float:
    """Two chat calls, the second continuing the first; the reward: how much it wrote."""
    messages: list[Any] = [{"role": "user", "content": task["question"]}]
    written = ""
    for _ in range(2):
        out = await client.chat.completions.create(
            model="agentgym-tiny", messages=messages, max_tokens=6
        )
        written += out.choices[0].message.content or ""
        messages += [out.choices[0].message, {"role": "user", "content": "Go on."}]
    return float(len(written))
