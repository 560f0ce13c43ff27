"""The shipped catalogue, the search index and the task set."""

from __future__ import annotations

import gzip
import json
from collections import Counter

from agentgym.envs.web.shop.catalog import (
    CATALOG_PATH,
    encode_catalog,
    generate_catalog,
    load_catalog,
)
from agentgym.envs.web.shop.grading import Goal
from agentgym.envs.web.shop.search import PAGE_SIZE, SearchIndex, tokenize
from agentgym.envs.web.shop.tasks import MAX_RANK, generate_tasks, load_tasks


def test_regenerating_gives_the_shipped_catalogue() -> None:
    shipped = json.loads(gzip.decompress(CATALOG_PATH.read_bytes()))
    assert json.loads(gzip.decompress(encode_catalog(generate_catalog()))) == shipped
    assert CATALOG_PATH.stat().st_size < 1_000_000


def test_catalogue_shape() -> None:
    products = load_catalog()
    assert len(products) >= 1000
    assert len({p.id for p in products}) == len(products)
    assert len(Counter(p.category for p in products)) >= 7
    for p in products:
        assert p.title
        assert p.description
        assert p.attributes
        assert p.price > 0
        assert 1.0 <= p.rating <= 5.0
        assert all(values for values in p.options.values())


def test_tokenize_folds_plurals_and_case() -> None:
    assert tokenize("Waterproof Jackets for Women") == ["waterproof", "jacket", "women"]


def test_search_ranks_the_matching_products_first() -> None:
    index = SearchIndex(load_catalog())
    results = index.search("waterproof hiking jacket for women")
    top = results[:PAGE_SIZE]
    assert all(p.product_type == "hiking jacket" for p in top)
    assert sum("waterproof" in p.attributes for p in top) >= 1
    assert all("for women" in p.attributes for p in top[:3])


def test_search_exact_title_finds_it_first() -> None:
    products = load_catalog()
    index = SearchIndex(products)
    for p in products[::97]:
        assert p.title in {q.title for q in index.search(p.title)[:3]}


def test_search_pages_and_no_results() -> None:
    index = SearchIndex(load_catalog())
    first, total = index.page("tent", 1)
    second, _ = index.page("tent", 2)
    assert len(first) == PAGE_SIZE
    assert total > 2 * PAGE_SIZE
    assert not {p.id for p in first} & {p.id for p in second}
    assert index.page("zzzqqq", 1) == ([], 0)


def test_tasks_are_satisfiable_findable_and_graded_by_difficulty() -> None:
    tasks = load_tasks()
    products = {p.id: p for p in load_catalog()}
    index = SearchIndex(load_catalog())
    assert len(tasks) >= 500
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert len({t.instruction for t in tasks}) == len(tasks)
    assert Counter(t.difficulty for t in tasks) == {0: 150, 1: 150, 2: 150, 3: 150}
    for task in tasks[::7]:
        goal = Goal.from_json(task.data["goal"])
        ids = set(task.data["goal_products"])
        assert ids == {pid for pid, p in products.items() if goal.satisfied_by(p)}
        assert ids & {p.id for p in index.search(task.data["query"])[:MAX_RANK]}
        assert f"${goal.price_max:.0f}" in task.instruction
        for value in goal.options.values():
            assert value in task.instruction


def test_task_generation_is_deterministic() -> None:
    assert generate_tasks(per_difficulty=5) == generate_tasks(per_difficulty=5)
