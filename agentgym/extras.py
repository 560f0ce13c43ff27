"""The extras (optional dependency groups) of agentgym and what this environment lacks of each.

Read from agentgym's installed metadata (``pyproject.toml``'s ``[project.optional-dependencies]``),
so the extras are declared in one place; ``agentgym <command>`` checks its extra with
``missing_requirements`` before importing anything of it.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Sequence

__all__ = ["DISTRIBUTION", "install_hint", "missing_requirements", "pip_install"]

DISTRIBUTION = "agentgymnasium"
"""The name agentgym is installed by (``pip install agentgymnasium``): ``agentgym`` on the package
index is an unrelated project. The import package and the ``agentgym/`` env ids keep their name."""

_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")


def _requirements_by_extra() -> dict[str, list[tuple[str, list[str]]]]:
    """extra -> its requirements as (distribution, the extras it names) from agentgym's installed
    metadata; {} where that metadata is absent (a source tree on ``sys.path``)."""
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    by_extra: dict[str, list[tuple[str, list[str]]]] = {}
    for line in requires:
        spec, _, marker = line.partition(";")
        extra, requirement = _EXTRA_MARKER.search(marker), _REQUIREMENT.match(spec)
        if extra and requirement:
            nested = [name.strip() for name in (requirement[2] or "").split(",") if name.strip()]
            by_extra.setdefault(extra[1], []).append((requirement[1], nested))
    return by_extra


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def missing_requirements(extra: str) -> list[str]:
    """The distributions ``agentgymnasium[extra]`` needs (its nested extras' included) that are not
    installed; [] when agentgym's metadata is not installed."""
    by_extra = _requirements_by_extra()
    missing: set[str] = set()
    seen: set[str] = set()
    todo = [extra]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for distribution, nested in by_extra.get(name, []):
            if distribution.lower() == DISTRIBUTION:
                todo += nested
            elif not _installed(distribution):
                missing.add(distribution)
    return sorted(missing)


def pip_install(*extras: str) -> str:
    """``pip install 'agentgymnasium[a,b]'`` for ``extras`` (``pip install agentgymnasium`` for
    none): the install line every message and doc gives."""
    if not extras:
        return f"pip install {DISTRIBUTION}"
    return f"pip install '{DISTRIBUTION}[{','.join(extras)}]'"


def install_hint(extras: Sequence[str]) -> str:
    """`` Fix: pip install 'agentgymnasium[a,b]'`` for ``extras``; "" for none."""
    return f" Fix: {pip_install(*extras)}" if extras else ""
