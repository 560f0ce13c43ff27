"""The shop's seeded tasks: WebShop-like instructions of four declared difficulties.

- 0: the product's exact title and a price cap ("Buy the "Wren Edge ... Jacket", under $60.").
- 1: a product type, one attribute and a price cap.
- 2: as 1, plus one option ("size M").
- 3: a type, two attributes, two options (one where the type has only one) and a price cap.

Each task is built from a catalogue product (so something satisfies it); its goal set is every
product that satisfies it, and a task is kept only when a BM25 search of its query finds a goal
product within the first :data:`MAX_RANK` results.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import lru_cache

from agentgym.envs.web.shop.catalog import Product, load_catalog
from agentgym.envs.web.shop.grading import Goal
from agentgym.envs.web.shop.search import SearchIndex
from agentgym.envs.web.site import WebTask

__all__ = ["MAX_RANK", "TASKS_PER_DIFFICULTY", "generate_tasks", "load_tasks"]

SEED = 2028
TASKS_PER_DIFFICULTY = 150
MAX_RANK = 20
_OPENERS = ("I need", "I'm looking for", "Find me", "Please buy", "I want to buy")


def _cap(price: float, rng: random.Random) -> float:
    """A round price cap at or above ``price``."""
    return float(math.ceil((price + rng.uniform(0.0, 30.0)) / 10.0) * 10)


def _option_phrase(name: str, value: str) -> str:
    return f"in {value}" if name == "colour" else f"{name} {value}"


def _describe(goal: Goal, rng: random.Random) -> tuple[str, str]:
    """The instruction and the search query for ``goal``."""
    plain = [a for a in goal.attributes if not a.startswith("for ")]
    audience = [a for a in goal.attributes if a.startswith("for ")]
    noun = " ".join([" and ".join(plain), goal.product_type, *audience]).strip()
    article = "an " if noun[0] in "aeiou" else "a "
    if goal.product_type.endswith("s"):  # headphones, sandals: no article
        article = ""
    parts = [f"{rng.choice(_OPENERS)} {article}{noun}"]
    parts += [_option_phrase(k, v) for k, v in goal.options.items()]
    instruction = ", ".join(parts) + f", under ${goal.price_max:.0f}."
    query = " ".join([*goal.attributes, goal.product_type])
    return instruction, query


def _goal(rng: random.Random, p: Product, n_attrs: int, n_opts: int) -> Goal | None:
    plain = [a for a in p.attributes if not a.startswith("for ")]
    audience = [a for a in p.attributes if a.startswith("for ")]
    if len(plain) < n_attrs or len(p.options) < min(n_opts, 1):
        return None
    attributes = tuple(rng.sample(plain, n_attrs)) + tuple(audience[: rng.randint(0, 1)])
    names = rng.sample(sorted(p.options), min(n_opts, len(p.options)))
    options = {k: rng.choice(p.options[k]) for k in sorted(names)}
    return Goal(p.category, p.product_type, attributes, options, _cap(p.price, rng))


def _exact(rng: random.Random, p: Product) -> tuple[Goal, str, str]:
    shown = tuple(a for a in p.attributes if a.lower() in p.title.lower())
    goal = Goal(p.category, p.product_type, shown, {}, _cap(p.price, rng))
    instruction = f'{rng.choice(_OPENERS)} the "{p.title}", under ${goal.price_max:.0f}.'
    return goal, instruction, p.title


_SHAPES: dict[int, tuple[int, int]] = {1: (1, 0), 2: (1, 1), 3: (2, 2)}


def _draw(rng: random.Random, p: Product, difficulty: int) -> tuple[Goal, str, str] | None:
    if difficulty == 0:
        return _exact(rng, p)
    goal = _goal(rng, p, *_SHAPES[difficulty])
    if goal is None:
        return None
    return goal, *_describe(goal, rng)


def _found(index: SearchIndex, query: str, goal_ids: set[str]) -> bool:
    return any(p.id in goal_ids for p in index.search(query)[:MAX_RANK])


def generate_tasks(
    catalog: tuple[Product, ...] | None = None, seed: int = SEED,
    per_difficulty: int = TASKS_PER_DIFFICULTY,
) -> tuple[WebTask, ...]:  # fmt: skip
    """``per_difficulty`` tasks of each difficulty 0-3, drawn from ``seed``."""
    products = catalog if catalog is not None else load_catalog()
    index = SearchIndex(products)
    rng = random.Random(seed)
    tasks: list[WebTask] = []
    seen: set[str] = set()
    for difficulty in range(4):
        made = 0
        while made < per_difficulty:
            drawn = _draw(rng, rng.choice(products), difficulty)
            if drawn is None or drawn[1] in seen:
                continue
            goal, instruction, query = drawn
            goal_ids = {p.id for p in products if goal.satisfied_by(p)}
            if not _found(index, query, goal_ids):
                continue
            seen.add(instruction)
            data = {"goal": goal.to_json(), "goal_products": sorted(goal_ids), "query": query}
            task_id = f"shop/{difficulty}-{made:03d}"
            tasks.append(WebTask(task_id, instruction, difficulty, data))
            made += 1
    return tuple(tasks)


load_tasks: Callable[[], tuple[WebTask, ...]] = lru_cache(maxsize=1)(generate_tasks)
"""The shop's task set (generated once per process from the shipped catalogue)."""
