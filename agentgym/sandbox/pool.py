"""``DockerPool``: warm containers for docker sandboxes, and the guards that remove them.

Every container carries labels naming the process that made it. They are removed when their
sandbox or pool closes, at interpreter exit (``atexit``), by the session's reaper process when
the owner dies any other way (even SIGKILL), and by ``cleanup_stale()`` for anything left over.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import functools
import os
import tempfile
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentgym.core.errors import ConfigError, SandboxError, SandboxUnavailable
from agentgym.sandbox._dockerapi import DockerAPI, socket_path
from agentgym.sandbox._process import random_uid
from agentgym.sandbox._session import OWNER_LABEL, owner, session_folder
from agentgym.sandbox.base import Limits
from agentgym.sandbox.docker import ContainerHandle, DockerSandbox
from agentgym.sandbox.images import DEFAULT_IMAGE

__all__ = ["DockerPool"]

LABEL = "agentgym.sandbox"
OWNER = OWNER_LABEL  # "<host>:<pid>:<start time>" of the process that made the container
MiB, GiB = 1 << 20, 1 << 30


class _Live:
    """This process's containers: removed by their sandbox or pool, else at interpreter exit."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.containers: dict[str, tuple[Any, str]] = {}  # id -> (client, host dir)

    def add(self, cid: str, client: Any, host_dir: str) -> None:
        with self.lock:
            self.containers[cid] = (client, host_dir)

    def remove(self, cid: str) -> None:
        with self.lock:
            client, host_dir = self.containers.pop(cid, (None, ""))
        if client is not None:
            _remove_container(client, cid, host_dir)

    def remove_all(self) -> None:
        for cid in list(self.containers):
            with contextlib.suppress(Exception):
                self.remove(cid)


_live = _Live()
atexit.register(_live.remove_all)


