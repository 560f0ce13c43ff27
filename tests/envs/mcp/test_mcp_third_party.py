"""A third-party MCP server from PyPI (``mcp-server-time``, installed by the dev extra),
configured by its command line only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym

import agentgym  # noqa: F401

# The console script pip installed beside this interpreter: exactly what a user would type.
TIME_SERVER = {"command": str(Path(sys.executable).with_name("mcp-server-time"))}
TASKS = [
    {
        "id": "tokyo",
        "prompt": "It is 14:30 in UTC. What time is it in Tokyo? Answer as HH:MM.",
        "answer": "23:30",
        "solution": [
            [
                {
                    "name": "convert_time",
                    "arguments": {
                        "source_timezone": "UTC",
                        "time": "14:30",
                        "target_timezone": "Asia/Tokyo",
                    },
                }
            ]
        ],
    },
    {
        "id": "check",
        "prompt": "Find the time difference between UTC and Asia/Kolkata.",
        "checks": [
            {
                "tool": "convert_time",
                "arguments": {
                    "source_timezone": "UTC",
                    "time": "00:00",
                    "target_timezone": "Asia/Kolkata",
                },
                "path": "time_difference",
                "equals": "+5.5h",
            }
        ],
    },
]


def test_time_server_lists_tools_calls_one_and_verifies() -> None:
    assert Path(TIME_SERVER["command"]).exists(), "pip install -e '.[dev]' installs mcp-server-time"
    env = gym.make("agentgym/MCP-v0", servers=[TIME_SERVER], tasks=TASKS)
    try:
        _, info = env.reset(options={"task_id": "tokyo"})
        assert {t["function"]["name"] for t in info["tools"]} == {
            "get_current_time",
            "convert_time",
        }
        (call,) = TASKS[0]["solution"][0]
        obs, *_ = env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
        result = json.loads(obs[0]["content"])
        assert result["target"]["datetime"].endswith("T23:30:00+09:00")
        obs, *_ = env.step(
            '<tool_call>{"name": "convert_time", "arguments": {"source_timezone": "Mars/Base", '
            '"time": "14:30", "target_timezone": "UTC"}}</tool_call>'
        )
        assert obs[0]["content"].startswith("Error")
        assert "Mars/Base" in obs[0]["content"]
        *_, reward, terminated, _, _ = env.step("It is <answer>23:30</answer> in Tokyo.")
        assert (reward, terminated) == (1.0, True)
        env.reset(options={"task_id": "check"})
        *_, reward, _, _, info = env.step("Done.")
        assert reward == 1.0
        assert info["checks_passed"] == 1
    finally:
        env.close()
