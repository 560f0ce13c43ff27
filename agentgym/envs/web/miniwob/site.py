"""``MiniWoBSite``: the ``miniwob`` package's pages, served through request interception.

The pages are read from the installed package (``importlib.resources``), never downloaded, and
served on the made-up origin ``http://miniwob.agentgym.test`` by a ``context.route`` handler. The
task page gets a small script appended that, once the page has loaded, seeds the page's random
generator with the episode seed (``Math.seedrandom``), starts the episode
(``core.startEpisodeReal()``) with a time limit too long to matter (the env's step limit ends
episodes instead) and stops the on-page countdown. A stylesheet hides MiniWoB's human display
(the instruction box, the reward and timer panel, the click canvas and the start cover): the
instruction reaches the model in the reset message, read from the page with
``core.getUtterance()`` after the start.

The grade is MiniWoB's own: ``WOB_RAW_REWARD_GLOBAL`` (the reward before MiniWoB's time
discount, in [-1, 1]) once ``WOB_DONE_GLOBAL`` is set.
"""

from __future__ import annotations

import importlib.util
import mimetypes
import posixpath
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentgym.envs.web.site import NOT_DONE, Evaluation, WebTask
from agentgym.extras import pip_install

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page, Request, Route

__all__ = ["ORIGIN", "MiniWoBSite"]

ORIGIN = "http://miniwob.agentgym.test"
EPISODE_MAX_MS = 2_000_000_000
"""MiniWoB's own episode timer (just under ``setTimeout``'s 2**31 ms limit): never the limit."""
READY_TIMEOUT_MS = 5_000

_START = """
<style>
#reward-display, #click-canvas, #sync-task-cover, #query { display: none !important; }
</style>
<script>
window.addEventListener('load', function () {
  Math.seedrandom(%(seed)d);
  core.EPISODE_MAX_TIME = %(max_ms)d;
  core.startEpisodeReal();
  core.clearTimer();
  // click-link draws its links as styled <span>s: give them the role they play.
  document.querySelectorAll('.alink').forEach(function (e) { e.setAttribute('role', 'link'); });
  window.__agentgymMiniwob = true;
});
</script>
"""

_READY = "() => window.__agentgymMiniwob === true && WOB_TASK_READY !== false"
_UTTERANCE = """() => {
  if (window.__agentgymMiniwob !== true || WOB_TASK_READY === false) return null;
  const u = core.getUtterance();
  return typeof u === 'string' ? u : String(u.utterance);
}"""
_RESTART = """({seed, path, maxMs}) => {
  if (window.__agentgymMiniwob !== true || location.pathname !== path) return false;
  if (document.activeElement) document.activeElement.blur();
  // ids as a freshly loaded page would give them (reset(seed=s) must not depend on history)
  document.querySelectorAll('[data-agentgym-id]').forEach(function (e) {
    e.removeAttribute('data-agentgym-id');
  });
  delete window.__agentgymNext;
  Math.seedrandom(seed);
  core.EPISODE_MAX_TIME = maxMs;
  core.startEpisodeReal();
  core.clearTimer();
  document.querySelectorAll('.alink').forEach(function (e) { e.setAttribute('role', 'link'); });
  return true;
}"""
_STATE = """(path) => (window.__agentgymMiniwob !== true || location.pathname !== path) ? null
  : {done: WOB_DONE_GLOBAL === true, raw: Number(WOB_RAW_REWARD_GLOBAL)}"""


MINIWOB_INSTALL = f"{pip_install('web')} (it installs miniwob, which ships the pages)"


@lru_cache(maxsize=1)
def package_html() -> Traversable:
    """The ``html/`` folder of the installed ``miniwob`` package."""
    spec = importlib.util.find_spec("miniwob")
    # A folder named miniwob on sys.path (a namespace package) is not the package.
    if spec is None or spec.origin is None:
        raise ImportError(f"MiniWoB-v0 serves the miniwob package's pages. Fix: {MINIWOB_INSTALL}")
    return resources.files("miniwob").joinpath("html")