def _remove_container(client: Any, cid: str, host_dir: str) -> None:
    import docker.errors

    try:
        client.api.remove_container(cid, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.DockerException as e:
        raise SandboxError(f"could not remove container {cid[:12]}: {e}") from e
    finally:
        if host_dir:
            from agentgym.sandbox._files import WorkdirFiles

            with contextlib.suppress(OSError):
                WorkdirFiles(host_dir, host_dir).remove()


def _oom_file(client: Any, cid: str) -> str | None:
    """The cgroup file counting the container's OOM kills (v1 or v2), if this host can read it."""
    try:
        pid = client.api.inspect_container(cid)["State"]["Pid"]
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except (OSError, KeyError):
        return None
    candidates = []
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidates.append(f"/sys/fs/cgroup/memory{path}/memory.oom_control")
        elif hierarchy == "0":
            candidates += [
                f"/sys/fs/cgroup{path}/memory.events",
                f"/sys/fs/cgroup/unified{path}/memory.events",
            ]
    return next((c for c in candidates if os.path.exists(c)), None)


def _read_oom_kills(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        for line in Path(path).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def _check_int(name: str, value: object, minimum: int, example: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(name, value, f"must be an int >= {minimum}", f"pass e.g. {example}")


class DockerPool:
    """Keeps ``size`` containers started, so that ``acquire()`` hands one out at once.

    Each sandbox gets a fresh container and removes it on close (a container that ran untrusted
    code is never reused); taking one starts a replacement in the background. Container-wide
    limits (``memory``, ``processes``, ``cpus``, ``tmp_size``) are set here; per-run ``Limits``
    are the sandboxes' default. Usable from any thread and event loop.

    ``prepare`` (an argv) runs in every new container, as the sandbox user in the work dir,
    before the container counts as warm (e.g. copying a repository from the image into the work
    dir); a failure removes the container and raises ``SandboxError`` with its output.
    ``labels`` are added to every container's own (``agentgym.sandbox``, ``agentgym.owner``).
    """

    def __init__(
        self,
        size: int = 2,
        *,
        image: str = DEFAULT_IMAGE,
        memory: int = 2 * GiB,
        processes: int = 512,
        cpus: float = 1.0,
        tmp_size: int = 256 * MiB,
        workdir: str = "/work",
        limits: Limits | None = None,
        env: Mapping[str, str] | None = None,
        root: str | None = None,
        max_workers: int = 8,
        prepare: Sequence[str] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        _check_int("size", size, 0, "DockerPool(size=4)")
        _check_int("memory", memory, 64 * MiB, "memory=2 * 2**30")
        _check_int("processes", processes, 16, "processes=512")
        _check_int("tmp_size", tmp_size, MiB, "tmp_size=256 * 2**20")
        if isinstance(cpus, bool) or not isinstance(cpus, int | float) or not 0 < cpus <= 1024:
            raise ConfigError("cpus", cpus, "must be a number of CPUs > 0", "pass cpus=1.0")
        if not (isinstance(workdir, str) and workdir.startswith("/") and workdir != "/"):
            raise ConfigError(
                "workdir", workdir, "must be an absolute path other than /", "pass workdir='/work'"
            )
        self.size, self.image, self.workdir = size, image, workdir
        self.limits = limits if limits is not None else Limits()
        self._spec = {"memory": memory, "processes": processes, "cpus": cpus, "tmp_size": tmp_size}
        self._env = dict(env or {})
        self._root = root
        if prepare is not None and (
            isinstance(prepare, str) or not prepare or not all(isinstance(a, str) for a in prepare)
        ):
            raise ConfigError(
                "prepare", prepare, "must be a non-empty list of str", "pass e.g. ['cp', '-a', ...]"
            )
        self._prepare = list(prepare) if prepare is not None else None
        self._labels = {**(labels or {}), LABEL: "1", OWNER: owner()}
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers, thread_name_prefix="agentgym-docker"
        )
        self._lock = threading.Lock()
        self._ready: deque[concurrent.futures.Future[ContainerHandle]] = deque()
        self._issued: set[str] = set()
        self._client: Any = None
        self._api: DockerAPI | None = None
        self._closed = False

    # -- connecting and making containers (blocking; run in the executor) -----------------

    def _connect(self) -> tuple[Any, DockerAPI]:
        with self._lock:
            if self._client is not None and self._api is not None:
                return self._client, self._api
            try:
                import docker
            except ImportError as e:
                raise SandboxUnavailable(
                    "the docker SDK is not installed. Fix: pip install docker"
                ) from e
            path = socket_path()
            try:
                client = docker.from_env(max_pool_size=32, timeout=120)
                client.ping()
            except Exception as e:  # the SDK raises requests' errors and its own alike
                raise SandboxUnavailable(
                    f"no Docker daemon answers ({e}). Fix: bash scripts/docker_setup.sh"
                ) from e
            try:
                client.images.get(self.image)
            except docker.errors.ImageNotFound as e:
                raise SandboxUnavailable(
                    f"image {self.image} is missing. Fix: bash scripts/docker_setup.sh "
                    "(or python -m agentgym.sandbox.images build)"
                ) from e
            if self._root:
                os.makedirs(self._root, mode=0o700, exist_ok=True)
            self._client, self._api = client, DockerAPI(path, client.api.api_version)
            return client, self._api

    def _create(self) -> ContainerHandle:
        client, _ = self._connect()
        folder = self._root or session_folder()
        uid = random_uid() if os.geteuid() == 0 else os.getuid()
        host_dir = tempfile.mkdtemp(prefix="c-", dir=folder)
        if os.geteuid() == 0:
            os.chown(host_dir, uid, uid)
        spec = self._spec
        from docker.types import Mount

        container = client.api.create_container(
            self.image,
            command=["sleep", "infinity"],
            labels=self._labels,
            working_dir=self.workdir,
            hostname="sandbox",
            host_config=client.api.create_host_config(
                init=True,
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={spec['tmp_size']},mode=1777"},
                mounts=[Mount(target=self.workdir, source=host_dir, type="bind")],
                mem_limit=spec["memory"],
                memswap_limit=spec["memory"],
                pids_limit=spec["processes"],
                nano_cpus=int(spec["cpus"] * 1e9),
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
            ),
        )
        cid = container["Id"]
        _live.add(cid, client, host_dir)
        try:
            client.api.start(cid)
            if self._prepare:
                self._run_prepare(client, cid, uid, self._prepare)
        except Exception as e:
            _live.remove(cid)
            if isinstance(e, SandboxError):
                raise
            raise SandboxError(f"container from {self.image} did not start: {e}") from e
        return ContainerHandle(
            id=cid,
            uid=uid,
            host_dir=host_dir,
            remove=functools.partial(self._release, cid),
            restart=functools.partial(client.api.restart, cid, timeout=0),
            oom_kills=functools.partial(_read_oom_kills, _oom_file(client, cid)),
        )

    def _run_prepare(self, client: Any, cid: str, uid: int, argv: list[str]) -> None:
        exec_id = client.api.exec_create(
            cid,
            argv,
            user=f"{uid}:{uid}",
            workdir=self.workdir,
            environment={"HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"},
        )
        output = client.api.exec_start(exec_id)
        code = client.api.exec_inspect(exec_id).get("ExitCode")
        if code != 0:
            tail = output.decode(errors="replace")[-2000:]
            raise SandboxError(
                f"preparing a container from {self.image} failed ({argv[0]} exited "
                f"with {code}): {tail}"
            )

    def _release(self, cid: str) -> None:
        with self._lock:
            self._issued.discard(cid)
        _live.remove(cid)

    def _fill(self) -> None:
        with self._lock:
            while not self._closed and len(self._ready) < self.size:
                self._ready.append(self._executor.submit(self._create))

    # -- the async API --------------------------------------------------------------------

    async def start(self) -> DockerPool:
        """Connect and wait until ``size`` containers are warm."""
        await asyncio.to_thread(self._connect)
        self._fill()
        with self._lock:
            pending = list(self._ready)
        for fut in pending:
            with contextlib.suppress(SandboxError):
                await asyncio.wrap_future(fut)
        return self

    async def acquire(
        self, *, limits: Limits | None = None, env: Mapping[str, str] | None = None
    ) -> DockerSandbox:
        """A sandbox in a warm container (a cold one if none is ready)."""
        if self._closed:
            raise SandboxError("the DockerPool is closed")
        api = self._api or (await asyncio.to_thread(self._connect))[1]
        with self._lock:
            fut = self._ready.popleft() if self._ready else self._executor.submit(self._create)
        self._fill()
        try:
            handle = await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            # A container still starting would belong to no one: remove it once it is up.
            fut.add_done_callback(_remove_started)
            raise
        with self._lock:
            closed = self._closed
            if not closed:
                self._issued.add(handle.id)
        if closed:  # the pool closed while this container started
            await asyncio.to_thread(_live.remove, handle.id)
            raise SandboxError("the DockerPool is closed")
        return DockerSandbox(
            handle,
            api,
            workdir=self.workdir,
            limits=self.limits if limits is None else limits,
            env={**self._env, **(env or {})},
        )

    @classmethod
    async def standalone(cls, **kwargs: Any) -> DockerSandbox:
        """One sandbox without a warm pool (its container starts now)."""
        limits, env = kwargs.pop("limits", None), kwargs.pop("env", None)
        pool = cls(size=0, max_workers=2, **kwargs)
        try:
            return await pool.acquire(limits=limits, env=env)
        finally:
            pool._executor.shutdown(wait=False)

    def resize(self, size: int) -> None:
        """Keep ``size`` containers warm from now on: start the missing ones in the background,
        or remove the surplus warm ones (containers handed out stay)."""
        _check_int("size", size, 0, "pool.resize(2)")
        with self._lock:
            self.size = size
            surplus = []
            while len(self._ready) > size:
                surplus.append(self._ready.pop())
        for fut in surplus:
            fut.add_done_callback(_remove_started)
        self._fill()

    async def close(self) -> None:
        """Remove every container this pool made, warm or handed out; idempotent."""
        with self._lock:
            self._closed = True
            pending, self._ready = list(self._ready), deque()
            issued, self._issued = set(self._issued), set()
        for fut in pending:
            fut.cancel()
        handles = [h for h in await asyncio.to_thread(_results, pending)]
        for cid in [h.id for h in handles] + sorted(issued):
            await asyncio.to_thread(_live.remove, cid)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> DockerPool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _remove_started(fut: concurrent.futures.Future[ContainerHandle]) -> None:
    """Done callback: remove the container ``fut`` started (in a thread: removing blocks)."""
    if fut.cancelled() or fut.exception() is not None:
        return
    cid = fut.result().id
    threading.Thread(target=_remove_quietly, args=(cid,), name="agentgym-docker-rm").start()


def _remove_quietly(cid: str) -> None:
    with contextlib.suppress(Exception):  # best effort; the reaper and atexit catch the rest
        _live.remove(cid)


def _results(futures: list[concurrent.futures.Future[ContainerHandle]]) -> list[ContainerHandle]:
    done = []
    for fut in futures:
        if not fut.cancelled():
            with contextlib.suppress(Exception):
                done.append(fut.result())
    return done
