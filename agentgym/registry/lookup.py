"""The commands' env lookup: the user's modules imported, the id found and the constructor
arguments checked, before anything loads.

::

    env_id = prepare_env("mymodule:MyEnv-v0", {"size": 5}, imports=["mypkg.envs"])

``agentgym train``, ``eval``, ``play`` and ``serve-env`` call ``prepare_env`` first, so that an
unknown id (``did you mean``, and how to reach an id that the user's own code registers) or an
argument the env does not take (``did you mean``, and the valid names) fails in a line, before a
model loads or a run folder is made.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from agentgym.core.errors import ConfigError, UnknownEnvError
from agentgym.core.suggest import did_you_mean
from agentgym.registry import resolve_id, split_module
from agentgym.registry.user_modules import import_user_module

__all__ = [
    "add_env_arguments",
    "check_env_kwargs",
    "env_arguments",
    "find_env",
    "import_modules",
    "prepare_env",
]

OWN_ENV_HINT = (
    "An env that your own code registers: pass --env yourmodule:MyEnv-v0 (the module that "
    "registers it), or --import yourmodule (imports = [...] in a run file)."
)


def add_env_arguments(parser: argparse.ArgumentParser) -> None:
    """``--env-kwargs`` and ``--import``, as every command that makes an env takes them
    (``agentgym train`` declares the same two from its run fields)."""
    parser.add_argument(
        "--env-kwargs",
        action="extend",
        nargs="+",
        default=[],
        metavar="KEY=VALUE|JSON",
        help="env constructor arguments: KEY=VALUE items (VALUE read as JSON when it parses, "
        "else as text) or JSON objects; repeatable",
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first: it registers your own envs (repeatable)",
    )


def import_modules(names: Iterable[str], flag: str = "--import") -> None:
    """Import each module (its import registers the user's envs), from the working directory
    too, as ``python -m`` would; one that cannot be imported is a ``ConfigError``."""
    for name in names:
        if not all(part.isidentifier() for part in str(name).split(".")):
            raise ConfigError(flag, name, "is not a module name", "write e.g. mypkg.envs")
        try:
            import_user_module(name, from_cwd=True)
        except ImportError as error:
            raise ConfigError(
                flag,
                name,
                f"cannot be imported ({type(error).__name__}: {error})",
                "run from the folder that holds it, or install its package",
            ) from None


def find_env(env_id: str, imports: Iterable[str] = ()) -> str:
    """The registered id that ``env_id`` names (``"module:Env-v0"`` or ``"Env-v0"``), after
    importing ``imports`` and the id's module; ``UnknownEnvError`` with "did you mean" and
    how to reach an id registered by the user's own code."""
    module, bare = split_module(env_id)
    import_modules(imports)
    if module is not None:
        import_modules([module], "--env")
    try:
        return resolve_id(bare)
    except UnknownEnvError as error:
        raise UnknownEnvError(bare, error.suggestions, OWN_ENV_HINT) from None


def _creator(env_id: str) -> Any:
    creator = gym.spec(env_id).entry_point
    return load_env_creator(creator) if isinstance(creator, str) else creator


def env_arguments(env_id: str) -> list[str] | None:
    """The keyword arguments that making ``env_id`` takes: its entry point's (a class's
    ``__init__``) and ``gym.make``'s own; None when it takes any (``**kwargs``) or has no
    entry point to read."""
    creator = _creator(env_id)
    if creator is None:
        return None
    try:
        parameters = inspect.signature(creator).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: nothing to read
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [p.name for p in parameters if p.kind in keyword]
    made_by = inspect.signature(gym.make).parameters.values()
    own = [p.name for p in made_by if p.kind in keyword and p.name not in ("id", *names)]
    return names + own


def check_env_kwargs(env_id: str, kwargs: Mapping[str, Any], flag: str = "--env-kwargs") -> None:
    """``ConfigError`` for an argument that ``env_id``'s constructor does not take, with the
    closest name and the valid ones."""
    valid = env_arguments(env_id)
    if valid is None:
        return
    for name, value in kwargs.items():
        if name not in valid:
            rule = f"is not an argument of {env_id}"
            raise ConfigError(
                f"{flag} {name}", value, rule, did_you_mean(name, valid, kind="arguments")
            )


def prepare_env(
    env_id: str, kwargs: Mapping[str, Any] | None = None, imports: Iterable[str] = ()
) -> str:
    """``find_env`` then ``check_env_kwargs``: the registered id, once both pass."""
    found = find_env(env_id, imports)
    check_env_kwargs(found, kwargs or {})
    return found