@lru_cache(maxsize=512)
def _package_file(path: str) -> bytes | None:
    """The bytes of ``miniwob/html/<path>`` in the installed package, or ``None``."""
    clean = posixpath.normpath(path).lstrip("/")
    if clean.startswith("..") or not clean:
        return None
    node = package_html().joinpath(*clean.split("/"))
    return node.read_bytes() if node.is_file() else None


def _content_type(path: str) -> str:
    kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
    return f"{kind}; charset=utf-8" if kind.startswith("text/") or kind.endswith("script") else kind


def task_page(path: str, seed: int) -> bytes | None:
    """The task page at ``path`` with the start script for ``seed`` appended."""
    body = _package_file(path)
    if body is None:
        return None
    start = (_START % {"seed": seed, "max_ms": EPISODE_MAX_MS}).encode()
    cut = body.rfind(b"</body>")
    return body + start if cut < 0 else body[:cut] + start + body[cut:]


class MiniWoBSite:
    """MiniWoB++ pages as a :class:`~agentgym.envs.web.site.Site` (see the module docstring).

    Args:
        tasks: the tasks to serve (``agentgym.envs.web.miniwob.tasks.select_tasks``); each
            task's ``data["page"]`` is its page under the package's ``html/`` folder.
    """

    name = "miniwob"

    def __init__(self, tasks: Sequence[WebTask]) -> None:
        package_html()  # fail at construction, not at the first request, without the package
        self._tasks = tuple(tasks)
        self._seeds: dict[BrowserContext, int] = {}
        """The seed each open context's task page starts with (a reload replays it)."""

    def tasks(self) -> Sequence[WebTask]:
        return self._tasks

    def allowed_origins(self) -> tuple[str, ...]:
        return (ORIGIN,)

    async def open(self, context: BrowserContext, page: Page, task: WebTask, seed: int) -> str:
        start_path = "/" + str(task.data["page"])
        self._seeds[context] = seed

        async def serve(route: Route, request: Request) -> None:
            path = urlsplit(request.url).path
            if path == start_path:
                body = task_page(path, self._seeds.get(context, seed))
            else:
                body = _package_file(path)
            if body is None:
                await route.fulfill(status=404, body=b"not found", content_type="text/plain")
            else:
                await route.fulfill(status=200, body=body, content_type=_content_type(path))

        await context.route(f"{ORIGIN}/**", serve)
        return ORIGIN + start_path

    async def restart(self, page: Page, task: WebTask, seed: int) -> bool:
        """Start a new episode of ``task`` inside the loaded page, as MiniWoB's own env does
        (about 10 ms instead of a new context's few hundred); ``False`` when ``page`` is not
        this task's started page (the env then opens a fresh context)."""
        path = "/" + str(task.data["page"])
        args = {"seed": seed, "path": path, "maxMs": EPISODE_MAX_MS}
        restarted = bool(await page.evaluate(_RESTART, args))
        if restarted:
            self._seeds[page.context] = seed
        return restarted

    async def wait_started(self, page: Page, timeout: float) -> bool:
        """Wait (at most ``timeout`` seconds) until the loaded page has started its task;
        True when it had not yet."""
        if await page.evaluate(_READY):
            return False
        await page.wait_for_function(_READY, timeout=timeout * 1000)
        return True

    async def instruction(self, page: Page, task: WebTask) -> str:
        """The task's utterance, read from the started page (it depends on the seed)."""
        text = await page.evaluate(_UTTERANCE)  # one round trip when the page has started
        if text is None:
            await page.wait_for_function(_READY, timeout=READY_TIMEOUT_MS)
            text = await page.evaluate(_UTTERANCE)
        return str(text)

    async def evaluate(self, page: Page, task: WebTask, answer: str | None) -> Evaluation:
        path = "/" + str(task.data["page"])
        state: dict[str, Any] | None = await page.evaluate(_STATE, path)
        if state is None:  # the agent left the task page (goto, go_back): nothing to grade
            return Evaluation(reward=0.0, success=False, done=True, components={"miniwob": 0.0})
        if not state["done"]:
            return NOT_DONE
        raw = float(state["raw"])
        return Evaluation(reward=raw, success=raw >= 1.0, done=True, components={"miniwob": raw})

    async def close(self, context: BrowserContext) -> None:
        self._seeds.pop(context, None)  # the route handler dies with the context
