"""Env registration with metadata, listing, "did you mean", and plugin discovery.

``register`` wraps ``gymnasium.register`` (so ``gym.make`` and ``gym.make_vec`` work on every id)
and records what Gymnasium's spec has no room for: the env family, tags, the pip extras it needs
and its reward range. Every id also gets a vector entry point, so
``gym.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point")`` builds an
``AgentVectorEnv``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentgym.core.errors import RegistryError, UnknownEnvError
from agentgym.registry.plugins import PluginStatus, load_plugins, plugins

__all__ = [
    "EnvInfo",
    "PluginStatus",
    "env_info",
    "list_envs",
    "load_plugins",
    "make",
    "plugins",
    "register",
    "resolve_id",
]

# Gymnasium's id grammar: [namespace/]Name[-vN]; agentgym's own ids always carry a version.
_ID_RE = re.compile(r"^(?:(?P<ns>[\w:.-]+)/)?(?P<name>[\w:.-]+?)(?:-v(?P<version>\d+))?$")
_AGENTGYM_ID_RE = re.compile(r"^agentgym/[A-Z][A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)*-v\d+$")
VECTOR_ENTRY_MODULE = "agentgym.vector.entry"


@dataclass(frozen=True)
class EnvInfo:
    """What agentgym knows about a registered env beyond Gymnasium's ``EnvSpec``."""

    id: str
    entry_point: str
    family: str
    tags: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    reward_range: tuple[float, float] = (0.0, 1.0)
    description: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> gym.envs.registration.EnvSpec:
        return gym.spec(self.id)


_ENVS: dict[str, EnvInfo] = {}


def register(
    id: str,
    entry_point: str,
    *,
    family: str | None = None,
    tags: Iterable[str] = (),
    extras: Iterable[str] = (),
    reward_range: tuple[float, float] = (0.0, 1.0),
    description: str = "",
    max_episode_steps: int | None = None,
    nondeterministic: bool = False,
    **kwargs: Any,
) -> EnvInfo:
    """Register an env with Gymnasium and record its metadata.

    Args:
        id: ``namespace/Name[-Variant]-vN``; ids under ``agentgym/`` must match that exactly.
        entry_point: ``"module:Class"``; the module is imported only when the env is made.
        family: the env family (defaults to the name before the first ``-``).
        tags: free-form labels shown by ``agentgym list`` (``"multi-turn"``, ``"tools"``).
        extras: pip extras the env needs (``pip install agentgym[<extra>]``).
        reward_range: the smallest and largest total reward of an episode.
        description: one line for ``agentgym list``.
        max_episode_steps: passed to Gymnasium (adds a ``TimeLimit`` wrapper).
        nondeterministic: passed to Gymnasium; the determinism checks skip such envs.
        **kwargs: default constructor arguments.
    """
    match = _ID_RE.match(id)
    if match is None or (id.startswith("agentgym/") and not _AGENTGYM_ID_RE.match(id)):
        raise RegistryError(
            f"env id {id!r} breaks the id grammar. Fix: use 'namespace/Name[-Variant]-vN', "
            "e.g. 'agentgym/FrozenLake-v0' or 'myorg/MyEnv-v0'."
        )
    if ":" not in entry_point:
        raise RegistryError(
            f"entry_point {entry_point!r} for {id!r} is not a 'module:attribute' string. "
            "Fix: pass e.g. 'mypackage.envs:MyEnv' so the module loads only when the env is made."
        )
    if reward_range[0] > reward_range[1]:
        raise RegistryError(
            f"reward_range {reward_range!r} for {id!r} has min > max. Fix: swap them."
        )
    gym.register(
        id=id,
        entry_point=entry_point,
        # A string (not a partial) keeps the spec JSON-serialisable; see agentgym.vector.entry.
        vector_entry_point=f"{VECTOR_ENTRY_MODULE}:{id}",
        max_episode_steps=max_episode_steps,
        nondeterministic=nondeterministic,
        kwargs=kwargs,
    )
    info = EnvInfo(
        id=id,
        entry_point=entry_point,
        family=family or match.group("name").split("-")[0],
        tags=tuple(tags),
        extras=tuple(extras),
        reward_range=(float(reward_range[0]), float(reward_range[1])),
        description=description,
        kwargs=dict(kwargs),
    )
    _ENVS[id] = info
    return info


def list_envs(*, family: str | None = None, tag: str | None = None) -> list[EnvInfo]:
    """Every env registered through ``agentgym.register`` (built-in and plugins), by id."""
    return [
        info
        for env_id, info in sorted(_ENVS.items())
        if (family is None or info.family == family) and (tag is None or tag in info.tags)
    ]


def _suggestions(env_id: str, candidates: Sequence[str]) -> list[str]:
    lowered = {c.lower(): c for c in candidates}
    exact = [c for c in candidates if c.lower() == env_id.lower()]
    unversioned = [c for c in candidates if c.lower().startswith(env_id.lower() + "-v")]
    close = [
        lowered[c] for c in difflib.get_close_matches(env_id.lower(), lowered, n=3, cutoff=0.6)
    ]
    return list(dict.fromkeys([*exact, *sorted(unversioned, reverse=True), *close]))


def resolve_id(env_id: str) -> str:
    """``env_id`` if Gymnasium knows it; otherwise ``UnknownEnvError`` with suggestions."""
    if env_id in gym.registry:
        return env_id
    ours = list(_ENVS)
    others = [k for k in gym.registry if k not in _ENVS]
    raise UnknownEnvError(env_id, _suggestions(env_id, ours) or _suggestions(env_id, others))


def env_info(env_id: str) -> EnvInfo:
    """Metadata of an env registered through ``agentgym.register``."""
    resolve_id(env_id)
    if env_id not in _ENVS:
        raise UnknownEnvError(env_id, [])
    return _ENVS[env_id]


def make(env_id: str, **kwargs: Any) -> gym.Env[Any, Any]:
    """``gym.make`` with agentgym's "did you mean" for unknown ids."""
    return gym.make(resolve_id(env_id), **kwargs)
