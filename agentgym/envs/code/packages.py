"""What model-written code may import beyond the standard library, checked in the sandbox.

The default is ``SOLUTION_PACKAGES`` (numpy, sympy): agentgym's image is built with them and
``scripts/docker_setup.sh`` installs them for the local backend's ``/usr/bin/python3``. A sandbox
that lacks one would fail correct answers, so the env checks when it opens one and reports an
infrastructure error naming the fix instead of scoring 0.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from agentgym.core.errors import ConfigError, SandboxUnavailable
from agentgym.sandbox import Limits, Sandbox
from agentgym.sandbox.image_tag import SOLUTION_PACKAGES

__all__ = ["DEFAULT_PACKAGES", "check_packages", "missing_module_hint", "package_names"]

DEFAULT_PACKAGES: tuple[str, ...] = tuple(SOLUTION_PACKAGES)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_PROBE = (
    "import importlib.util, sys\n"
    "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
)
_MISSING = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z0-9_.]+)'")
FIX = (
    "bash scripts/docker_setup.sh installs the default ones for both backends; for others, "
    "install them for this machine's /usr/bin/python3 (apt-get install python3-<name>; the local "
    "backend), or build an image with them (python -m agentgym.sandbox.images build --tag "
    "my/python:1 --package python3-<name>) and pass image='my/python:1' with sandbox='docker'"
)


def package_names(packages: object) -> tuple[str, ...]:
    """``packages`` checked: a sequence of module names (``ConfigError`` otherwise)."""
    if packages is None:
        return DEFAULT_PACKAGES
    if isinstance(packages, str) or not isinstance(packages, Sequence):
        raise ConfigError(
            "packages", packages, "must be a list of module names", "pass e.g. ['numpy', 'sympy']"
        )
    for name in packages:
        if not (isinstance(name, str) and _NAME.match(name)):
            raise ConfigError(
                "packages", packages, f"{name!r} is not a module name", "pass e.g. ['numpy']"
            )
    return tuple(packages)


async def check_packages(sandbox: Sandbox, packages: Sequence[str], limits: Limits) -> None:
    """Raise ``SandboxUnavailable`` naming the fix unless ``sandbox``'s ``python3`` (as the
    grader starts it: ``-I``, no user site) finds every module of ``packages``."""
    if not packages:
        return
    run = await sandbox.run(["python3", "-I", "-c", _PROBE, *packages], timeout=60, limits=limits)
    missing = run.stdout.split() if run.ok else list(packages)
    if missing:
        why = "" if run.ok else f" (the probe failed: {run.stderr.strip()[-300:]})"
        raise SandboxUnavailable(
            f"Code-v0 grades answers that may import {', '.join(packages)}, but the "
            f"{sandbox.backend} sandbox's python3 lacks {', '.join(missing)}{why}. Fix: {FIX}; "
            "or pass packages=[...] naming only what the sandbox has"
        )


def missing_module_hint(stderr: str, packages: Sequence[str]) -> str:
    """A line for the model when ``stderr`` shows an import of a module the sandbox lacks."""
    match = _MISSING.search(stderr)
    if match is None:
        return ""
    top = match.group(1).split(".")[0]
    if top in sys.stdlib_module_names or top in {p.split(".")[0] for p in packages}:
        return ""
    offered = (
        f"the standard library and {', '.join(packages)}" if packages else "the standard library"
    )
    return f"\nModule {top!r} is not installed here: your code may import {offered}."
