"""The shop in a real Chromium through ``agentgym/Web-v0``: the scripted oracle solves tasks
through the env's own actions, random actions score near 0, and the grade cannot be had by
editing URLs or stopping early."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers agentgym/Web-v0)
from agentgym.envs.web.shop import ShopSite, load_tasks
from agentgym.envs.web.shop.oracle import run_episode


@pytest.fixture(scope="module")
def env(chromium: str) -> Iterator[Any]:
    made = gym.make("agentgym/Web-v0", max_steps=40)
    assert isinstance(made.unwrapped.site, ShopSite)  # the default site is the shop
    yield made
    made.close()


def _sample(n: int) -> list[str]:
    tasks = load_tasks()
    return [t.task_id for t in tasks[:: len(tasks) // n][:n]]


# The slow versions repeat these checks over more tasks (every 6th, this sample among them) and
# episodes: where they run, these samples do not.
ALL_TASKS = "tests/envs/web/shop/test_shop_oracle_all.py"


@pytest.mark.covered_by(f"{ALL_TASKS}::test_oracle_solves_95_percent_of_the_tasks")
def test_oracle_solves_a_sample_of_tasks(env: Any) -> None:
    sample = _sample(20)
    assert {int(t.split("/")[1][0]) for t in sample} == {0, 1, 2, 3}
    solved = 0
    for task_id in sample:
        total, info, _ = run_episode(env, task_id, "oracle")
        solved += total == 1.0 and info["success"] is True
        assert info["reward_components"]["task"] == pytest.approx(total)
    assert solved >= 19


@pytest.mark.covered_by(f"{ALL_TASKS}::test_random_policy_over_50_episodes_scores_near_zero")
def test_random_policy_scores_near_zero(env: Any) -> None:
    returns = [run_episode(env, t, "random", seed=i, max_steps=15)[0]
               for i, t in enumerate(_sample(8))]  # fmt: skip
    assert sum(returns) / len(returns) < 0.2


def _play(env: Any, task_id: str, actions: list[str]) -> tuple[float, dict[str, Any]]:
    env.reset(seed=0, options={"task_id": task_id})
    total, info = 0.0, {}
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        if terminated or truncated:
            break
    return total, info


def _click(env: Any, name: str) -> str:
    node = next(n for n in env.unwrapped.nodes if n.id is not None and n.name == name)
    return f"click({node.id})"


def test_edited_urls_earn_nothing(env: Any) -> None:
    task = load_tasks()[0]
    goal_id = task.data["goal_products"][0]
    total, info = _play(env, task.task_id, [
        'goto("/product/P0000")',
        f'goto("/cart/add?product={goal_id}&action=buy")',
        'goto("/checkout/place")',
        'stop("done")',
    ])  # fmt: skip
    assert total == 0.0
    assert info["success"] is False


def test_wrong_product_is_graded_below_one(env: Any) -> None:
    task = next(t for t in load_tasks() if t.difficulty == 1)
    wrong = next(p for p in env.unwrapped.site.app.catalog
                 if p.category != task.data["goal"]["category"])  # fmt: skip
    env.reset(seed=0, options={"task_id": task.task_id})
    env.step(f'goto("/product/{wrong.id}")')
    for name, values in wrong.options.items():
        node = next(n for n in env.unwrapped.nodes if n.role == "combobox"
                    and n.name.lower() == name)  # fmt: skip
        env.step(f'select_option({node.id}, "{values[0]}")')
    env.step(_click(env, "Buy now"))
    _, reward, terminated, _, info = env.step(_click(env, "Place order"))
    assert terminated
    assert reward == 0.0
    assert info["success"] is False
    assert env.unwrapped.site.app.sessions == {}  # the ended episode's state is dropped
