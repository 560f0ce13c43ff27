"""``ShopSite`` without a browser: its task filter and its verdicts on an episode's state."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from agentgym.core.errors import ConfigError
from agentgym.envs.web.shop import ORIGIN, ShopSite
from agentgym.envs.web.site import Site


class _Context:
    def __init__(self) -> None:
        self.routes: list[tuple[str, Any]] = []

    async def route(self, pattern: str, handler: Any) -> None:
        self.routes.append((pattern, handler))


def test_is_a_site_with_600_tasks_and_a_difficulty_filter() -> None:
    site = ShopSite()
    assert isinstance(site, Site)
    assert len(site.tasks()) == 600
    assert site.allowed_origins() == (ORIGIN,)
    easy = ShopSite(difficulties=[0, 1])
    assert {t.difficulty for t in easy.tasks()} == {0, 1}
    with pytest.raises(ConfigError, match="difficulties"):
        ShopSite(difficulties=[7])


def test_evaluate_follows_the_session() -> None:
    site = ShopSite()
    task = next(t for t in site.tasks() if t.difficulty == 2)
    context = _Context()
    page = SimpleNamespace(context=context)
    start = asyncio.run(site.open(context, page, task, 0))  # type: ignore[arg-type]
    assert start == f"{ORIGIN}/"
    assert context.routes[0][0] == f"{ORIGIN}/**"
    sid = site.session_id(context)  # type: ignore[arg-type]
    assert sid is not None
    evaluate = site.evaluate(page, task, None)  # type: ignore[arg-type]
    assert asyncio.run(evaluate).done is False
    stopped = asyncio.run(site.evaluate(page, task, "gave up"))  # type: ignore[arg-type]
    assert (stopped.done, stopped.reward, stopped.success) == (True, 0.0, False)

    product = site.app.products[task.data["goal_products"][0]]
    form = {"product": product.id, "action": "buy"}
    form.update({f"option:{k}": v[0] for k, v in product.options.items()})
    form.update({f"option:{k}": v for k, v in task.data["goal"]["options"].items()})
    site.app.handle(sid, "GET", f"/product/{product.id}", {}, {})
    site.app.handle(sid, "POST", "/cart/add", {}, form)
    site.app.handle(sid, "POST", "/checkout/place", {}, {})
    done = asyncio.run(site.evaluate(page, task, None))  # type: ignore[arg-type]
    assert (done.done, done.reward, done.success) == (True, 1.0, True)
    assert sum(done.components.values()) == pytest.approx(1.0)

    asyncio.run(site.close(context))  # type: ignore[arg-type]
    assert site.session_id(context) is None  # type: ignore[arg-type]
    assert sid not in site.app.sessions
