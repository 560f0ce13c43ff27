"""Env registration with metadata, listing, "did you mean", and plugin discovery.

``register`` wraps ``gymnasium.register`` (so ``gym.make`` and ``gym.make_vec`` work on every id)
and records what Gymnasium's spec has no room for: the env family, tags, the pip extras it needs
and its reward range. Every id also gets a vector entry point, so
``gym.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point")`` builds an
``AgentVectorEnv``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec

from agentgym.core.errors import RegistryError, UnknownEnvError
from agentgym.core.suggest import close_matches
from agentgym.registry.plugins import PluginStatus, load_plugins, plugins
from agentgym.registry.user_modules import import_user_module

__all__ = [
    "EntryPoint",
    "EnvInfo",
    "PluginStatus",
    "entry_point_name",
    "env_info",
    "list_envs",
    "load_plugins",
    "make",
    "plugins",
    "register",
    "resolve_id",
    "split_module",
]

# Gymnasium's id grammar: [namespace/]Name[-vN]; agentgym's own ids always carry a version.
_ID_RE = re.compile(r"^(?:(?P<ns>[\w:.-]+)/)?(?P<name>[\w:.-]+?)(?:-v(?P<version>\d+))?$")
_AGENTGYM_ID_RE = re.compile(r"^agentgym/[A-Z][A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)*-v\d+$")
VECTOR_ENTRY_MODULE = "agentgym.vector.entry"


EntryPoint = str | Callable[..., Any]


@dataclass(frozen=True)
class EnvInfo:
    """What agentgym knows about a registered env beyond Gymnasium's ``EnvSpec``."""

    id: str
    entry_point: EntryPoint | None
    family: str
    tags: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    reward_range: tuple[float, float] = (0.0, 1.0)
    description: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, float] = field(default_factory=dict)
    envs_per_actor: int | None = None

    @property
    def spec(self) -> gym.envs.registration.EnvSpec:
        return gym.spec(self.id)

    @property
    def entry_point_name(self) -> str:
        """The entry point as text: ``"module:attribute"`` for a callable too."""
        return entry_point_name(self.entry_point)


def entry_point_name(entry_point: EntryPoint | None) -> str:
    if entry_point is None or isinstance(entry_point, str):
        return entry_point or ""
    module = getattr(entry_point, "__module__", None) or "?"
    return f"{module}:{getattr(entry_point, '__qualname__', repr(entry_point))}"


_ENVS: dict[str, EnvInfo] = {}
MAKERS: dict[str, Callable[..., Any]] = {}
"""Ids that ``make`` hands to another maker: ``agentgym.registry.multiagent.register`` puts its
envs here (``gym.make`` makes only single-agent ``gymnasium.Env``s)."""


def _check_registration(
    id: str,
    entry_point: EntryPoint | None,
    vector_entry_point: Any,
    reward_range: tuple[float, float],
    kwargs: Any,
) -> re.Match[str]:
    match = _ID_RE.match(id)
    if match is None or (id.startswith("agentgym/") and not _AGENTGYM_ID_RE.match(id)):
        raise RegistryError(
            f"env id {id!r} breaks the id grammar. Fix: use 'namespace/Name[-Variant]-vN', "
            "e.g. 'agentgym/FrozenLake-v0' or 'myorg/MyEnv-v0'."
        )
    if entry_point is None and vector_entry_point is None:
        raise RegistryError(
            f"{id!r} has neither an entry_point nor a vector_entry_point. Fix: pass "
            "entry_point='mypackage.envs:MyEnv' (or the class itself)."
        )
    if isinstance(entry_point, str) and ":" not in entry_point:
        raise RegistryError(
            f"entry_point {entry_point!r} for {id!r} is not a 'module:attribute' string. "
            "Fix: pass e.g. 'mypackage.envs:MyEnv' (the module loads only when the env is made), "
            "or the class or factory itself."
        )
    if entry_point is not None and not isinstance(entry_point, str) and not callable(entry_point):
        raise RegistryError(
            f"entry_point {entry_point!r} for {id!r} is neither a 'module:attribute' string nor "
            "callable. Fix: pass 'mypackage.envs:MyEnv' or the class MyEnv."
        )
    if reward_range[0] > reward_range[1]:
        raise RegistryError(
            f"reward_range {reward_range!r} for {id!r} has min > max. Fix: swap them."
        )
    if kwargs is not None and not isinstance(kwargs, dict):
        raise RegistryError(
            f"kwargs {kwargs!r} for {id!r} is not a dict. Fix: pass the default constructor "
            "arguments as kwargs={'name': value}."
        )
    return match


