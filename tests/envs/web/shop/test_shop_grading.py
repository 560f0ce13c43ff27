"""WebShop's reward formula against hand-computed values."""

from __future__ import annotations

import pytest

from agentgym.envs.web.shop.catalog import Product
from agentgym.envs.web.shop.grading import Goal, grade_order, grade_purchase

GOAL = Goal("jackets", "rain jacket", ("waterproof", "for women"), {"size": "M"}, 80.0)


def _product(ptype: str = "rain jacket", category: str = "jackets", price: float = 79.99,
             attributes: tuple[str, ...] = ("for women", "lightweight", "waterproof")) -> Product:
    return Product("P9999", "Test Jacket", category, ptype, attributes,
                   {"size": ("S", "M", "L")}, price, 4.0, 10, "A test jacket.")  # fmt: skip


def test_everything_matched_is_one_and_success() -> None:
    grade = grade_purchase(GOAL, _product(), {"size": "M"})
    assert grade.reward == 1.0
    assert grade.success
    assert sum(grade.components.values()) == pytest.approx(1.0)


def test_wrong_option_loses_its_share() -> None:
    grade = grade_purchase(GOAL, _product(), {"size": "L"})
    assert grade.reward == pytest.approx(3 / 4)  # (2 attrs + 0 opts + price) / (2 + 1 + 1)
    assert not grade.success
    assert grade.components["options"] == 0.0


def test_over_budget_loses_the_price_share() -> None:
    grade = grade_purchase(GOAL, _product(price=80.01), {"size": "M"})
    assert grade.reward == pytest.approx(3 / 4)
    assert not grade.price_ok
    assert not grade.success


def test_missing_attribute() -> None:
    grade = grade_purchase(GOAL, _product(attributes=("waterproof",)), {"size": "M"})
    assert grade.reward == pytest.approx(3 / 4)
    assert grade.attributes_matched == 1


def test_other_type_of_the_category_is_halved() -> None:
    product = _product(ptype="down jacket", price=99.99, attributes=("waterproof",))
    grade = grade_purchase(GOAL, product, {"size": "M"})
    assert grade.r_type == 0.5
    assert grade.reward == pytest.approx(0.5 * (1 + 1 + 0) / 4)
    assert not grade.success


def test_other_category_is_zero() -> None:
    product = _product(ptype="hiking boots", category="shoes")
    grade = grade_purchase(GOAL, product, {"size": "M"})
    assert grade.reward == 0.0
    assert not grade.success


def test_order_must_be_exactly_one_unit() -> None:
    right = (_product(), {"size": "M"}, 1)
    assert grade_order(GOAL, [right]).reward == 1.0
    assert grade_order(GOAL, []).reward == 0.0
    assert grade_order(GOAL, [(_product(), {"size": "M"}, 2)]).reward == 0.0
    other = (_product(ptype="hiking boots", category="shoes"), {"size": "M"}, 1)
    both = grade_order(GOAL, [right, other])
    assert both.reward == 0.0
    assert not both.success


def test_goal_round_trips_and_satisfaction() -> None:
    assert Goal.from_json(GOAL.to_json()) == GOAL
    assert GOAL.satisfied_by(_product())
    assert not GOAL.satisfied_by(_product(price=81.0))
    no_m = Product("P1", "t", "jackets", "rain jacket", ("for women", "waterproof"),
                   {"size": ("S", "L")}, 10.0, 4.0, 1, "d")  # fmt: skip
    assert not GOAL.satisfied_by(no_m)


def test_every_goal_product_of_every_task_earns_exactly_one() -> None:
    from agentgym.envs.web.shop.catalog import load_catalog
    from agentgym.envs.web.shop.tasks import load_tasks

    products = {p.id: p for p in load_catalog()}
    for task in load_tasks():
        goal = Goal.from_json(task.data["goal"])
        for pid in task.data["goal_products"]:
            p = products[pid]
            chosen = {k: goal.options.get(k, values[0]) for k, values in p.options.items()}
            grade = grade_purchase(goal, p, chosen)
            assert grade.reward == 1.0  # exactly: learners and success checks compare with 1
            assert grade.success
