"""Shared server sessions for stateless servers (``session="pooled"``).

Every env of a process that names the same servers (on the same event loop) shares one
``ServerGroup``: no server start per episode, and one turn's calls from many envs run
concurrently over the same connections. A broken group is closed and replaced at the next
``acquire``; the last env to ``release`` closes it.

Only for servers whose tools keep no state between episodes, or keep it per episode under the
``_meta`` key ``"agentgym/episode"`` (the shipped store server does): otherwise episodes see each
other's changes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from agentgym.envs.mcp.config import ServerConfig
from agentgym.envs.mcp.session import ServerGroup

__all__ = ["acquire", "release"]


@dataclass
class _Entry:
    users: set[int] = field(default_factory=set)
    group: ServerGroup | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


_Key = tuple[asyncio.AbstractEventLoop, tuple[ServerConfig, ...], tuple[tuple[str, Any], ...]]
_ENTRIES: dict[_Key, _Entry] = {}


def _key(configs: tuple[ServerConfig, ...], options: dict[str, Any]) -> _Key:
    return (asyncio.get_running_loop(), configs, tuple(sorted(options.items())))


async def acquire(user: object, configs: tuple[ServerConfig, ...], **options: Any) -> ServerGroup:
    """The started group shared by every user of these servers on this loop (started, or
    replaced when broken, as needed). ``options`` are ``ServerSession`` keyword arguments."""
    entry = _ENTRIES.setdefault(_key(configs, options), _Entry())
    entry.users.add(id(user))
    async with entry.lock:
        if entry.group is not None and entry.group.broken:
            old, entry.group = entry.group, None
            await old.close()
        if entry.group is None:
            group = ServerGroup(configs, **options)
            await group.start()
            entry.group = group
        return entry.group


async def release(user: object, configs: tuple[ServerConfig, ...], **options: Any) -> None:
    """``user`` is done; the last user closes the group."""
    key = _key(configs, options)
    entry = _ENTRIES.get(key)
    if entry is None:
        return
    entry.users.discard(id(user))
    if entry.users:
        return
    del _ENTRIES[key]
    if entry.group is not None:
        await entry.group.close()
