"""A scripted oracle for the shop's tasks, and a random policy to compare it with.

Both act through the env's own text actions, reading only the observation's nodes
(``env.unwrapped.nodes``), the page's URL and, for the oracle, the task's goal. The oracle
searches the task's query, opens the results whose title is a goal product's (going back when
the page turns out to be another product of the same title, and on to the next results page when
none is left), chooses the goal's options (any offered value for the others), presses "Buy now"
and places the order. The random policy draws from ``info["action_choices"]`` plus filling the
search box with words of the instruction.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from agentgym.envs.web.observe import Node
from agentgym.envs.web.shop.catalog import load_catalog
from agentgym.envs.web.site import WebTask

__all__ = ["RandomPolicy", "ShopOracle", "run_episode"]

_TEXTBOX = ("textbox", "searchbox")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _find(nodes: Iterable[Node], role: str | tuple[str, ...], name: str) -> Node | None:
    roles = (role,) if isinstance(role, str) else role
    return next((n for n in nodes if n.id is not None and n.role in roles and n.name == name), None)


class ShopOracle:
    """Solves one shop task; make one per episode and call :meth:`act` after every step."""

    def __init__(self, task: WebTask) -> None:
        self.task = task
        self.goal_ids = set(task.data["goal_products"])
        titles = {p.id: p.title for p in load_catalog()}
        self.goal_titles = {titles[i] for i in self.goal_ids}
        self.options: Mapping[str, str] = task.data["goal"]["options"]
        self.tries: dict[str, int] = {}  # results URL -> goal-title links already opened

    def act(self, nodes: Sequence[Node], url: str) -> str:
        """The next action for the page ``url`` made of ``nodes``."""
        path = urlsplit(url).path
        if path == "/search":
            return self._results(nodes, url)
        if path.startswith("/product/"):
            return self._product(nodes, path.removeprefix("/product/"))
        place = _find(nodes, "button", "Place order")
        if place is not None:
            return f"click({place.id})"
        return self._search(nodes)

    def _search(self, nodes: Sequence[Node]) -> str:
        box = _find(nodes, _TEXTBOX, "Search")
        query = self.task.data["query"]
        if box is None:
            return 'goto("/")'
        if box.value != query:
            return f"fill({box.id}, {_quote(query)})"
        button = _find(nodes, "button", "Search")
        return f"click({button.id})" if button is not None else 'press("Enter")'

    def _results(self, nodes: Sequence[Node], url: str) -> str:
        box = _find(nodes, _TEXTBOX, "Search")
        if box is not None and box.value != self.task.data["query"]:
            return self._search(nodes)
        links = [n for n in nodes if n.id is not None and n.role == "link"]
        candidates = [n for n in links if n.name in self.goal_titles]
        tried = self.tries.get(url, 0)
        if tried < len(candidates):
            self.tries[url] = tried + 1
            return f"click({candidates[tried].id})"
        following = _find(nodes, "link", "Next")
        return f"click({following.id})" if following is not None else 'stop("not found")'

    def _product(self, nodes: Sequence[Node], product_id: str) -> str:
        if product_id not in self.goal_ids:
            return "go_back()"
        for node in nodes:
            if node.id is None or node.role != "combobox":
                continue
            name = node.name.lower()
            offered = [o for o in node.options if not o.startswith("Choose ")]
            want = self.options.get(name, node.value if node.value in offered else offered[0])
            if node.value != want:
                return f"select_option({node.id}, {_quote(want)})"
        buy = _find(nodes, "button", "Buy now")
        return f"click({buy.id})" if buy is not None else 'stop("no Buy now button")'


class RandomPolicy:
    """Uniform over ``info["action_choices"]`` (clicks, option choices, ``stop``), plus filling
    each text box with one to three words of the instruction."""

    def __init__(self, task: WebTask, seed: int) -> None:
        self.words = task.instruction.replace(",", " ").split()
        self.rng = random.Random(seed)

    def act(self, nodes: Sequence[Node], choices: Sequence[str]) -> str:
        actions = list(choices)
        for node in nodes:
            if node.id is not None and node.role in _TEXTBOX:
                words = self.rng.sample(self.words, min(len(self.words), self.rng.randint(1, 3)))
                actions.append(f"fill({node.id}, {_quote(' '.join(words))})")
        return self.rng.choice(actions) if actions else 'stop("")'


def run_episode(
    env: Any, task_id: str, policy: str = "oracle", seed: int = 0, max_steps: int = 40
) -> tuple[float, dict[str, Any], int]:
    """Play one episode of ``task_id`` on a ``WebEnv`` (made with ``gym.make`` or not) with the
    oracle or the random policy; returns the return, the last info and the steps taken."""
    web = env.unwrapped
    _, info = env.reset(seed=seed, options={"task_id": task_id})
    task = next(t for t in web.tasks if t.task_id == task_id)
    agent = ShopOracle(task) if policy == "oracle" else RandomPolicy(task, seed)
    total, steps = 0.0, 0
    for steps in range(1, max_steps + 1):  # noqa: B007 (steps is returned)
        nodes = web.nodes
        if isinstance(agent, ShopOracle):
            action = agent.act(nodes, info.get("url", ""))
        else:
            action = agent.act(nodes, info.get("action_choices") or [])
        _, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        if terminated or truncated:
            break
    return total, info, steps
