"""Which backend runs model-written code: secure by default, unisolated only when asked by name.

``resolve_sandbox(sandbox)`` turns an env's ``sandbox=`` argument into the backend that will
run the model's code, or refuses:

- ``"auto"`` (the default): ``"local"`` when bubblewrap can make sandboxes here; else
  ``"docker"`` when a local Docker daemon answers and holds agentgym's image; else
  ``SandboxUnavailable`` naming the fixes.
- ``"local"``: bubblewrap, else ``SandboxUnavailable``.
- ``"docker"``: a local daemon with the image, else ``SandboxUnavailable``.
- ``"unsafe-local"``: plain rlimited processes on this machine, with no isolation; it is used
  only when asked for by this name, and warns (``SandboxIsolationWarning``) once per process.

Envs resolve at construction, not at the first graded turn. A sandbox failure at grading time is
an ``infra_error`` sample that trainers drop, so a machine without isolation would otherwise
train for hours on nothing, silently; at construction the error reaches the user at
``gym.make``, before a model is loaded. The probes are cheap enough for that: bubblewrap's is one
``bwrap ... true`` per process (cached); Docker's is made only where bubblewrap cannot run (or
``"docker"`` is asked for): two HTTP requests on the daemon's unix socket within
``DOCKER_PROBE_TIMEOUT`` seconds, cached per process (a "no" only for ``NEGATIVE_TTL`` seconds,
so that starting the daemon helps without a restart, and 64 envs of a vector env do not each
wait on a daemon that hangs). What the probes see can change later: a daemon that goes away
makes sandboxes fail with ``SandboxError`` (an ``infra_error``), never a fall-back to running
unisolated. A missing image is not built here: building takes minutes and adds an image to the
daemon, which ``gym.make`` should not do behind the user's back; the error names the command.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable
from typing import Literal
from urllib.parse import quote

from agentgym.core.errors import ConfigError, SandboxIsolationWarning, SandboxUnavailable
from agentgym.extras import pip_install
from agentgym.sandbox import _bwrap
from agentgym.sandbox._dockerapi import socket_path
from agentgym.sandbox.image_tag import DEFAULT_IMAGE

__all__ = [
    "DOCKER_PROBE_TIMEOUT",
    "SANDBOXES",
    "Backend",
    "SandboxChoice",
    "check_sandbox",
    "resolve_sandbox",
    "warn_unisolated",
    "why_not_docker",
    "why_not_local",
]

SandboxChoice = Literal["auto", "local", "docker", "unsafe-local"]
Backend = Literal["local", "docker", "unsafe-local"]
SANDBOXES: tuple[str, ...] = ("auto", "local", "docker", "unsafe-local")
DOCKER_PROBE_TIMEOUT = 2.0
"""Seconds the Docker probe may take in all (connecting, ``/_ping``, the image lookup)."""
NEGATIVE_TTL = 30.0
"""Seconds a failed Docker probe is remembered."""

BWRAP_FIX = "install bubblewrap (apt-get install bubblewrap; it needs user namespaces)"
DOCKER_FIX = (
    "start a Docker daemon and build agentgym's image (as root: bash scripts/docker_setup.sh "
    "does both; the image alone: python -m agentgym.sandbox.images build)"
)

_lock = threading.Lock()
_docker_seen: dict[tuple[str, str], tuple[float, str | None]] = {}  # key -> (when, why not)
_warned = False  # whether this process has warned about running unisolated


def check_sandbox(sandbox: object, name: str = "sandbox") -> None:
    """Raise ``ConfigError`` unless ``sandbox`` is one of ``SANDBOXES``."""
    if sandbox not in SANDBOXES:
        raise ConfigError(
            name,
            sandbox,
            "must be 'auto', 'local' (bubblewrap), 'docker' or 'unsafe-local' (no isolation)",
            f"pass {name}='auto' to take bubblewrap, else Docker, whichever runs here",
        )


def resolve_sandbox(
    sandbox: str,
    *,
    name: str = "sandbox",
    image: str | None = DEFAULT_IMAGE,
    local_needs: Callable[[], str | None] | None = None,
) -> Backend:
    """The backend that ``sandbox`` (one of ``SANDBOXES``) stands for here; see the module doc.

    ``image`` is the docker backend's image (None: any; only the daemon is probed);
    ``local_needs`` says what else the local backend lacks on this machine (None: nothing).
    Raises ``ConfigError`` for an unknown value and ``SandboxUnavailable``, naming every fix,
    when no isolating backend that ``sandbox`` allows can run.
    """
    check_sandbox(sandbox, name)
    if sandbox == "unsafe-local":
        warn_unisolated(f"{name}='unsafe-local' was asked for", stacklevel=3)
        return "unsafe-local"
    reasons = []
    if sandbox in ("auto", "local"):
        no_local = why_not_local(local_needs)
        if no_local is None:
            return "local"
        reasons.append(f"local (bubblewrap): {no_local}")
    if sandbox in ("auto", "docker"):
        no_docker = why_not_docker(image)
        if no_docker is None:
            return "docker"
        reasons.append(f"docker: {no_docker}")
    fixes = {
        "auto": [BWRAP_FIX, DOCKER_FIX],
        "local": [BWRAP_FIX, f"pass {name}='docker' (or 'auto')"],
        "docker": [DOCKER_FIX, f"pass {name}='local' (or 'auto')"],
    }[sandbox]
    unsafe = (
        "to run it as plain processes on this machine with no isolation (it can then read and "
        f"write your files and use the network), pass {name}='unsafe-local' explicitly"
    )
    raise SandboxUnavailable(
        f"{name}={sandbox!r}: no isolating sandbox can run model-written code here "
        f"({'; '.join(reasons)}), and agentgym never runs it unisolated unless asked. "
        f"Fix: {'; or '.join(fixes)}; or, {unsafe}"
    )


def why_not_local(local_needs: Callable[[], str | None] | None = None) -> str | None:
    """Why the local backend cannot isolate here (bubblewrap, then ``local_needs``), or None."""
    # Looked up on the module at each call, so that tests can stand in for the probe.
    if not _bwrap.bwrap_usable():
        return _bwrap.why_not_bwrap() or "bubblewrap cannot make sandboxes here"
    return local_needs() if local_needs is not None else None


def warn_unisolated(why: str, *, stacklevel: int = 2) -> None:
    """Warn, once per process, that model-written code runs with no isolation (``why``)."""
    global _warned
    with _lock:
        if _warned:
            return
        _warned = True
    warnings.warn(
        f"model-written code runs NOT isolated ({why}): as plain rlimited processes that can "
        "read the host's files, write wherever this user can, see its processes and use the "
        "network. This warning is shown once per process. For isolation install bubblewrap or "
        "start Docker, and use sandbox='auto'.",
        SandboxIsolationWarning,
        stacklevel=stacklevel + 1,
    )


def why_not_docker(image: str | None = DEFAULT_IMAGE) -> str | None:
    """Why the docker backend cannot run ``image``'s sandboxes here, or None if it can.

    A local daemon must answer on its unix socket (``DOCKER_HOST``) and hold ``image`` (None:
    the daemon alone is probed), within ``DOCKER_PROBE_TIMEOUT`` seconds.
    Cached per process: a yes for good, a no for ``NEGATIVE_TTL`` seconds.
    """
    key = (os.environ.get("DOCKER_HOST", ""), image or "")
    with _lock:
        seen = _docker_seen.get(key)
    if seen is not None and (seen[1] is None or time.monotonic() - seen[0] < NEGATIVE_TTL):
        return seen[1]
    why = _probe_docker(image)
    with _lock:
        _docker_seen[key] = (time.monotonic(), why)
    return why


def _probe_docker(image: str | None) -> str | None:
    if importlib.util.find_spec("docker") is None:
        return f"the docker SDK is not installed ({pip_install('docker')})"
    try:
        path = socket_path()
    except SandboxUnavailable as e:
        return str(e)
    deadline = time.monotonic() + DOCKER_PROBE_TIMEOUT
    try:
        if _status(path, "/_ping", deadline) != 200:
            return f"the Docker daemon at {path} does not answer /_ping"
        if image is None:
            return None
        status = _status(path, f"/images/{quote(image, safe='/:')}/json", deadline)
    except (OSError, ValueError) as e:  # socket.timeout is an OSError
        return f"no Docker daemon answers at {path} ({e or type(e).__name__})"
    if status == 404:
        return f"the daemon has no image {image}"
    return None if status == 200 else f"looking up image {image} got HTTP {status}"


def _status(path: str, url: str, deadline: float) -> int:
    """The HTTP status of ``GET url`` on the unix socket ``path``, within ``deadline``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.connect(path)
        sock.sendall(f"GET {url} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
        head = b""
        while b"\r\n" not in head and len(head) < 1024:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = sock.recv(1024)
            if not chunk:
                break
            head += chunk
    fields = head.split(b"\r\n", 1)[0].split()
    if len(fields) < 2 or not fields[0].startswith(b"HTTP/"):
        raise ValueError(f"not an HTTP answer: {head[:60]!r}")
    return int(fields[1])
