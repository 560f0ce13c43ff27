"""MCP server configurations: how the env reaches a server, given as plain data.

A server is one dict (a config file's JSON maps onto it directly)::

    {"command": "python", "args": ["-m", "my.server"], "env": {"KEY": "v"}, "cwd": "/srv"}  # stdio
    {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ..."}}        # HTTP

Optional keys for both: ``"name"`` (shown in errors; defaults to the command or host) and
``"prefix"`` (prepended to the server's tool names, e.g. ``"time_"``: needed when two servers
declare the same tool name). The values of ``"headers"`` and ``"env"`` (tokens, keys) are never
shown in an error message.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from agentgym.core.errors import ConfigError
from agentgym.core.keyvalue import NOT_SHOWN

__all__ = ["STORE_SERVER", "ServerConfig", "parse_servers"]

STORE_SERVER: dict[str, Any] = {
    "command": sys.executable,
    "args": ["-m", "agentgym.envs.mcp.servers.store"],
}
"""The store / inventory server shipped with agentgym, over stdio (the env's default)."""

_STDIO_KEYS = frozenset({"command", "args", "env", "cwd", "name", "prefix"})
_HTTP_KEYS = frozenset({"url", "headers", "name", "prefix"})
_EXAMPLE = (
    '{"command": "python", "args": ["-m", "my.server"]} or {"url": "http://127.0.0.1:8000/mcp"}'
)


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server, over stdio (``command``) or streamable HTTP (``url``). Hashable."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    prefix: str = ""

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def describe(self) -> str:
        """The command line or URL, for messages."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        return str(self.url)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form this config was parsed from (defaults left out)."""
        if self.command is not None:
            data: dict[str, Any] = {"command": self.command, "args": list(self.args)}
            if self.env:
                data["env"] = dict(self.env)
            if self.cwd is not None:
                data["cwd"] = self.cwd
        else:
            data = {"url": self.url}
            if self.headers:
                data["headers"] = dict(self.headers)
        if self.prefix:
            data["prefix"] = self.prefix
        return {"name": self.name, **data}


def _strings(where: str, value: object, fix: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(where, value, "must be a list of strings", fix)
    if not all(isinstance(item, str) for item in value):
        raise ConfigError(where, value, "must hold only strings", fix)
    return tuple(value)


_SECRET_KEYS = ("headers", "env")


def _shown(value: object) -> object:
    """``value`` for an error message: the values of a server's headers and env hidden."""
    if isinstance(value, ServerConfig):
        value = value.to_dict()
    if not isinstance(value, Mapping):
        return value
    return {
        k: {name: NOT_SHOWN for name in v} if k in _SECRET_KEYS and isinstance(v, Mapping) else v
        for k, v in value.items()
    }


def _string_map(where: str, value: object) -> tuple[tuple[str, str], ...]:
    """Headers or env vars: their values are never shown (they hold tokens and keys)."""
    fix = 'pass a dict of strings, e.g. {"KEY": "value"}'
    if not isinstance(value, Mapping):
        raise ConfigError(where, NOT_SHOWN, "must be a dict of strings", fix)
    bad = [str(k) for k, v in value.items() if not (isinstance(k, str) and isinstance(v, str))]
    if bad:
        hidden = dict.fromkeys(map(str, value), NOT_SHOWN)
        raise ConfigError(where, hidden, f"must map strings to strings (not so: {bad})", fix)
    return tuple(sorted(value.items()))


def _optional_string(where: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigError(where, value, "must be a string", f"pass a string or leave {where} out")
    return value


def _parse_stdio(where: str, raw: Mapping[str, Any]) -> ServerConfig:
    command = raw["command"]
    if not isinstance(command, str) or not command.strip():
        raise ConfigError(f"{where}['command']", command, "must be a non-empty string", _EXAMPLE)
    args = _strings(f"{where}['args']", raw.get("args", []), 'e.g. "args": ["-m", "my.server"]')
    env = _string_map(f"{where}['env']", {} if raw.get("env") is None else raw["env"])
    cwd = _optional_string(f"{where}['cwd']", raw.get("cwd"))
    name = _optional_string(f"{where}['name']", raw.get("name"))
    prefix = _optional_string(f"{where}['prefix']", raw.get("prefix")) or ""
    default_name = " ".join([command.rsplit("/", 1)[-1], *args])[:80]
    return ServerConfig(name or default_name, command, args, env, cwd, prefix=prefix)


def _parse_http(where: str, raw: Mapping[str, Any]) -> ServerConfig:
    url = raw["url"]
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        fix = 'pass the server\'s endpoint, e.g. "http://127.0.0.1:8000/mcp"'
        raise ConfigError(f"{where}['url']", url, "must be an http:// or https:// URL", fix)
    headers = _string_map(
        f"{where}['headers']", {} if raw.get("headers") is None else raw["headers"]
    )
    name = _optional_string(f"{where}['name']", raw.get("name"))
    prefix = _optional_string(f"{where}['prefix']", raw.get("prefix")) or ""
    return ServerConfig(name or parts.netloc, url=url, headers=headers, prefix=prefix)


def parse_server(raw: object, where: str = "server") -> ServerConfig:
    """One server dict (or an already parsed ``ServerConfig``) as a ``ServerConfig``."""
    if isinstance(raw, ServerConfig):
        return raw
    if not isinstance(raw, Mapping):
        raise ConfigError(where, raw, "must be a dict", f"pass {_EXAMPLE}")
    has_command, has_url = "command" in raw, "url" in raw
    if has_command == has_url:
        rule = "has both 'command' and 'url'" if has_command else "has neither 'command' nor 'url'"
        raise ConfigError(where, _shown(raw), rule, f"pass exactly one, e.g. {_EXAMPLE}")
    allowed = _STDIO_KEYS if has_command else _HTTP_KEYS
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(
            where, _shown(raw), f"has unknown keys {unknown}", f"use {sorted(allowed)}"
        )
    return _parse_stdio(where, raw) if has_command else _parse_http(where, raw)


def parse_servers(servers: object) -> tuple[ServerConfig, ...]:
    """``servers`` (one dict or a list of them) as ``ServerConfig``s; ``ConfigError`` names
    the bad value and the fix."""
    if isinstance(servers, Mapping | ServerConfig):
        servers = [servers]
    if isinstance(servers, str) or not isinstance(servers, Sequence) or not servers:
        raise ConfigError("servers", servers, "must be a non-empty list of dicts", f"[{_EXAMPLE}]")
    configs = tuple(parse_server(raw, f"servers[{i}]") for i, raw in enumerate(servers))
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        fix = 'give each server a distinct "name"'
        raise ConfigError("servers", [_shown(c) for c in configs], "names repeat", fix)
    return configs
