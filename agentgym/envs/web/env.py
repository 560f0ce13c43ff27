"""``WebEnv``: a task on a web site, in a real Chromium, as chat turns."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym
import numpy as np

from agentgym.core.aio import deadline
from agentgym.core.env import AgentEnv, StepResult
from agentgym.core.errors import ConfigError, DeadlineExceeded
from agentgym.core.parsing import call_format
from agentgym.core.tools import clip
from agentgym.core.types import Action, Observation, is_turn, system, user
from agentgym.envs.validate import integer, real, seconds
from agentgym.envs.web import actions as grammar
from agentgym.envs.web.arguments import flag, make_site, viewport_size
from agentgym.envs.web.browser import (
    BrowserPool,
    BrowserUnavailable,
    Lease,
    Traffic,
    is_browser_gone,
    pool_for_running_loop,
    release_pool,
    settle,
)
from agentgym.envs.web.observe import Node, PageView, read_page, render, screenshot
from agentgym.envs.web.site import Evaluation, Site, WebTask
from agentgym.envs.web.turns import Reading, read_turn

if TYPE_CHECKING:
    from playwright.async_api import Page

__all__ = ["WebEnv"]

log = logging.getLogger(__name__)

RULES = f"""You are using a web browser to do a task. Each turn shows the page as text: one \
element per line, with an id in brackets for those you can act on, e.g. [12] button "Add to cart".
Answer each turn with exactly one action: {grammar.GRAMMAR}.
Write the action alone (or in a ``` block), or call the tool of the same name. When the task is \
done, call stop with the answer if the task asks for one, else stop("")."""
TEXT_RULES = RULES.replace(", or call the tool of the same name", "")
"""The rules of ``WebEnv(tool=False)``: actions as text only."""


@dataclass
class _Episode:
    task: WebTask
    lease: Lease | None
    page: Page | None
    traffic: Traffic | None = None
    view: PageView | None = None
    steps: int = 0
    over: bool = False
    infra_error: str | None = None
    broken: bool = False
    image: np.ndarray | None = None


class WebEnv(AgentEnv):
    """Do a task on a web site in a real Chromium: the embedded shop, MiniWoB++ or your own site.

    Description:
        Each episode is one task of a ``Site`` (:mod:`agentgym.envs.web.site`) played in a fresh
        browser context of a shared headless Chromium (one per event loop, replaced every
        ``recycle_every`` episodes). ``reset(seed=s)`` draws the task from ``np_random`` (the
        same seed, the same task and page); ``options={"task_id": ...}`` pins one. With neither
        ``site`` nor ``start_url`` the site is the embedded shop (``agentgym.envs.web.shop``);
        with ``start_url`` and ``tasks`` it is your own server, graded by checks on the end
        state (:mod:`agentgym.envs.web.checks`).

    Observation:
        On reset, a system message with the rules (with tools, how to write a tool call in the
        ``tool_parser`` format) and a user message with the task and the page;
        each step, the page after the action (a tool message answering the call, or a user
        message for a text action). The page is the URL, the focused element, the last action's
        error and the visible elements, one per line (``[12] button "Add to cart"``; ids are
        stable while the element lives), cut to ``max_obs_chars`` with a note.
        ``env.unwrapped.nodes`` holds them as ``Node``s for code.

    Action:
        One action per turn, parsed by a grammar (never evaluated): ``click(id)``,
        ``fill(id, "text")``, ``select_option(id, "option")``, ``press("Enter")``,
        ``hover(id)``, ``scroll("down"|"up")``, ``go_back()``, ``goto("/path")`` (only within
        the site), ``stop("answer")``; as text (alone, in a fenced block, or the last line that
        holds one) or as one tool call. Anything else is an invalid action: the page again with
        the error, and ``invalid_action_penalty``; the episode goes on.

    Tools:
        ``click``, ``fill``, ``select_option``, ``press``, ``hover``, ``scroll``, ``go_back``,
        ``goto``, ``stop`` with the parameters above (schemas in ``info["tools"]``).

    Reward:
        The site's reward (the shop: WebShop's formula on the order placed; MiniWoB++: the raw
        task reward; your own site: the product of the checks' scores), paid on the step that
        ends the episode, plus ``invalid_action_penalty`` for each invalid action.
        ``info["reward_components"]`` is ``{"task": ..., "invalid_action": ...}`` (the site's own
        parts under ``task/<name>`` on the final step).

    Episode end:
        Terminated when the site says the episode is over (an order placed, a MiniWoB++ episode
        done, every check passing) or on ``stop``; ``info["success"]`` then says whether the
        task was done. Truncated after ``max_steps`` steps (``truncation_reason`` ``"max_turns"``)
        or when the browser crashed or hung: ``infra_error`` True, ``truncation_reason``
        ``"infra_error"``, reward 0 (that episode only; the next reset starts a new browser).
        A step past ``step_timeout`` whose browser still answers hung in the page the model's
        action left (a script that loops): terminated, reward 0, ``timed_out`` True, a scored
        ``timeout`` outcome, never dropped.
        Stepping an ended episode raises ``EnvStateError``.

    Arguments:
        site: a ``Site``; default: the embedded shop.
        start_url: your own site's start URL (its origin is the only one allowed); with it,
            ``tasks`` (a JSONL path or a list of dicts, see :mod:`agentgym.envs.web.checks`).
        max_steps: steps before truncation.
        max_obs_chars: the page text's budget in characters (about 4 per token).
        action_choices: offer ``info["action_choices"]`` (every click and option on the page,
            and ``stop("")``) when they are at most this many; ``None``: never.
        invalid_action_penalty: reward of an invalid action (<= 0).
        screenshot_in_info: put the page's screenshot (``H x W x 3`` uint8) in
            ``info["screenshot"]`` after every reset and step (for vision models).
        viewport: the page's size in CSS pixels (width, height).
        recycle_every: episodes per browser before it is replaced.
        step_timeout: seconds a step (action, settling, grading, reading) may take; past it, an
            ``infra_error``.
        action_timeout: seconds an action waits for its element (hidden, disabled, covered): past
            it, the action fails as the model's error.
        settle_timeout: the cap on waiting for the page to be quiet after an action.
        probe_timeout: seconds the check may take, after a step ran past ``step_timeout``, that
            the browser still answers: then the page the model's action left hung (a scored
            ``timed_out`` step that ends the episode), else the browser did (``infra_error``).
        tool: offer the actions as tools; False: text actions only.
        tool_parser: parser for tool calls written as text (see :mod:`agentgym.core.parsing`).
        render_mode: ``"ansi"``/``"human"``: the page as text; ``"rgb_array"``: a screenshot.

    Sandbox: what is isolated and what is not:
        Each episode has its own browser context (cookies, storage, cache), so episodes cannot
        see each other's state. The browser can reach only the site's origins: every other
        request is aborted (websockets and DNS prefetch are not routed, but Chromium's background
        networking is off). Chromium runs WITHOUT its own sandbox (``--no-sandbox``, so it runs
        as root in containers) as the agent's user: the pages are the site's, not arbitrary web
        content, but a malicious page that escaped the renderer would have the agent's rights.
        Your own site's ``js`` checks run on its pages with the page's rights, and ``http``
        checks call your server from the agent's process.

    Reset info keys: ``tools``, ``task_id``, ``instruction``, ``url``, ``max_steps``,
    ``action_choices``, ``infra_error``, ``error``, ``screenshot``. Step info keys: ``task_id``,
    ``success``, ``reward_components``, ``task_components`` (the site's parts of the task
    reward, on the final step), ``invalid_action``, ``url``, ``step``, ``action_choices``,
    ``truncation_reason``, ``infra_error``, ``error``, ``screenshot``.

    Version history:
        v0: first version. Before the first release, the rules say how to write a tool call in
        text (``agentgym.core.parsing.call_format``), and with ``tool=False`` no longer offer a
        tool; wording only, no bump. Then a page the model's action hung (the browser still
        answering) became a scored ``timed_out`` step (reward 0, terminated) instead of a
        dropped ``infra_error``; rewards are unchanged, no bump.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "human", "rgb_array"],
        "render_fps": 4,
    }

    def __init__(
        self,
        *,
        site: Site | None = None,
        start_url: str | None = None,
        tasks: str | Path | Sequence[Mapping[str, Any]] | None = None,
        max_steps: int = 30,
        max_obs_chars: int = 12_000,
        action_choices: int | None = 64,
        invalid_action_penalty: float = 0.0,
        screenshot_in_info: bool = False,
        viewport: tuple[int, int] = (1280, 720),
        recycle_every: int = 200,
        step_timeout: float = 30.0,
        action_timeout: float = 3.0,
        settle_timeout: float = 2.0,
        probe_timeout: float = 10.0,
        tool: bool = True,
        tool_parser: str = "hermes",
        render_mode: str | None = None,
    ) -> None:
        self.tool = flag("tool", tool)
        super().__init__(
            tools=grammar.TOOLS if self.tool else (),
            tool_parser=tool_parser,
            render_mode=render_mode,
        )
        self.rules = f"{RULES} {call_format(tool_parser)}".strip() if self.tool else TEXT_RULES
        self.site: Site = make_site(site, start_url, tasks)
        self._tasks = tuple(self.site.tasks())
        if not self._tasks:
            raise ConfigError("site", self.site, "has no tasks", "give the site at least one task")
        self._by_id = {t.task_id: t for t in self._tasks}
        self.max_steps = integer("max_steps", max_steps, 1)
        self.max_obs_chars = integer("max_obs_chars", max_obs_chars, 200)
        self.action_choices = (
            None if action_choices is None else integer("action_choices", action_choices, 1)
        )
        self.invalid_action_penalty = real(
            "invalid_action_penalty", invalid_action_penalty, "pass a float <= 0, e.g. -0.1"
        )
        if self.invalid_action_penalty > 0:
            raise ConfigError(
                "invalid_action_penalty",
                invalid_action_penalty,
                "must be <= 0 (a penalty)",
                "pass e.g. -0.1, or 0",
            )
        self.screenshot_in_info = flag("screenshot_in_info", screenshot_in_info)
        self.viewport = viewport_size(viewport)
        self.recycle_every = integer("recycle_every", recycle_every, 1)
        self.step_timeout = seconds("step_timeout", step_timeout)
        self.action_timeout = seconds("action_timeout", action_timeout)
        self.settle_timeout = seconds("settle_timeout", settle_timeout)
        self.probe_timeout = seconds("probe_timeout", probe_timeout)
        self._pool: BrowserPool | None = None
        self._episode: _Episode | None = None

    # --- Gymnasium API ------------------------------------------------------------------------

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        await self._end_episode()
        task = self._choose_task(options)
        site_seed = int(self.np_random.integers(2**31))
        self._episode = episode = _Episode(task, None, None)
        try:
            # Starting Chromium has its own deadline (launch_timeout); the episode's is a step's.
            await (await self._pool_here()).ready()
            async with deadline(self.step_timeout, f"opening task {task.task_id}"):
                await self._open(episode, site_seed)
        except BrowserUnavailable:
            await self._end_episode()
            raise
        except Exception as e:
            self._infra(episode, e)
        info: dict[str, Any] = {
            "tools": self.tool_schemas(),
            "task_id": task.task_id,
            "instruction": task.instruction,
            "url": episode.page.url if episode.page is not None and not episode.infra_error else "",
            "max_steps": self.max_steps,
            "infra_error": episode.infra_error is not None,
        }
        if episode.infra_error is not None:
            info["error"] = episode.infra_error
            page_text = f"(the browser failed: {episode.infra_error})"
        else:
            page_text = self._page_text(episode, None)
            self._add_view_info(episode, info)
        observation = (system(self.rules), user(f"Task: {task.instruction}\n\n{page_text}"))
        return observation, info

    async def astep(self, action: Action) -> StepResult:
        episode = self._episode
        assert episode is not None  # AgentEnv refuses a step before a reset
        episode.steps += 1
        reading = self._read(action)
        if episode.infra_error is not None:
            return await self._infra_step(episode, reading)
        try:
            what = f"step {episode.steps} of {episode.task.task_id}"
            async with deadline(self.step_timeout, what):
                error, evaluation = await self._act(episode, reading)
        except DeadlineExceeded as e:
            if reading.action is not None and await self._browser_answers(episode):
                return await self._hung_page_step(episode, reading)
            self._infra(episode, e)
            return await self._infra_step(episode, reading)
        except Exception as e:
            self._infra(episode, e)
            return await self._infra_step(episode, reading)
        return await self._transition(episode, reading, error, evaluation)

    async def aclose(self) -> None:
        try:
            await self._end_episode()
            pool, self._pool = self._pool, None
            if pool is not None:
                await release_pool(pool)
        finally:
            await super().aclose()

    def render(self) -> Any:  # type: ignore[override]
        if self.render_mode is None:
            gym.logger.warn("render() needs a render_mode; make the env with render_mode='ansi'")
            return None
        episode = self._episode
        if self.render_mode == "rgb_array":
            if episode is None or episode.image is None:
                return np.zeros((self.viewport[1], self.viewport[0], 3), dtype=np.uint8)
            return episode.image
        text = "" if episode is None or episode.view is None else self._page_text(episode, None)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes of the latest observation (for oracles and tests)."""
        episode = self._episode
        return () if episode is None or episode.view is None else episode.view.nodes

    @property
    def page(self) -> Page | None:
        """The episode's Playwright page (for oracles and tests; use it on the env's loop)."""
        return None if self._episode is None else self._episode.page

    @property
    def tasks(self) -> tuple[WebTask, ...]:
        return self._tasks

    # --- internals --------------------------------------------------------------------------

    def _choose_task(self, options: dict[str, Any] | None) -> WebTask:
        options = {k: v for k, v in (options or {}).items() if v is not None}
        unknown = sorted(set(options) - {"task_id"})
        if unknown:
            raise ConfigError(
                "options", options, f"has unknown keys {unknown}", "pass only {'task_id': ...}"
            )
        if "task_id" not in options:
            return self._tasks[int(self.np_random.integers(len(self._tasks)))]
        task = self._by_id.get(str(options["task_id"]))
        if task is None:
            some = ", ".join(repr(t.task_id) for t in self._tasks[:5])
            raise ConfigError(
                "options['task_id']",
                options["task_id"],
                f"is not a task of {self.site.name}",
                f"pass one of env.unwrapped.tasks, e.g. {some}",
            )
        return task

    async def _pool_here(self) -> BrowserPool:
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._pool.loop is not loop:
            old, self._pool = self._pool, None
            await release_pool(old)
        if self._pool is None:
            launch = max(self.step_timeout, 30.0)
            self._pool = pool_for_running_loop(self.recycle_every, launch)
        return self._pool

    async def _open(self, episode: _Episode, site_seed: int) -> None:
        pool = await self._pool_here()
        width, height = self.viewport
        episode.lease, episode.page = lease, page = await pool.new_page(
            self.step_timeout,
            viewport={"width": width, "height": height},
            service_workers="block",
            accept_downloads=False,
        )
        start = await self.site.open(lease.context, page, episode.task, site_seed)
        allowed = self._allowed()

        async def egress(route: Any) -> None:
            if grammar.origin_of(route.request.url) in allowed:
                await route.fallback()
            else:
                await route.abort("blockedbyclient")

        # Registered after the site's handlers, so it runs first (Playwright runs routes in
        # reverse order of registration): no other origin reaches the site's handlers or the net.
        await lease.context.route("**/*", egress)
        episode.traffic = Traffic(page)
        await page.goto(start, wait_until="commit", timeout=self.step_timeout * 1000)
        await settle(page, episode.traffic, self.settle_timeout)
        await self._started(episode)
        await self._observe(episode)

    async def _started(self, episode: _Episode) -> None:
        """Wait until a freshly opened start page is ready for its first observation, beyond
        the settle above (a site with its own signal that the task has started overrides this;
        the step's deadline bounds it)."""

    def _allowed(self) -> tuple[str, ...]:
        return tuple(o.lower().rstrip("/") for o in self.site.allowed_origins())

    def _read(self, action: Action) -> Reading:
        if not is_turn(action):
            return Reading(None, "the action is not text or an assistant message")
        return read_turn(self.parse(action), self.tool)

    async def _act(self, episode: _Episode, reading: Reading) -> tuple[str | None, Evaluation]:
        page, action = episode.page, reading.action
        assert page is not None  # an open episode has a page and a view
        assert episode.view is not None
        if action is None:
            return reading.error, _NOTHING
        if action.name == "stop":
            answer = str(action.arguments["answer"])
            return None, await self.site.evaluate(page, episode.task, answer)
        error = await grammar.perform(
            page, action, episode.view, self.action_timeout, self._allowed()
        )
        page = self._follow_popup(episode)
        await settle(page, episode.traffic, self.settle_timeout)
        evaluation = await self.site.evaluate(page, episode.task, None)
        await self._observe(episode)
        return error, evaluation

    def _follow_popup(self, episode: _Episode) -> Page:
        """A link that opened a new tab: go on in the newest tab. The episode's page."""
        assert episode.lease is not None
        assert episode.page is not None
        pages = episode.lease.context.pages
        if pages and pages[-1] is not episode.page:
            episode.page = pages[-1]
            episode.traffic = Traffic(episode.page)
        return episode.page

    async def _observe(self, episode: _Episode) -> None:
        assert episode.page is not None
        episode.view = await read_page(episode.page, self.step_timeout)
        if self.screenshot_in_info or self.render_mode == "rgb_array":
            episode.image = await screenshot(episode.page, self.step_timeout)

    async def _transition(
        self, episode: _Episode, reading: Reading, error: str | None, evaluation: Evaluation
    ) -> StepResult:
        invalid = reading.action is None or error is not None
        stopped = reading.action is not None and reading.action.name == "stop"
        terminated = evaluation.done or stopped
        truncated = not terminated and episode.steps >= self.max_steps
        episode.over = terminated or truncated
        components = {
            "task": float(evaluation.reward) if episode.over else 0.0,
            "invalid_action": self.invalid_action_penalty if invalid else 0.0,
        }
        info: dict[str, Any] = {
            "task_id": episode.task.task_id,
            "success": bool(evaluation.success) if episode.over else False,
            "reward_components": components,
            "invalid_action": invalid,
            "step": episode.steps,
        }
        if episode.over:
            info["task_components"] = {k: float(v) for k, v in evaluation.components.items()}
        content = self._page_text(episode, None if error is None else clip(error, 600))
        if not episode.over:
            self._add_view_info(episode, info)
        else:
            info["url"] = episode.view.url if episode.view is not None else ""
            if self.screenshot_in_info and episode.image is not None:
                info["screenshot"] = episode.image
        if truncated:
            info["truncation_reason"] = "max_turns"
            content += "\nOut of steps."
        if episode.over:
            await self._end_episode()
        return reading.reply(content), float(sum(components.values())), terminated, truncated, info

    def _page_text(self, episode: _Episode, error: str | None) -> str:
        assert episode.view is not None
        return render(episode.view, error, self.max_obs_chars)

    def _add_view_info(self, episode: _Episode, info: dict[str, Any]) -> None:
        assert episode.view is not None
        info["url"] = episode.view.url
        if self.action_choices is not None:
            choices = grammar.action_choices(episode.view, self.action_choices)
            if choices:
                info["action_choices"] = choices
        if self.screenshot_in_info and episode.image is not None:
            info["screenshot"] = episode.image

    def _infra(self, episode: _Episode, error: BaseException) -> None:
        text = f"{type(error).__name__}: {str(error).strip()[:500]}"
        log.warning(
            "web episode of task %s failed outside the model: %s", episode.task.task_id, text
        )
        episode.infra_error = text
        episode.broken = is_browser_gone(error) or isinstance(error, TimeoutError)

    async def _browser_answers(self, episode: _Episode) -> bool:
        """Whether the episode's browser still works (a fresh page in a fresh context evaluates
        within ``probe_timeout``): then a step that ran past its deadline hung in the page the
        model's action left (a script that loops, a page that never settles), not in the
        browser."""
        if episode.lease is None or episode.lease.launched.gone:
            return False
        browser = episode.lease.launched.browser
        try:
            async with deadline(self.probe_timeout, "probing the browser"):
                context = await browser.new_context()
                try:
                    page = await context.new_page()
                    return await page.evaluate("() => 6 * 7") == 42
                finally:
                    await context.close()
        except Exception:
            return False

    async def _hung_page_step(self, episode: _Episode, reading: Reading) -> StepResult:
        """The model's action left a page that did not answer within ``step_timeout`` while the
        browser did: a scored timeout (reward 0, the episode ends), never a dropped infra
        error (a dropped timeout is an exit the policy could learn to take). The browser is
        replaced, which kills the spinning renderer."""
        log.info(
            "web episode of task %s: the page hung after step %d (a timeout, scored)",
            episode.task.task_id,
            episode.steps,
        )
        episode.broken = True
        await self._end_episode()
        episode.over = True
        info = {
            "task_id": episode.task.task_id,
            "success": False,
            "reward_components": {"task": 0.0, "invalid_action": 0.0},
            "invalid_action": False,
            "timed_out": True,
            "step": episode.steps,
            "url": episode.view.url if episode.view is not None else "",
        }
        content = (
            f"The page did not respond within {self.step_timeout:g} s after your action; "
            "the episode ends."
        )
        return reading.reply(content), 0.0, True, False, info

    async def _infra_step(self, episode: _Episode, reading: Reading) -> StepResult:
        await self._end_episode()
        info = {
            "task_id": episode.task.task_id,
            "reward_components": {"task": 0.0, "invalid_action": 0.0},
            "invalid_action": reading.action is None,
            "step": episode.steps,
            "infra_error": True,
            "error": episode.infra_error or "the browser failed",
            "truncation_reason": "infra_error",
        }
        content = f"The browser failed ({episode.infra_error}); the episode ends."
        return reading.reply(content), 0.0, False, True, info

    async def _end_episode(self) -> None:
        episode = self._episode
        if episode is None or episode.lease is None:
            return
        lease, episode.lease = episode.lease, None
        pool = self._pool
        if pool is None or pool.loop is not asyncio.get_running_loop():
            return  # the context lives on another loop; its browser goes with that pool
        with contextlib.suppress(Exception):
            async with deadline(self.step_timeout, "closing the site's episode"):
                await self.site.close(lease.context)
        await pool.end(lease, self.step_timeout, broken=episode.broken)


_NOTHING = Evaluation(reward=0.0, success=False, done=False)
