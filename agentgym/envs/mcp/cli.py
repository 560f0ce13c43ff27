"""``agentgym mcp inspect``: list an MCP server's tools and try a call, for wiring up a server.

::

    agentgym mcp inspect -- python -m agentgym.envs.mcp.servers.store
    agentgym mcp inspect --call get_stock --arguments '{"sku": "KIT-100"}' -- python -m my.server
    agentgym mcp inspect --url http://127.0.0.1:8000/mcp --json

It connects exactly as ``agentgym/MCP-v0`` does (same config parsing, renaming and result
formatting), so what it prints is what a model would see.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError, DeadlineExceeded, InfraError
from agentgym.core.keyvalue import parse_pairs
from agentgym.core.tools import clip
from agentgym.envs.mcp.config import parse_server
from agentgym.envs.mcp.session import RemoteTool, ServerGroup

__all__ = ["add_mcp_arguments", "example_arguments", "run_mcp"]

EXIT_USAGE, EXIT_FAILED = 2, 1


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    subparsers = parser.add_subparsers(dest="mcp_command", metavar="SUBCOMMAND")
    inspect = subparsers.add_parser(
        "inspect",
        help="list a server's tools and try a call",
        description="List an MCP server's tools and try one call. Give the server's command "
        "after --, or --url for streamable HTTP.",
    )
    inspect.add_argument("--url", help="a streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp")
    inspect.add_argument(
        "--header", action="append", default=[], metavar="KEY=VALUE", help="HTTP header"
    )
    inspect.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="stdio server env var"
    )
    inspect.add_argument("--call", metavar="TOOL", help="the tool to try (default: the first)")
    inspect.add_argument("--arguments", metavar="JSON", help="its arguments as a JSON object")
    inspect.add_argument("--no-call", action="store_true", help="only list the tools")
    inspect.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    inspect.add_argument("--json", action="store_true", help="print the tool schemas as JSON")
    inspect.add_argument("server", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")


def _server_dict(args: argparse.Namespace) -> dict[str, Any]:
    command = list(args.server)
    if command[:1] == ["--"]:  # argparse keeps the separator on some Python versions
        command = command[1:]
    if args.url and command:
        raise ConfigError("server", args.url, "is given twice (--url and a command)", "pass one")
    if args.url:
        return {"url": args.url, "headers": parse_pairs(args.header, "--header", text=True)}
    if not command:
        fix = "agentgym mcp inspect -- python -m my.server, or --url http://host:port/mcp"
        raise ConfigError("server", None, "is missing", fix)
    return {
        "command": command[0],
        "args": command[1:],
        "env": parse_pairs(args.env, "--env", text=True),
    }


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a first try: defaults, first enum values, else a plain value per type."""
    plain = {"string": "example", "integer": 1, "number": 1.0, "boolean": False}
    arguments: dict[str, Any] = {}
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        prop = properties.get(name) or {}
        kind = prop.get("type")
        kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
        if "default" in prop:
            arguments[name] = prop["default"]
        elif prop.get("enum"):
            arguments[name] = prop["enum"][0]
        else:
            arguments[name] = {"array": [], "object": {}}.get(str(kind), plain.get(str(kind), ""))
    return arguments


def describe(tool: RemoteTool) -> str:
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    params = []
    for name, prop in properties.items():
        kind = prop.get("type", "any") if isinstance(prop, dict) else "any"
        params.append(f"{name}{'' if name in required else '?'}: {kind}")
    renamed = "" if tool.name == tool.remote_name else f" (server name {tool.remote_name!r})"
    summary = clip(" ".join(tool.description.split()), 120)
    return f"{tool.name}({', '.join(params)}){renamed}: {summary}"


async def _inspect(args: argparse.Namespace, config: Any) -> int:
    group = ServerGroup([config], connect_timeout=args.timeout)
    await group.start()
    try:
        tools = await group.list_tools(args.timeout)
        if args.json:
            print(json.dumps([t.schema() for t in tools], indent=2))
        else:
            print(f"{config.name} ({config.transport}): {len(tools)} tool(s)")
            for tool in tools:
                print(f"  {describe(tool)}")
        if args.no_call or not tools:
            return 0
        return await _try_call(args, group, tools)
    finally:
        await group.close()


async def _try_call(args: argparse.Namespace, group: ServerGroup, tools: tuple[Any, ...]) -> int:
    by_name = {t.name: t for t in tools}
    if args.call is not None and args.call not in by_name:
        print(f"agentgym mcp inspect: no tool {args.call!r}; see the list above", file=sys.stderr)
        return EXIT_USAGE
    tool = by_name[args.call] if args.call else tools[0]
    arguments = json.loads(args.arguments) if args.arguments else None
    if not isinstance(arguments, dict):
        arguments = example_arguments(tool.parameters)
    print(f"\ncall {tool.name}({json.dumps(arguments)}):")
    outcome = await group.sessions[tool.server].call(
        tool.remote_name, arguments, timeout=args.timeout
    )
    print(f"  {'error' if outcome.error else 'result'}: {clip(outcome.text, 2000)}")
    if outcome.structured is not None:
        print(f"  structured: {clip(json.dumps(outcome.structured), 2000)}")
    return 0


def run_mcp(args: argparse.Namespace) -> int:
    if args.mcp_command != "inspect":
        print("agentgym mcp: error: name a subcommand: inspect", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.arguments is not None and not isinstance(json.loads(args.arguments), dict):
            raise ConfigError("--arguments", args.arguments, "is not a JSON object", "'{}'")
        config = parse_server(_server_dict(args))
    except (ConfigError, json.JSONDecodeError) as e:
        print(f"agentgym mcp inspect: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return run_sync(_inspect(args, config))
    except (InfraError, DeadlineExceeded) as e:
        print(f"agentgym mcp inspect: the server failed: {e}", file=sys.stderr)
        return EXIT_FAILED
