"""One Chromium per event loop, a fresh ``BrowserContext`` per episode.

A ``BrowserPool`` belongs to one event loop (Playwright's async objects are bound to the loop that
made them): the envs stepped on that loop share its Playwright driver and browser, each episode
gets a new context (milliseconds), and the browser is replaced after ``recycle_every`` episodes
(the old one closes when its last episode ends). A browser that crashed is replaced at the next
episode. Every await on the browser has a deadline. Each launched browser is registered with the
reaper (:mod:`agentgym.core.reaper`), so it dies with the agent process even on SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.core.aio import deadline
from agentgym.core.errors import InfraError
from agentgym.core.reaper import kill_group, reaper
from agentgym.extras import pip_install

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright

__all__ = [
    "BROWSER_ARGS",
    "BrowserCrashed",
    "BrowserPool",
    "BrowserUnavailable",
    "chromium_path",
    "is_browser_gone",
    "pool_for_running_loop",
    "release_pool",
]

BROWSER_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
)
"""Chromium flags: no sandbox (the agent's own process tree, see WebEnv's Sandbox section), no
GPU, no background traffic. Playwright adds ``--headless`` and a fresh ``--user-data-dir``."""

log = logging.getLogger(__name__)

_TAG = "--agentgym-browser="
_GONE = ("has been closed", "Target closed", "Browser closed", "crashed", "disconnected")


class BrowserUnavailable(InfraError):
    """Chromium or Playwright is not installed here."""


class BrowserCrashed(InfraError):
    """The browser died or stopped answering."""


def chromium_path() -> str:
    """The Chromium executable: ``$AGENTGYM_CHROMIUM``, else ``chromium`` or
    ``chromium-browser`` on ``PATH``."""
    configured = os.environ.get("AGENTGYM_CHROMIUM")
    if configured:
        if not Path(configured).is_file():
            raise BrowserUnavailable(
                f"AGENTGYM_CHROMIUM={configured!r} is not a file. Fix: point it at a Chromium "
                "executable, or unset it to use `chromium` from PATH"
            )
        return configured
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    raise BrowserUnavailable(
        "no Chromium found (neither $AGENTGYM_CHROMIUM nor `chromium`/`chromium-browser` on "
        "PATH). Fix: `apt-get install chromium` (Debian/Ubuntu), or set AGENTGYM_CHROMIUM to a "
        "Chromium executable; agentgym never downloads a browser"
    )


def is_browser_gone(error: BaseException) -> bool:
    """Whether a Playwright error means the page, context or browser is gone (not the model's
    fault)."""
    return isinstance(error, BrowserCrashed) or any(s in str(error) for s in _GONE)


def _group_of_tagged(tag: str) -> int | None:
    """The process group of the Chromium whose command line carries ``tag`` (Linux ``/proc``)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    needle = tag.encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                return os.getpgid(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    return None


@dataclass(eq=False)
class Launched:
    """One running browser and the episodes on it."""

    browser: Browser
    pgid: int | None
    episodes: int = 0
    open: int = 0
    retired: bool = False
    crashed: bool = False

    @property
    def pid(self) -> int | None:
        """The browser process's pid (it leads its process group)."""
        return self.pgid

    @property
    def gone(self) -> bool:
        """Whether the browser crashed or lost its connection (it is not coming back)."""
        return self.crashed or not self.browser.is_connected()


@dataclass(eq=False)
class Lease:
    """One episode's context on a browser."""

    context: BrowserContext
    launched: Launched


@dataclass(eq=False)
class BrowserPool:
    """The browser of one event loop, shared by the envs on it (refcounted with ``acquire`` and
    ``release``)."""

    loop: asyncio.AbstractEventLoop
    recycle_every: int = 200
    launch_timeout: float = 60.0
    headless: bool = True
    refs: int = 0
    launches: int = 0
    current: Launched | None = None
    _playwright: Playwright | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _all: list[Launched] = field(default_factory=list)
    _spares: dict[str, list[tuple[Lease, Page]]] = field(default_factory=dict)
    _refills: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _refill_for: dict[str, Launched | None] = field(default_factory=dict)  # the browser of each

    async def new_page(self, timeout: float, **context_args: Any) -> tuple[Lease, Page]:
        """A fresh context with one blank page. One spare context and page per set of
        ``context_args`` is prepared in the background, so that the next episode's does not wait
        for Chromium to start a renderer (the slowest part of a reset). A spare is never used
        twice: each episode still gets a context nobody touched."""
        key = repr(sorted(context_args.items()))
        refill = self._refills.get(key)
        if not self._spares.get(key) and self._refill_pending(key):
            assert refill is not None
            with contextlib.suppress(Exception):  # it is under way: sooner than a new one
                async with deadline(timeout, "spare browser context"):
                    await asyncio.shield(refill)
        spare = await self._take_spare(key)
        if spare is None:
            lease = await self.new_context(timeout, **context_args)
            try:
                async with deadline(timeout, "new page"):
                    page = await lease.context.new_page()
            except BaseException:
                await self.end(lease, timeout, broken=True)
                raise
            spare = (lease, page)
        if not self._refill_pending(key):
            self._refill_for[key] = self.current
            self._refills[key] = asyncio.create_task(self._refill(key, timeout, context_args))
        return spare

    def _refill_pending(self, key: str) -> bool:
        """A spare for ``key`` is being prepared on a working browser (a retired one included:
        taking its spare ends it, and the browser with it). One for a browser that crashed is
        never waited for: a call in flight when Chromium died may not return (a reset after a
        crash waited out its whole deadline for one)."""
        refill, launched = self._refills.get(key), self._refill_for.get(key)
        return refill is not None and not refill.done() and (launched is None or not launched.gone)

    async def ready(self) -> None:
        """Launch (or replace) the browser now if it is needed, under ``launch_timeout``."""
        await self._browser()

    async def _take_spare(self, key: str) -> tuple[Lease, Page] | None:
        spares = self._spares.get(key, [])
        while spares:
            lease, page = spares.pop()
            launched = lease.launched
            usable = (
                launched is self.current
                and not launched.gone
                and launched.episodes < self.recycle_every
                and not page.is_closed()
            )
            if usable:
                launched.episodes += 1
                return lease, page
            await self.end(lease, 5.0)
        return None

    async def _refill(self, key: str, timeout: float, context_args: dict[str, Any]) -> None:
        try:
            lease = await self.new_context(timeout, spare=True, **context_args)
            try:
                async with deadline(timeout, "new page"):
                    page = await lease.context.new_page()
            except Exception:
                await self.end(lease, timeout, broken=True)
                return
            self._spares.setdefault(key, []).append((lease, page))
        except Exception:  # the next episode makes its own context and sees the error itself
            log.debug("preparing a spare browser context failed", exc_info=True)

    async def new_context(
        self, timeout: float, *, spare: bool = False, **context_args: Any
    ) -> Lease:
        """A fresh context on the current browser (launching or replacing it as needed);
        ``spare``: prepared for a later episode, counted as one when handed out."""
        launched = await self._browser()
        launched.episodes += 0 if spare else 1
        launched.open += 1
        try:
            async with deadline(timeout, "new browser context"):
                context = await launched.browser.new_context(**context_args)
        except BaseException:
            launched.open -= 1
            launched.crashed = True
            raise
        return Lease(context, launched)

    async def end(self, lease: Lease, timeout: float, *, broken: bool = False) -> None:
        """Close an episode's context; ``broken``: the browser misbehaved, replace it."""
        launched = lease.launched
        launched.open -= 1
        launched.crashed |= broken
        try:
            async with deadline(timeout, "close browser context"):
                await lease.context.close()
        except Exception:
            launched.crashed = True
        if launched.crashed or (launched.retired and launched.open <= 0):
            launched.retired = True
            if launched.open <= 0 or launched.crashed:
                await self._close(launched, timeout)

    async def _browser(self) -> Launched:
        async with self._lock:
            current = self.current
            stale = current is not None and (current.gone or current.episodes >= self.recycle_every)
            if current is not None and stale:
                current.retired = True
                self.current = None
                if current.gone:
                    self._cancel_refills(current)
                if current.open <= 0 or current.gone:
                    await self._close(current, self.launch_timeout)
            if self.current is None:
                self.current = await self._launch()
            return self.current

    def _cancel_refills(self, launched: Launched) -> None:
        """Stop preparing spares on ``launched``, a browser that is gone."""
        for key, task in self._refills.items():
            if self._refill_for.get(key) is launched and task is not asyncio.current_task():
                task.cancel()

    async def _launch(self) -> Launched:
        executable = chromium_path()
        try:
            from playwright.async_api import async_playwright
        except ImportError as e:
            raise BrowserUnavailable(
                f"Playwright is not installed. Fix: {pip_install('web')}"
            ) from e
        tag = f"{_TAG}{uuid.uuid4().hex}"
        async with deadline(self.launch_timeout, "launch Chromium"):
            if self._playwright is None:
                self._playwright = await async_playwright().start()
            browser = await self._playwright.chromium.launch(
                executable_path=executable,
                headless=self.headless,
                args=[*BROWSER_ARGS, tag],
                handle_sigint=False,
                handle_sigterm=False,
                handle_sighup=False,
            )
        pgid = _group_of_tagged(tag)
        if pgid is not None:
            reaper.watch(pgid)
        launched = Launched(browser, pgid)
        self.launches += 1
        self._all.append(launched)
        return launched

    async def _close(self, launched: Launched, timeout: float) -> None:
        if launched not in self._all:
            return
        self._all.remove(launched)
        with contextlib.suppress(Exception):
            async with deadline(timeout, "close Chromium"):
                await launched.browser.close()
        if launched.pgid is not None:
            kill_group(launched.pgid)  # renderers Playwright did not wait for
            reaper.forget(launched.pgid)

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Close every browser and the Playwright driver of this loop."""
        for task in self._refills.values():
            task.cancel()
        await asyncio.gather(*self._refills.values(), return_exceptions=True)
        self._refills.clear()
        self._spares.clear()  # their browsers close below
        self.current = None
        for launched in list(self._all):
            await self._close(launched, timeout)
        playwright, self._playwright = self._playwright, None
        if playwright is not None:
            with contextlib.suppress(Exception):
                async with deadline(timeout, "stop Playwright"):
                    await playwright.stop()

    def kill(self) -> None:
        """Kill every browser at once, without the loop (it may be closed or elsewhere)."""
        self.current = None
        for launched in self._all:
            if launched.pgid is not None:
                kill_group(launched.pgid)
                reaper.forget(launched.pgid)
        self._all.clear()

    @property
    def browsers(self) -> tuple[Launched, ...]:
        return tuple(self._all)


_pools: dict[int, BrowserPool] = {}


def pool_for_running_loop(recycle_every: int, launch_timeout: float) -> BrowserPool:
    """The running loop's pool, one reference more (give it back with ``release_pool``)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(id(loop))
    if pool is None or pool.loop is not loop:
        pool = BrowserPool(loop, recycle_every=recycle_every, launch_timeout=launch_timeout)
        _pools[id(loop)] = pool
    pool.recycle_every = min(pool.recycle_every, recycle_every)
    pool.refs += 1
    return pool


async def release_pool(pool: BrowserPool) -> None:
    """One reference less; the last one shuts the pool down (on its own loop, or by killing its
    browsers when called from another loop)."""
    pool.refs -= 1
    if pool.refs > 0:
        return
    if _pools.get(id(pool.loop)) is pool:
        del _pools[id(pool.loop)]
    try:
        same_loop = asyncio.get_running_loop() is pool.loop
    except RuntimeError:
        same_loop = False
    if same_loop:
        await pool.shutdown()
    else:
        pool.kill()


# --- settling ---------------------------------------------------------------------------------

_QUIET_JS = """([quiet, cap]) => new Promise((resolve) => {
  const start = performance.now();
  let last = start;
  const observer = new MutationObserver(() => { last = performance.now(); });
  observer.observe(document, {subtree: true, childList: true, attributes: true,
                              characterData: true});
  const tick = () => {
    const now = performance.now();
    if (now - last >= quiet || now - start >= cap) { observer.disconnect(); resolve(now - start); }
    else setTimeout(tick, 5);
  };
  setTimeout(tick, 5);
})"""


class Traffic:
    """Counts a page's requests in flight (set ``idle`` when none is)."""

    def __init__(self, page: Any) -> None:
        self.inflight = 0
        self.idle = asyncio.Event()
        self.idle.set()
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)

    def _started(self, _request: Any) -> None:
        self.inflight += 1
        self.idle.clear()

    def _ended(self, _request: Any) -> None:
        self.inflight = max(0, self.inflight - 1)
        if self.inflight == 0:
            self.idle.set()


