"""The seam between ``WebEnv`` and what it browses: a ``Site`` with its ``WebTask``s.

``WebEnv`` owns the browser, the observation and the actions; a ``Site`` owns the tasks, what the
browser may reach, per-episode state and grading. The embedded shop, MiniWoB++ and a user's own
site (:mod:`agentgym.envs.web.checks`) are each one ``Site``.

Sites served through Playwright request interception use made-up origins that cannot resolve
(``http://shop.agentgym.test``): their ``open`` installs ``context.route`` handlers that fulfil
those requests from Python. Every request to an origin outside ``allowed_origins()`` is aborted by
the env before the site's own handlers see it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # playwright is imported only where a browser is used
    from playwright.async_api import BrowserContext, Page

__all__ = ["Evaluation", "Site", "WebTask"]


@dataclass(frozen=True)
class WebTask:
    """One task of a site.

    Attributes:
        task_id: unique within the site; ``options={"task_id": ...}`` pins it on reset.
        instruction: what the model is asked to do (the reset user message shows it).
        difficulty: declared difficulty (0 = easiest); curricula schedule by it.
        data: site-specific (goal attributes, a MiniWoB task name, a start path, checks...).
    """

    task_id: str
    instruction: str
    difficulty: int = 0
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Evaluation:
    """The site's verdict on the page after a step.

    Attributes:
        reward: the outcome reward of the episode so far; the env pays it on the final step.
        success: whether the task is accomplished.
        done: the site says the episode is over (order placed, MiniWoB episode done).
        components: named parts of ``reward`` (they should sum to it; the env adds its own
            ``invalid_action`` part).
    """

    reward: float
    success: bool
    done: bool
    components: Mapping[str, float] = field(default_factory=dict)


NOT_DONE = Evaluation(reward=0.0, success=False, done=False)
"""What a site answers while nothing is decided yet."""


@runtime_checkable
class Site(Protocol):
    """What ``WebEnv`` needs of a site. All coroutines run on the env's event loop and under the
    env's deadlines; they may raise, and the env turns an exception into ``infra_error``."""

    name: str

    def tasks(self) -> Sequence[WebTask]:
        """Every task, in a fixed order (``reset(seed=s)`` indexes into it)."""
        ...

    def allowed_origins(self) -> tuple[str, ...]:
        """Origins (``scheme://host[:port]``) the browser may reach; everything else is
        aborted."""
        ...

    async def open(self, context: BrowserContext, page: Page, task: WebTask, seed: int) -> str:
        """Set up one episode (``context.route`` handlers for intercepted sites, per-episode
        state keyed by ``context``) and return the start URL; the env navigates there."""
        ...

    async def evaluate(self, page: Page, task: WebTask, answer: str | None) -> Evaluation:
        """Grade the page after a step; ``answer`` is the ``stop(answer)`` text once the agent
        stopped, else ``None``."""
        ...

    async def close(self, context: BrowserContext) -> None:
        """Drop the episode's state (the env closes the context itself afterwards)."""
        ...
