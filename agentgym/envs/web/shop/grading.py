"""WebShop's reward on the order placed (Yao et al. 2022, "WebShop", section 3.1).

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price <= u_price])
               / (|U_att| + |U_opt| + 1)

``U`` is the goal (attributes, options, price cap), ``Y`` the product bought with the options
chosen. WebShop's ``r_type`` compares product types by their title nouns; the catalogue here
records each product's type and category, so ``r_type`` is 1 for the goal's type, 0.5 for
another type of the goal's category and 0 otherwise. ``success`` is ``r == 1``: every constraint
met. Everything is read from the server's catalogue and order, never from what a form sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.envs.web.shop.catalog import Product

__all__ = ["Goal", "Grade", "grade_order", "grade_purchase"]


@dataclass(frozen=True)
class Goal:
    """What a task asks for: a product type (of a category), attributes it must have, option
    values it must be bought in, and a price cap."""

    category: str
    product_type: str
    attributes: tuple[str, ...]
    options: Mapping[str, str]
    price_max: float

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category, "product_type": self.product_type,
            "attributes": list(self.attributes), "options": dict(self.options),
            "price_max": self.price_max,
        }  # fmt: skip

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Goal:
        return cls(
            raw["category"], raw["product_type"], tuple(raw["attributes"]),
            dict(raw["options"]), float(raw["price_max"]),
        )  # fmt: skip

    def satisfied_by(self, product: Product) -> bool:
        """Whether ``product`` can be bought meeting every constraint (in some options)."""
        return (
            product.product_type == self.product_type
            and set(self.attributes) <= set(product.attributes)
            and all(v in product.options.get(k, ()) for k, v in self.options.items())
            and product.price <= self.price_max
        )


@dataclass(frozen=True)
class Grade:
    """The reward of a purchase and its parts; ``components`` sum to ``reward``."""

    reward: float
    success: bool
    r_type: float
    attributes_matched: int
    options_matched: int
    price_ok: bool
    components: Mapping[str, float] = field(default_factory=dict)


ZERO = Grade(0.0, False, 0.0, 0, 0, False, {"attributes": 0.0, "options": 0.0, "price": 0.0})


def _r_type(goal: Goal, product: Product) -> float:
    if product.product_type == goal.product_type:
        return 1.0
    return 0.5 if product.category == goal.category else 0.0


def grade_purchase(goal: Goal, product: Product, chosen: Mapping[str, str]) -> Grade:
    """WebShop's reward for buying ``product`` in the options ``chosen``."""
    r_type = _r_type(goal, product)
    attrs = len(set(goal.attributes) & set(product.attributes))
    opts = sum(1 for k, v in goal.options.items() if chosen.get(k) == v)
    price_ok = product.price <= goal.price_max
    denominator = len(goal.attributes) + len(goal.options) + 1
    scale = r_type / denominator
    parts = {"attributes": scale * attrs, "options": scale * opts, "price": scale * price_ok}
    reward = r_type * (attrs + opts + price_ok) / denominator  # exactly 1.0 when all match
    success = r_type == 1.0 and attrs == len(goal.attributes)
    success = success and opts == len(goal.options) and price_ok
    return Grade(reward, success, r_type, attrs, opts, price_ok, parts)


def grade_order(
    goal: Goal, lines: Sequence[tuple[Product, Mapping[str, str], int]]
) -> Grade:
    """The grade of an order of ``(product, options, quantity)`` lines: the task is to buy one
    product, so an order of anything but exactly one unit earns nothing (buying the whole shop
    must not be a way to include the right product)."""
    if len(lines) != 1 or lines[0][2] != 1:
        return ZERO
    product, chosen, _ = lines[0]
    return grade_purchase(goal, product, chosen)
