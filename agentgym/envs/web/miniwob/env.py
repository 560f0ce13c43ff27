"""``MiniWoBEnv``: curated MiniWoB++ tasks in a real Chromium (``agentgym/MiniWoB-v0``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from agentgym.core.aio import deadline
from agentgym.core.types import Observation, user
from agentgym.envs.validate import integer
from agentgym.envs.web.browser import Lease, Traffic, settle
from agentgym.envs.web.env import WebEnv, _Episode
from agentgym.envs.web.miniwob.site import MiniWoBSite
from agentgym.envs.web.miniwob.tasks import MIX, select_tasks

__all__ = ["MiniWoBEnv"]


class MiniWoBEnv(WebEnv):
    """Do a MiniWoB++ task (click a button, fill a form, pick from a list...) in a real Chromium.

    Description:
        MiniWoB++ (Liu et al. 2018) pages from the ``miniwob`` package, served offline through
        request interception on ``http://miniwob.agentgym.test``. ``task=`` picks one of the
        curated tasks (:data:`agentgym.envs.web.miniwob.tasks.CURATED`: ones the element-id
        actions can solve, each with a declared difficulty 0-2) or ``"mix"`` (all of them;
        ``reset(seed=s)`` picks one, ``options={"task_id": "click-button"}`` pins one). The
        page's generator is seeded with the episode seed (``Math.seedrandom``), so a seed fixes
        the problem: the same instruction and the same page.

    Observation:
        As ``agentgym/Web-v0``: on reset a system message with the action grammar and a user
        message with the instruction (the page's own utterance, e.g. ``Click on the "Ok"
        button.``) and the page as text (``[3] button "Ok"``); each step adds the new page, the
        focused element and the last action's error. MiniWoB's display (instruction box,
        reward and timer panel) is hidden from the page.

    Action:
        ``click(id)``, ``fill(id, "text")``, ``select_option(id, "value")``, ``press("Enter")``,
        ``hover(id)``, ``scroll("down")``, ``go_back()``, ``goto("/path")``, ``stop("answer")``,
        as text or as tool calls (see ``agentgym/Web-v0``).

    Tools:
        One tool per action, schemas in ``info["tools"]`` on reset (as ``agentgym/Web-v0``).

    Reward:
        MiniWoB's raw reward, before its time discount, on the step that ends the task: 1.0 for
        a solved task, -1.0 for a wrong answer (a wrong button, a wrong text), a fraction in
        between for partly right answers of some tasks; 0.0 on every other step and when the
        agent leaves the task page. ``info["success"]`` is True when the raw reward is 1.0.
        ``info["reward_components"]`` holds ``{"miniwob": ...}`` and the env's
        ``invalid_action`` part.

    Episode end:
        Terminated when MiniWoB ends the task (a decisive click or submit) or the agent leaves
        the task page or calls ``stop``; truncated after ``max_steps`` steps. MiniWoB's own
        10-second episode timer is disabled: the step limit bounds an episode instead, so a
        slow model is not penalised for thinking.

    Arguments:
        task: a curated task name, a sequence of names, or ``"mix"`` (default). An unknown
            name raises ``ConfigError`` listing the names.
        max_steps: steps before truncation (10 by default: every curated task needs at most 5).
        viewport: the page size in pixels; MiniWoB's pages are 160x210.
        step_timeout: as ``agentgym/Web-v0``'s, 120 s by default (a vector env of 64 opening
            its first pages at once on two cores needs more than 30 s).
        reuse_page: episodes in a row that may restart inside the loaded page (MiniWoB's own
            ``core.startEpisodeReal()`` with the new seed, as its own env does) when the task
            is the same, before a fresh browser context; 0: a fresh context every episode.
            A restarted page gives the same observation as a fresh one for the same seed.
        **kwargs: the other arguments of ``agentgym/Web-v0``'s ``WebEnv`` (``action_choices``,
            ``max_obs_chars``, ``invalid_action_penalty``, ``screenshot_in_info``,
            ``recycle_every``, ``step_timeout``, ``settle_timeout``, ``tool``, ``tool_parser``,
            ``render_mode``).

    Sandbox:
        Isolated: each episode's cookies, storage and page state live in their own browser
        context; the browser reaches nothing but the intercepted origin (every other request is
        aborted), so a page cannot talk to the network. The pages are the ``miniwob`` package's
        own files, read from the installed package. Not isolated: all episodes of a worker share
        one Chromium process (recycled every ``recycle_every`` episodes), run with
        ``--no-sandbox``; consecutive episodes of the same task may reuse the loaded page
        (MiniWoB restarts its task in place, as its own env does), so JS globals a page does not
        reset can carry over between such episodes.

    Reset info keys: ``tools``, ``task_id``, ``instruction`` (the page's utterance), ``url``,
    ``max_steps``, ``action_choices``, ``infra_error``, ``error``, ``screenshot``. Step info
    keys: ``task_id``, ``success``, ``reward_components``,
    ``task_components``, ``invalid_action``, ``url``, ``step``, ``action_choices``,
    ``truncation_reason``, ``infra_error``, ``error``, ``screenshot``.

    Version history:
        v0: first version.
    """

    def __init__(
        self,
        *,
        task: str | Sequence[str] = MIX,
        max_steps: int = 10,
        viewport: tuple[int, int] = (480, 360),
        reuse_page: int = 50,
        **kwargs: Any,
    ) -> None:
        self.miniwob_tasks = select_tasks(task)
        self.miniwob = MiniWoBSite(self.miniwob_tasks)
        # A trainer opens its 32-64 envs' first pages at once; on two cores that exceeds 30 s.
        kwargs.setdefault("step_timeout", 120.0)
        super().__init__(site=self.miniwob, max_steps=max_steps, viewport=viewport, **kwargs)
        self.instruction: str | None = None
        """The episode's instruction: the page's utterance, read after the start."""
        self.reuse_page = integer("reuse_page", reuse_page, 0)
        self._parked: tuple[Lease, Any] | None = None
        """The last episode's context and page, kept for an in-page restart."""
        self._reused = 0

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        observation, info = await super().areset(seed=seed, options=options)
        self.instruction = None
        page = self.page
        if page is None or info.get("infra_error"):
            return observation, info
        task = next(t for t in self.miniwob_tasks if t.task_id == info["task_id"])
        # The utterance depends on the seed, so the task's static instruction stands in for it
        # until the page has started; the reset message shows the page's own.
        self.instruction = await self.miniwob.instruction(page, task)
        info["instruction"] = self.instruction
        *head, last = observation
        content = str(last["content"]).replace(task.instruction, self.instruction, 1)
        return (*head, user(content)), info

    async def aclose(self) -> None:
        try:
            await self._drop_parked()
        finally:
            await super().aclose()

    # --- in-page restarts: MiniWoB's own way of starting the next episode ----------------------

    async def _open(self, episode: _Episode, site_seed: int) -> None:
        parked, self._parked = self._parked, None
        if parked is not None:
            lease, page = parked
            restarted = False
            with contextlib.suppress(Exception):
                async with deadline(self.step_timeout, "restarting the page"):
                    restarted = await self.miniwob.restart(page, episode.task, site_seed)
            if restarted:
                self._reused += 1
                episode.lease, episode.page, episode.traffic = lease, page, Traffic(page)
                await settle(page, episode.traffic, self.settle_timeout)
                await self._observe(episode)
                return
            await self._end_lease(lease)
        self._reused = 0
        await super()._open(episode, site_seed)

    async def _started(self, episode: _Episode) -> None:
        """MiniWoB builds the task in the page's load handler, which a busy machine can run
        after the settle's cap: the first observation would show an empty page. Wait for the
        task to start (under the step's timeout), then for the page to be quiet."""
        page = episode.page
        assert page is not None
        if await self.miniwob.wait_started(page, self.step_timeout):
            await settle(page, episode.traffic, self.settle_timeout)

    async def _end_episode(self) -> None:
        episode = self._episode
        if self._can_park(episode):
            assert episode is not None
            assert episode.lease is not None
            self._parked, episode.lease = (episode.lease, episode.page), None
            return
        await super()._end_episode()

    def _can_park(self, episode: _Episode | None) -> bool:
        if episode is None or episode.lease is None or episode.page is None:
            return False
        launched = episode.lease.launched
        pool = self._pool
        return (
            self._reused < self.reuse_page
            and episode.infra_error is None
            and not episode.broken
            and not (launched.retired or launched.crashed)
            and pool is not None
            and pool.loop is asyncio.get_running_loop()
            and not episode.page.is_closed()
        )

    async def _drop_parked(self) -> None:
        parked, self._parked = self._parked, None
        if parked is not None:
            await self._end_lease(parked[0])

    async def _end_lease(self, lease: Lease) -> None:
        pool = self._pool
        if pool is None or pool.loop is not asyncio.get_running_loop():
            return  # the context lives on another loop; its browser goes with that pool
        with contextlib.suppress(Exception):
            async with deadline(self.step_timeout, "closing the site's episode"):
                await self.site.close(lease.context)
        await pool.end(lease, self.step_timeout)
