"""The ``docker`` SWE backend: one container per sandbox, from the instance's image, kept warm.

Each ``acquire`` takes a container from a warm pool of the instance's image (``DockerPool``,
refilled in the background) whose work dir already holds the repository, copied from the
image when the container started. Pools are shared by every ``DockerSWEBackend`` of the process
with the same settings (so 16 envs of a vector env keep ``pool_size`` warm containers per
image, not 16 times that), made on an image's first use and closed when the last backend using
them closes; only the ``max_warm_images`` most recently used images keep containers warm.

Containers are removed on ``release`` and ``aclose``, at interpreter exit, by the sandbox
session's reaper when the process dies any other way (even SIGKILL; see
``agentgym.sandbox.pool``), and when a sandbox is held longer than ``max_lifetime``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from agentgym.core.errors import ConfigError, SandboxError, SandboxUnavailable
from agentgym.envs.swe.backends.base import BASE_REF, REPO_DIR, SETUP_TIMEOUT, prepare_repo
from agentgym.envs.swe.images import WORKDIR, ImageRef, ensure_image, image_tag
from agentgym.envs.swe.instances import SWEInstance
from agentgym.envs.swe.repo import CheckoutCache
from agentgym.envs.validate import integer, seconds
from agentgym.sandbox import DockerPool, DockerSandbox, Limits, Sandbox
from agentgym.sandbox.image_tag import DEFAULT_IMAGE
from agentgym.sandbox.selection import why_not_docker

__all__ = ["SWE_LABEL", "DockerSWEBackend", "docker_available"]

SWE_LABEL = "agentgym.swe"
"""Every container of this backend carries ``agentgym.swe=<image tag>``."""
MiB, GiB = 1 << 20, 1 << 30


def docker_available() -> bool:
    """Whether a local Docker daemon answers and has agentgym's base image."""
    return why_not_docker(DEFAULT_IMAGE) is None


@dataclass(frozen=True)
class _PoolKey:
    image: str
    repo_dir: str | None
    size: int
    memory: int
    processes: int
    cpus: float
    tmp_size: int
    labels: tuple[tuple[str, str], ...]
    env: tuple[tuple[str, str], ...] = ()