def register(
    id: str,
    entry_point: EntryPoint | None = None,
    *,
    family: str | None = None,
    tags: Iterable[str] = (),
    extras: Iterable[str] = (),
    reward_range: tuple[float, float] = (0.0, 1.0),
    description: str = "",
    reward_threshold: float | None = None,
    nondeterministic: bool = False,
    max_episode_steps: int | None = None,
    order_enforce: bool = True,
    disable_env_checker: bool = False,
    additional_wrappers: tuple[WrapperSpec, ...] = (),
    vector_entry_point: Any = None,
    kwargs: dict[str, Any] | None = None,
    resources: dict[str, float] | None = None,
    envs_per_actor: int | None = None,
) -> EnvInfo:
    """Register an env with Gymnasium and record its metadata.

    Takes every argument of ``gymnasium.register``, with the same meaning, plus agentgym's
    metadata. Registering an id again replaces it, with Gymnasium's warning.

    Args:
        id: ``namespace/Name[-Variant]-vN``; ids under ``agentgym/`` must match that exactly.
        entry_point: ``"module:Class"`` (the module is imported only when the env is made) or the
            class or factory itself.
        family: the env family (defaults to the name before the first ``-``).
        tags: free-form labels shown by ``agentgym list`` (``"multi-turn"``, ``"tools"``).
        extras: pip extras the env needs (``pip install agentgymnasium[<extra>]``).
        reward_range: the smallest and largest total reward of an episode.
        description: one line for ``agentgym list``.
        reward_threshold, nondeterministic, max_episode_steps, order_enforce,
            disable_env_checker, additional_wrappers: as in ``gymnasium.register``
            (``nondeterministic`` envs skip the determinism checks).
        vector_entry_point: as in ``gymnasium.register``; by default an ``AgentVectorEnv``
            (``gym.make_vec(id, n, vectorization_mode="vector_entry_point")``).
        kwargs: default constructor arguments, as in ``gymnasium.register``.
        resources: what one env needs where it runs in a Ray actor (``workers="ray"``), as Ray
            resources: ``{"num_cpus": 1}`` for a container per env, ``memory`` in bytes, custom
            resources. Nothing declared: a light env (see ``agentgym.vector.ray_workers``).
        envs_per_actor: envs per Ray actor (``None``: 1 for envs that declare a CPU or more,
            16 for light ones).
    """
    match = _check_registration(id, entry_point, vector_entry_point, reward_range, kwargs)
    kwargs = dict(kwargs or {})
    gym.register(
        id=id,
        entry_point=entry_point,
        reward_threshold=reward_threshold,
        nondeterministic=nondeterministic,
        max_episode_steps=max_episode_steps,
        order_enforce=order_enforce,
        disable_env_checker=disable_env_checker,
        additional_wrappers=tuple(additional_wrappers),
        # A string (not a partial) keeps the spec JSON-serialisable; see agentgym.vector.entry.
        vector_entry_point=vector_entry_point or f"{VECTOR_ENTRY_MODULE}:{id}",
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
        kwargs=kwargs,
        resources=dict(resources or {}),
        envs_per_actor=envs_per_actor,
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
    unversioned = [c for c in candidates if c.lower().startswith(env_id.lower() + "-v")]
    exact = [c for c in candidates if c.lower() == env_id.lower()]
    close = close_matches(env_id, candidates, n=3)
    return list(dict.fromkeys([*exact, *sorted(unversioned, reverse=True), *close]))


def split_module(env_id: str) -> tuple[str | None, str]:
    """``"mymodule:MyEnv-v0"`` -> ``("mymodule", "MyEnv-v0")``, Gymnasium's form of an id
    whose module registers it; ``(None, env_id)`` for a plain id."""
    module, sep, rest = env_id.partition(":")
    if sep and rest and all(part.isidentifier() for part in module.split(".")):
        return module, rest
    return None, env_id


def resolve_id(env_id: str) -> str:
    """``env_id`` if Gymnasium knows it; ``"module:Env-v0"`` imports ``module`` first (as
    ``gym.make`` does) and answers ``"Env-v0"``; otherwise ``UnknownEnvError`` with
    suggestions."""
    if env_id in gym.registry:
        return env_id
    module, bare = split_module(env_id)
    if module is not None:
        import_user_module(module)
        env_id = bare
        if env_id in gym.registry:
            return env_id
    ours = list(_ENVS)
    others = [k for k in gym.registry if k not in _ENVS]
    raise UnknownEnvError(env_id, _suggestions(env_id, ours) or _suggestions(env_id, others))


def env_info(env_id: str) -> EnvInfo:
    """Metadata of an env registered through ``agentgym.register``."""
    env_id = resolve_id(env_id)
    if env_id not in _ENVS:
        raise UnknownEnvError(env_id, [])
    return _ENVS[env_id]


def make(env_id: str, **kwargs: Any) -> gym.Env[Any, Any]:
    """``gym.make`` with agentgym's "did you mean" for unknown ids; an id registered with a
    maker of its own (``MAKERS``: multi-agent envs) is made by it."""
    env_id = resolve_id(env_id)
    maker = MAKERS.get(env_id)
    if maker is not None:
        return maker(env_id, **kwargs)  # type: ignore[no-any-return]
    return gym.make(env_id, **kwargs)
