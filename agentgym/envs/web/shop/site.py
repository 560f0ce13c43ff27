"""``ShopSite``: the embedded shop as a ``Site``, served to Chromium by request interception."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentgym.core.errors import ConfigError
from agentgym.envs.web.shop.app import ShopApp
from agentgym.envs.web.shop.grading import Goal, grade_order
from agentgym.envs.web.shop.tasks import load_tasks
from agentgym.envs.web.site import NOT_DONE, Evaluation, WebTask

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page, Route

__all__ = ["ORIGIN", "ShopSite"]

ORIGIN = "http://shop.agentgym.test"
_IDS = itertools.count()


class ShopSite:
    """The shop at :data:`ORIGIN`: each episode (``BrowserContext``) gets its own session of one
    shared :class:`ShopApp`, whose pages a ``context.route`` handler serves; nothing leaves the
    process. The episode is done when an order is placed (graded by WebShop's formula, see
    :mod:`agentgym.envs.web.shop.grading`) or when the agent stops without one (reward 0).

    Arguments:
        difficulties: keep only tasks of these declared difficulties (0-3); all by default.
    """

    name = "shop"

    def __init__(self, difficulties: Sequence[int] | None = None) -> None:
        tasks = load_tasks()
        if difficulties is not None:
            wanted = set(difficulties)
            if not wanted <= {0, 1, 2, 3}:
                raise ConfigError("difficulties", difficulties, "has values outside 0-3",
                                  "pick from 0, 1, 2, 3")  # fmt: skip
            tasks = tuple(t for t in tasks if t.difficulty in wanted)
        self._tasks = tasks
        self.app = ShopApp()
        self._sessions: dict[int, str] = {}  # id(context) -> session id

    def tasks(self) -> Sequence[WebTask]:
        return self._tasks

    def allowed_origins(self) -> tuple[str, ...]:
        return (ORIGIN,)

    async def open(self, context: BrowserContext, page: Page, task: WebTask, seed: int) -> str:
        session_id = f"episode-{next(_IDS)}"
        self._sessions[id(context)] = session_id
        self.app.session(session_id)

        async def serve(route: Route) -> None:
            request = route.request
            body = request.post_data_buffer or b""
            response = self.app.handle_url(session_id, request.method, request.url, body)
            await route.fulfill(
                status=response.status, headers=dict(response.headers), body=response.body
            )

        await context.route(f"{ORIGIN}/**", serve)
        return f"{ORIGIN}/"

    def session_id(self, context: BrowserContext) -> str | None:
        """The shop session of ``context``'s episode (``None`` once closed)."""
        return self._sessions.get(id(context))

    async def evaluate(self, page: Page, task: WebTask, answer: str | None) -> Evaluation:
        session_id = self.session_id(page.context)
        session = self.app.sessions.get(session_id) if session_id else None
        if session is not None and session.orders:
            goal = Goal.from_json(task.data["goal"])
            grade = grade_order(goal, self.app.lines(session.orders[0].lines))
            return Evaluation(grade.reward, grade.success, True, dict(grade.components))
        if answer is not None:
            zero = {"attributes": 0.0, "options": 0.0, "price": 0.0}
            return Evaluation(0.0, False, True, zero)
        return NOT_DONE

    async def close(self, context: BrowserContext) -> None:
        session_id = self._sessions.pop(id(context), None)
        if session_id is not None:
            self.app.drop(session_id)
