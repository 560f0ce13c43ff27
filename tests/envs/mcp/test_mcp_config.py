"""Server configs and constructor arguments: every mistake names the value and the fix."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym
from agentgym.envs.mcp.config import ServerConfig, parse_servers
from agentgym.error import ConfigError


def test_stdio_and_http_configs_parse() -> None:
    stdio, http = parse_servers(
        [
            {"command": "python", "args": ["-m", "x"], "env": {"A": "1"}, "prefix": "x_"},
            {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "t"}},
        ]
    )
    assert (stdio.transport, stdio.args, dict(stdio.env), stdio.prefix) == (
        "stdio",
        ("-m", "x"),
        {"A": "1"},
        "x_",
    )
    assert (http.transport, http.name, dict(http.headers)) == (
        "http",
        "127.0.0.1:8000",
        {"Authorization": "t"},
    )
    assert parse_servers({"command": "srv"}) == (ServerConfig("srv", "srv"),)
    assert parse_servers(stdio.to_dict())[0] == stdio
    hash(stdio)  # configs key caches and pools


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ([], "non-empty list"),
        ("python -m x", "non-empty list"),
        ([{"args": ["x"]}], "neither 'command' nor 'url'"),
        ([{"command": "x", "url": "http://h/mcp"}], "both 'command' and 'url'"),
        ([{"command": "x", "argv": []}], "unknown keys ['argv']"),
        ([{"command": ""}], "non-empty string"),
        ([{"command": "x", "args": "-m y"}], "list of strings"),
        ([{"command": "x", "args": ["-m", 3]}], "only strings"),
        ([{"command": "x", "env": {"A": 1}}], "map strings to strings"),
        ([{"url": "127.0.0.1:8000"}], "http:// or https:// URL"),
        ([{"url": "http://h/mcp", "headers": []}], "dict of strings"),
        ([{"command": "x"}, {"command": "x"}], "names repeat"),
        ([3], "must be a dict"),
    ],
)
def test_bad_server_configs_name_the_value_and_the_fix(servers: object, message: str) -> None:
    with pytest.raises(ConfigError, match="Fix:") as info:
        parse_servers(servers)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"session": "shared"}, "session='shared'"),
        ({"call_timeout": 0}, "call_timeout=0"),
        ({"max_turns": 0}, "max_turns=0"),
        ({"servers": [{"command": "x"}]}, "tasks=None: is required with your own servers"),
        ({"tasks": [{"prompt": "p"}]}, "neither 'answer' nor 'checks'"),
        ({"tasks": [{"prompt": "p", "checks": [{"tool": "nope", "equals": 1}]}]}, "names no tool"),
    ],
)
def test_bad_env_arguments_raise_config_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match="Fix:") as info:
        gym.make("agentgym/MCP-v0", **kwargs)
    assert message in str(info.value)


def test_a_server_that_cannot_start_is_an_infra_error() -> None:
    with pytest.raises(agentgym.error.InfraError, match="no-such-mcp-server"):
        gym.make(
            "agentgym/MCP-v0",
            servers={"command": "no-such-mcp-server"},
            tasks=[{"prompt": "p", "answer": "a"}],
        )


SECRET = "sk-mcp-sentinel-41c7"


@pytest.mark.parametrize(
    "servers",
    [
        [{"url": "http://h/mcp", "headers": {"Authorization": f"Bearer {SECRET}", "X-N": 3}}],
        [{"url": "http://h/mcp", "headers": {"Authorization": SECRET}, "command": "x"}],
        [{"url": "http://h/mcp", "headers": {"Authorization": SECRET}, "timeout": 5}],
        [{"command": "x", "env": {"API_KEY": SECRET}}, {"command": "x"}],
    ],
)
def test_errors_never_show_header_or_env_values(servers: list) -> None:
    """Headers and env vars hold tokens: an error names their keys, never their values."""
    with pytest.raises(ConfigError, match="Fix:") as info:
        parse_servers(servers)
    assert SECRET not in str(info.value)
    assert "<not shown>" in str(info.value)
