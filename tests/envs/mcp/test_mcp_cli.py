"""``agentgym mcp inspect``: list a server's tools and try a call."""

from __future__ import annotations

import argparse
import sys

import pytest

from agentgym.cli import main
from agentgym.envs.mcp.cli import _server_dict, example_arguments

STORE = [sys.executable, "-m", "agentgym.envs.mcp.servers.store"]


def test_inspect_lists_tools_and_tries_a_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "mcp",
                "inspect",
                "--call",
                "get_stock",
                "--arguments",
                '{"sku": "KIT-100"}',
                "--",
                *STORE,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "9 tool(s)" in out
    assert "place_order(customer_id: string, sku: string, quantity: integer" in out
    assert 'call get_stock({"sku": "KIT-100"})' in out
    assert '"warehouses"' in out


def test_inspect_default_call_json_and_url(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "inspect", "--json", "--url", store_url]) == 0
    out = capsys.readouterr().out
    assert '"name": "search_products"' in out
    assert "call search_products({})" in out  # the first tool, with example arguments


def test_inspect_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "inspect"]) == 2
    assert "agentgym mcp inspect -- python -m my.server" in capsys.readouterr().err
    assert main(["mcp", "inspect", "--", "no-such-mcp-server-command"]) == 1
    assert "no-such-mcp-server-command" in capsys.readouterr().err
    assert main(["mcp", "inspect", "--call", "nope", "--", *STORE]) == 2
    assert "no tool 'nope'" in capsys.readouterr().err
    assert main(["mcp", "inspect", "--arguments", "[1]", "--", *STORE]) == 2
    assert main(["mcp"]) == 2


def test_headers_and_server_env_vars_are_key_value_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = argparse.Namespace(server=["--", "srv"], url=None, env=["N=1", "A=b=c"], header=[])
    assert _server_dict(args)["env"] == {"N": "1", "A": "b=c"}  # text, not JSON
    args = argparse.Namespace(server=[], url="http://h/mcp", env=[], header=["X-Token=007"])
    assert _server_dict(args)["headers"] == {"X-Token": "007"}
    assert main(["mcp", "inspect", "--env", "NOVALUE", "--", *STORE]) == 2
    assert "is not KEY=VALUE. Fix: write e.g. --env NAME=value" in capsys.readouterr().err


def test_example_arguments_follow_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "string", "enum": ["x", "y"]},
            "c": {"type": "number", "default": 2.5},
            "d": {"type": ["array", "null"]},
            "e": {"type": "string"},
        },
        "required": ["a", "b", "c", "d"],
    }
    assert example_arguments(schema) == {"a": 1, "b": "x", "c": 2.5, "d": []}
