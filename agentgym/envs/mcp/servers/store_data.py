"""The store behind the shipped MCP server: a seeded catalog, stock in three warehouses,
customers and orders, and the operations its tools expose.

Pure Python (no ``mcp`` import): the task generator builds the same store from the same seed to
compute answers, so the server and the tasks always agree.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CATEGORIES", "WAREHOUSES", "Store", "StoreError", "build_store"]

WAREHOUSES = ("north", "south", "east")
CATEGORIES: dict[str, tuple[str, ...]] = {
    "kitchen": ("kettle", "toaster", "blender", "skillet", "whisk", "teapot", "grater", "ladle"),
    "garden": ("trowel", "hose", "rake", "planter", "sprinkler", "shears", "wheelbarrow", "seed"),
    "office": (
        "stapler",
        "notebook",
        "desk lamp",
        "binder",
        "monitor stand",
        "pen",
        "chair",
        "ruler",
    ),
    "toys": ("kite", "puzzle", "robot", "yo-yo", "train set", "doll", "drone", "marble run"),
    "tools": ("hammer", "drill", "wrench", "saw", "level", "screwdriver", "clamp", "tape measure"),
}
_ADJECTIVES = (
    "Classic", "Compact", "Deluxe", "Eco", "Heavy-Duty", "Mini", "Pro", "Smart", "Swift", "Ultra",
)  # fmt: skip
_FIRST = ("Ada", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Iris", "Jonas",
          "Kira", "Luis", "Maya", "Noor", "Omar", "Priya")  # fmt: skip
_LAST = ("Ahmed", "Berg", "Costa", "Dubois", "Evans", "Fischer", "Garcia", "Hansen", "Ito",
         "Jensen", "Kowalski", "Lopez", "Moreau", "Novak", "Okafor", "Park")  # fmt: skip
_CITIES = ("Lisbon", "Oslo", "Lyon", "Austin", "Osaka", "Porto", "Kyiv", "Quito")
STATUSES = ("delivered", "shipped", "pending", "cancelled")


class StoreError(Exception):
    """A request the store refuses (unknown id, not enough stock): shown to the model."""


@dataclass
class Store:
    """The whole mutable state of one store (one per episode on the server)."""

    products: dict[str, dict[str, Any]] = field(default_factory=dict)
    stock: dict[str, dict[str, int]] = field(default_factory=dict)
    customers: dict[str, dict[str, Any]] = field(default_factory=dict)
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)

    # --- reads -------------------------------------------------------------------------------

    def product(self, sku: str) -> dict[str, Any]:
        if sku not in self.products:
            raise StoreError(f"no product with sku {sku!r}; search_products finds skus")
        return dict(self.products[sku])

    def search_products(self, query: str = "", category: str | None = None) -> list[dict[str, Any]]:
        if category is not None and category not in CATEGORIES:
            raise StoreError(f"unknown category {category!r}; categories: {', '.join(CATEGORIES)}")
        needle = query.strip().lower()
        return [
            dict(p)
            for p in self.products.values()
            if needle in p["name"].lower() and category in (None, p["category"])
        ]

    def get_stock(self, sku: str) -> dict[str, Any]:
        self.product(sku)
        levels = dict(self.stock[sku])
        return {"sku": sku, "warehouses": levels, "total": sum(levels.values())}

    def find_customer(self, name: str) -> list[dict[str, Any]]:
        needle = name.strip().lower()
        if not needle:
            raise StoreError("give part of the customer's name")
        return [dict(c) for c in self.customers.values() if needle in c["name"].lower()]

    def customer(self, customer_id: str) -> dict[str, Any]:
        if customer_id not in self.customers:
            raise StoreError(f"no customer with id {customer_id!r}; find_customer finds ids")
        return self.customers[customer_id]

    def list_orders(self, customer_id: str) -> list[dict[str, Any]]:
        self.customer(customer_id)
        rows = [o for o in self.orders.values() if o["customer_id"] == customer_id]
        return [_order_copy(o) for o in sorted(rows, key=lambda o: (o["date"], o["order_id"]))]

    def get_order(self, order_id: str) -> dict[str, Any]:
        if order_id not in self.orders:
            raise StoreError(f"no order with id {order_id!r}; list_orders finds ids")
        return _order_copy(self.orders[order_id])

    # --- writes ------------------------------------------------------------------------------

    def place_order(
        self, customer_id: str, sku: str, quantity: int, warehouse: str
    ) -> dict[str, Any]:
        self.customer(customer_id)
        price = self.product(sku)["price"]
        _check_warehouse(warehouse)
        if quantity < 1:
            raise StoreError("quantity must be at least 1")
        have = self.stock[sku][warehouse]
        if have < quantity:
            raise StoreError(f"warehouse {warehouse} has only {have} units of {sku}")
        self.stock[sku][warehouse] = have - quantity
        order_id = f"O{1001 + len(self.orders)}"
        self.orders[order_id] = {
            "order_id": order_id,
            "customer_id": customer_id,
            "date": "2026-06-01",
            "status": "pending",
            "warehouse": warehouse,
            "items": [{"sku": sku, "quantity": quantity, "unit_price": price}],
            "total": round(price * quantity, 2),
        }
        return _order_copy(self.orders[order_id])

    def transfer_stock(
        self, sku: str, from_warehouse: str, to_warehouse: str, quantity: int
    ) -> dict[str, Any]:
        self.product(sku)
        _check_warehouse(from_warehouse)
        _check_warehouse(to_warehouse)
        if from_warehouse == to_warehouse:
            raise StoreError("from_warehouse and to_warehouse must differ")
        if quantity < 1:
            raise StoreError("quantity must be at least 1")
        have = self.stock[sku][from_warehouse]
        if have < quantity:
            raise StoreError(f"warehouse {from_warehouse} has only {have} units of {sku}")
        self.stock[sku][from_warehouse] -= quantity
        self.stock[sku][to_warehouse] += quantity
        return self.get_stock(sku)

    def cancel_order(self, order_id: str) -> dict[str, Any]:
        order = self.orders.get(order_id)
        if order is None:
            raise StoreError(f"no order with id {order_id!r}")
        if order["status"] != "pending":
            raise StoreError(f"order {order_id} is {order['status']}; only pending orders cancel")
        order["status"] = "cancelled"
        for item in order["items"]:
            self.stock[item["sku"]][order["warehouse"]] += item["quantity"]
        return _order_copy(order)


def _check_warehouse(name: str) -> None:
    if name not in WAREHOUSES:
        raise StoreError(f"unknown warehouse {name!r}; warehouses: {', '.join(WAREHOUSES)}")


def _order_copy(order: dict[str, Any]) -> dict[str, Any]:
    return {**order, "items": [dict(item) for item in order["items"]]}


def build_store(seed: int = 0) -> Store:
    """The store for ``seed``: 40 products, 16 customers, 40 orders; the same seed, the same
    store."""
    rng = random.Random(seed)
    store = Store()
    for c, (category, nouns) in enumerate(CATEGORIES.items()):
        adjectives = rng.sample(_ADJECTIVES, len(nouns))
        for k, (noun, adjective) in enumerate(zip(nouns, adjectives, strict=True)):
            sku = f"{category[:3].upper()}-{100 + 7 * k + c}"
            price = round(rng.uniform(3, 250), 2)
            store.products[sku] = {
                "sku": sku,
                "name": f"{adjective} {noun.title()}",
                "category": category,
                "price": price,
            }
            store.stock[sku] = {w: rng.randint(0, 60) for w in WAREHOUSES}
    for k, (first, last) in enumerate(zip(_FIRST, rng.sample(_LAST, len(_LAST)), strict=True)):
        customer_id = f"C{101 + k}"
        store.customers[customer_id] = {
            "customer_id": customer_id,
            "name": f"{first} {last}",
            "city": rng.choice(_CITIES),
            "tier": rng.choice(("standard", "gold")),
        }
    skus, customers = list(store.products), list(store.customers)
    for k in range(40):
        items = [
            {"sku": sku, "quantity": rng.randint(1, 5), "unit_price": store.products[sku]["price"]}
            for sku in rng.sample(skus, rng.randint(1, 3))
        ]
        order_id = f"O{1001 + k}"
        store.orders[order_id] = {
            "order_id": order_id,
            "customer_id": customers[k % len(customers)],
            "date": f"2026-{1 + k % 5:02d}-{1 + rng.randint(0, 27):02d}",
            "status": rng.choice(STATUSES),
            "warehouse": rng.choice(WAREHOUSES),
            "items": items,
            "total": round(sum(i["quantity"] * i["unit_price"] for i in items), 2),
        }
    return store