async def settle(page: Any, traffic: Traffic | None, cap: float, quiet: float = 0.03) -> None:
    """Wait until the page is quiet: loaded, no request in flight and no DOM mutation for
    ``quiet`` seconds, for at most about ``cap`` seconds (then go on with the page as it is).

    Raises Playwright's error when the page or browser is gone; a page that navigates meanwhile
    is waited for again (once)."""
    from playwright.async_api import Error as PlaywrightError

    loop = asyncio.get_running_loop()
    end = loop.time() + cap
    for _attempt in range(2):
        left = max(0.05, end - loop.time())
        try:
            await page.wait_for_load_state("load", timeout=left * 1000)
            if traffic is not None and not traffic.idle.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.05, end - loop.time())):
                        await traffic.idle.wait()
            left = max(0.05, end - loop.time())
            # Best effort: a busy machine may answer late; the step's own deadline catches a
            # renderer that hangs, here the page is observed as it is.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left + 1.0):
                    await page.evaluate(_QUIET_JS, [quiet * 1000, left * 1000])
            return
        except PlaywrightError as e:
            if is_browser_gone(e):
                raise
            if "Timeout" in type(e).__name__ or "Timeout" in str(e):
                return  # still loading after the cap: observe the page as it is
            # "Execution context was destroyed": a navigation began; wait for it once more