class _SharedPools:
    """The process's warm pools, by image and settings, with the backends that use each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: OrderedDict[_PoolKey, DockerPool] = OrderedDict()  # least recent first
        self._users: dict[_PoolKey, set[int]] = {}

    def get(self, key: _PoolKey, user: int, max_warm: int) -> DockerPool:
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = _make_pool(key)
            self._pools.move_to_end(key)
            self._users.setdefault(key, set()).add(user)
            recent = list(reversed(self._pools.items()))
        # Only the most recently used images keep containers warm.
        for rank, (k, p) in enumerate(recent):
            wanted = k.size if rank < max_warm else 0
            if p.size != wanted:
                p.resize(wanted)
        return pool

    def drop(self, user: int) -> list[DockerPool]:
        """Forget ``user``; return the pools nobody uses any more (for the caller to close)."""
        unused = []
        with self._lock:
            for key, users in list(self._users.items()):
                users.discard(user)
                if not users:
                    del self._users[key]
                    unused.append(self._pools.pop(key))
        return unused


def _make_pool(key: _PoolKey) -> DockerPool:
    prepare = None
    if key.repo_dir is not None:
        repo = f"{WORKDIR}/{REPO_DIR}"
        # The image's commit is what diffs are taken against (an image in the SWE-bench
        # layout sits on a commit of its own on top of base_commit; grader.diff_base). A
        # refreshed index keeps the first `git status` of the copy fast.
        script = (
            'cp -a "$1" "$2" && git -C "$2" update-ref "$3" HEAD'
            ' && { git -C "$2" update-index -q --refresh; true; }'
        )
        prepare = ["/bin/sh", "-c", script, "sh", key.repo_dir, repo, BASE_REF]
    return DockerPool(
        key.size,
        image=key.image,
        memory=key.memory,
        processes=key.processes,
        cpus=key.cpus,
        tmp_size=key.tmp_size,
        workdir=WORKDIR,
        prepare=prepare,
        env=dict(key.env),
        labels={**dict(key.labels), SWE_LABEL: key.image},
        max_workers=4,
    )


def _remove(sandbox: DockerSandbox) -> None:
    with contextlib.suppress(Exception):  # best effort; atexit and the reaper catch the rest
        sandbox.remove_now()


_pools = _SharedPools()
# Removes released containers; its threads are joined at interpreter exit, so are removals.
_remover = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="agentgym-swe-remove")
_backend_ids = itertools.count()
_images: dict[str, ImageRef] = {}  # tag -> what ensure_image found, once per process
_builds: dict[str, concurrent.futures.Future[ImageRef]] = {}  # tag -> the running lookup/build
_builds_lock = threading.Lock()


def _image_future(instance: SWEInstance, build: bool) -> concurrent.futures.Future[ImageRef]:
    """One lookup (and build, when missing) per image at a time in the process."""
    tag = instance.image or image_tag(instance)
    with _builds_lock:
        if tag in _images:
            done: concurrent.futures.Future[ImageRef] = concurrent.futures.Future()
            done.set_result(_images[tag])
            return done
        fut = _builds.get(tag)
        if fut is None:
            fut = _builds[tag] = concurrent.futures.Future()
            threading.Thread(
                target=_resolve, args=(instance, build, tag, fut), name="agentgym-swe-image"
            ).start()
        return fut


def _resolve(
    instance: SWEInstance, build: bool, tag: str, fut: concurrent.futures.Future[ImageRef]
) -> None:
    try:
        ref = ensure_image(instance, build=build)
    except BaseException as e:
        with _builds_lock:
            _builds.pop(tag, None)  # a later acquire tries again
        fut.set_exception(e)
        return
    with _builds_lock:
        _images[tag] = ref
        _builds.pop(tag, None)
    fut.set_result(ref)


class DockerSWEBackend:
    """SWE sandboxes in Docker containers: one per episode (and per grading run), warm-pooled.

    A container runs from the instance's image (built from agentgym's Python image on first use
    when missing; see ``agentgym.envs.swe.images``) with no network, a read-only root, only the
    work dir (``/work``, holding ``repo``) and a ``/tmp`` tmpfs writable, all capabilities
    dropped, memory, process and CPU limits, as an unprivileged user: see ``DockerSandbox``.
    ``await backend.warm(instances)`` builds missing images and fills their pools ahead of the
    first reset; otherwise an image's pool starts with its first acquire.

    Args:
        pool_size: containers kept warm per image (``0``: each acquire starts one).
        max_warm_images: how many images (most recently used first) keep warm containers.
        memory: memory of each container, in bytes (RAM, no swap).
        processes: processes and threads each container may hold at once.
        cpus: CPUs each container may use.
        tmp_size: size of each container's ``/tmp`` tmpfs, in bytes.
        limits: the sandboxes' default per-run ``Limits``.
        build: build a missing instance image on first acquire (else ``SandboxUnavailable``).
        setup_timeout: seconds each setup command may run, for images that lack the repository.
        max_lifetime: seconds a sandbox may be held before its container is removed (a leaked
            or stuck episode's container does not live on); ``None``: no limit.
        labels: extra labels on every container (e.g. to find one run's containers).
    """

    name = "docker"

    def __init__(
        self,
        *,
        pool_size: int = 2,
        max_warm_images: int = 4,
        memory: int = 2 * GiB,
        processes: int = 512,
        cpus: float = 1.0,
        tmp_size: int = 256 * MiB,
        limits: Limits | None = None,
        build: bool = True,
        setup_timeout: float = SETUP_TIMEOUT,
        max_lifetime: float | None = 3 * 3600.0,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        size = integer("pool_size", pool_size, 0, "pass pool_size=2 (0: no warm containers)")
        self.max_warm_images = integer("max_warm_images", max_warm_images, 0)
        self.setup_timeout = seconds("setup_timeout", setup_timeout)
        self.max_lifetime = None if max_lifetime is None else seconds("max_lifetime", max_lifetime)
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigError("limits", limits, "must be an agentgym.sandbox.Limits", "Limits()")
        if labels is not None and (
            not isinstance(labels, Mapping)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
        ):
            raise ConfigError("labels", labels, "must map str to str", "labels={'run': 'a1'}")
        # DockerPool validates the container limits; build one now so mistakes raise here.
        DockerPool(0, memory=memory, processes=processes, cpus=cpus, tmp_size=tmp_size)
        self._settings = (size, memory, processes, cpus, tmp_size)
        self._labels = tuple(sorted(dict(labels or {}).items()))
        self.limits, self.build = limits, build
        self._held: dict[DockerSandbox, threading.Timer | None] = {}
        self._removing: set[concurrent.futures.Future[None]] = set()
        self._lock = threading.Lock()
        self._checkouts: CheckoutCache | None = None
        self._closed = False
        self._id = next(_backend_ids)

    # -- the SWEBackend protocol ------------------------------------------------------------

    async def acquire(self, instance: SWEInstance) -> Sandbox:
        """A container of ``instance``'s image whose ``/work/repo`` is at ``base_commit``."""
        self._check_open()
        ref = await asyncio.wrap_future(_image_future(instance, self.build))
        pool = self._pool(ref)
        sandbox = await pool.acquire(limits=self.limits)
        self._hold(sandbox)
        try:
            self._check_open()  # closed while the container started
            if ref.repo_dir is None:
                await self._copy_in(sandbox, instance)
        except BaseException:
            await self.release(sandbox)
            raise
        return sandbox

    async def release(self, sandbox: Sandbox) -> None:
        """Close ``sandbox`` now and remove its container in the background (``aclose`` waits
        for every removal); a second call is a no-op."""
        with self._lock:
            timer = self._held.pop(sandbox, None)  # type: ignore[call-overload]
        if timer is not None:
            timer.cancel()
        if not isinstance(sandbox, DockerSandbox):
            await sandbox.close()
            return
        # Removing a container takes ~0.2 s that the episode need not wait for (grading
        # releases two sandboxes); the sandbox refuses every call from here on.
        removal = _remover.submit(_remove, sandbox)
        with self._lock:
            self._removing.add(removal)
        removal.add_done_callback(self._removing.discard)

    async def aclose(self) -> None:
        """Remove every container this backend holds; close pools no other backend uses."""
        with self._lock:
            self._closed = True
            held = list(self._held)
        for sandbox in held:
            with contextlib.suppress(SandboxError):
                await self.release(sandbox)
        with self._lock:
            removing = list(self._removing)
        for removal in removing:
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(removal)
        for pool in _pools.drop(self._id):
            await pool.close()
        if self._checkouts is not None:
            await asyncio.to_thread(self._checkouts.clear)
            self._checkouts = None

    # -- beyond the protocol -----------------------------------------------------------------

    async def warm(self, instances: list[SWEInstance]) -> None:
        """Build the instances' missing images and wait until their pools are warm."""
        refs = await asyncio.gather(
            *(asyncio.wrap_future(_image_future(i, self.build)) for i in instances)
        )
        pools = {id(p): p for p in (self._pool(ref) for ref in refs)}
        await asyncio.gather(*(p.start() for p in pools.values()))

    @property
    def held(self) -> int:
        """How many sandboxes this backend has handed out and not yet released."""
        return len(self._held)

    # -- helpers ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("the docker SWE backend is closed")

    def _pool(self, ref: ImageRef) -> DockerPool:
        size, memory, processes, cpus, tmp_size = self._settings
        key = _PoolKey(
            ref.tag, ref.repo_dir, size, memory, processes, cpus, tmp_size, self._labels, ref.env
        )
        return _pools.get(key, self._id, self.max_warm_images)

    def _hold(self, sandbox: DockerSandbox) -> None:
        timer = None
        if self.max_lifetime is not None:
            timer = threading.Timer(self.max_lifetime, self._expire, args=(sandbox,))
            timer.daemon = True
            timer.name = "agentgym-swe-lifetime"
        with self._lock:
            self._held[sandbox] = timer
        if timer is not None:
            timer.start()

    def _expire(self, sandbox: DockerSandbox) -> None:
        with self._lock:
            if self._held.pop(sandbox, None) is None:
                return
        _remove(sandbox)

    async def _copy_in(self, sandbox: Sandbox, instance: SWEInstance) -> None:
        """For an image without the repository: copy a host checkout in and run setup."""
        if instance.repo_path is None:
            raise SandboxUnavailable(
                f"instance {instance.instance_id}: image {instance.image} has no "
                f"agentgym.swe.repo label and the instance no repo_path. Fix: label the image "
                "with the repository's folder (LABEL agentgym.swe.repo=/path) or add repo_path"
            )
        if self._checkouts is None:
            self._checkouts = CheckoutCache()
        checkout = await asyncio.to_thread(self._checkouts.get, instance)
        await sandbox.upload(checkout, REPO_DIR)
        await prepare_repo(sandbox, instance, timeout=self.setup_timeout)
