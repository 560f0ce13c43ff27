"""Seeded tasks for the shipped store server: questions whose answers need several tool calls,
and errands whose end state is checked on the server.

Seven families take turns: the stock of the cheapest or priciest product of a category, a
customer's spending on delivered orders, the warehouse with the most units of a product, the
priciest item of a customer's latest order, the value of a product's stock, placing an order
from the best-stocked warehouse (checked: the order exists, the stock went down), and topping a
warehouse up with a transfer (checked: both stock levels). Every task carries its oracle
``solution`` (the tool calls, turn by turn), computed from the same seeded store the server
builds, so a scripted agent that replays it scores 1.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agentgym.core.errors import ConfigError
from agentgym.envs.mcp.servers.store_data import CATEGORIES, WAREHOUSES, Store, build_store
from agentgym.envs.mcp.tasks import Check, MCPTask

__all__ = ["FAMILIES", "generate_store_tasks"]

_GIVE_UP = 300  # failed draws in a row after which a family counts as exhausted
Family = Callable[[random.Random, Store], MCPTask | None]


def _call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def _task(family: str, prompt: str, *turns: list[dict[str, Any]], **fields: Any) -> MCPTask:
    solution = tuple(tuple(turn) for turn in turns)
    return MCPTask(f"store/{family}", prompt, solution=solution, **fields)


def _product(rng: random.Random, store: Store) -> dict[str, Any]:
    return store.products[rng.choice(sorted(store.products))]


def _unique_max(values: dict[str, float]) -> str | None:
    best = max(values.values())
    winners = [k for k, v in values.items() if v == best]
    return winners[0] if len(winners) == 1 else None


def category_stock(rng: random.Random, store: Store) -> MCPTask | None:
    category = rng.choice(sorted(CATEGORIES))
    extreme = rng.choice(("cheapest", "most expensive"))
    where = rng.choice((None, *WAREHOUSES))
    products = store.search_products(category=category)
    prices = {p["sku"]: p["price"] * (1 if extreme == "most expensive" else -1) for p in products}
    sku = _unique_max(prices)
    if sku is None:
        return None
    stock = store.get_stock(sku)
    place = "across all warehouses" if where is None else f"in the {where} warehouse"
    units = stock["total"] if where is None else stock["warehouses"][where]
    prompt = (
        f"How many units of the {extreme} product in the {category} category are in stock {place}?"
    )
    return _task(
        "category_stock",
        prompt,
        [_call("search_products", category=category)],
        [_call("get_stock", sku=sku)],
        answer=str(units),
        match="number",
    )


def customer_spend(rng: random.Random, store: Store) -> MCPTask | None:
    customer = store.customers[rng.choice(sorted(store.customers))]
    orders = store.list_orders(customer["customer_id"])
    status = rng.choice(("delivered", "shipped", "pending"))
    chosen = [o for o in orders if o["status"] == status]
    if not chosen:
        return None
    total = round(sum(o["total"] for o in chosen), 2)
    prompt = (
        f"How much has {customer['name']} spent in total on orders that are {status}? "
        "Answer in dollars."
    )
    return _task(
        "customer_spend",
        prompt,
        [_call("find_customer", name=customer["name"])],
        [_call("list_orders", customer_id=customer["customer_id"])],
        answer=f"{total:.2f}",
        match="number",
    )


def best_warehouse(rng: random.Random, store: Store) -> MCPTask | None:
    product = _product(rng, store)
    warehouse = _unique_max(store.get_stock(product["sku"])["warehouses"])
    if warehouse is None:
        return None
    prompt = f"Which warehouse has the most units of the {product['name']}? Answer with its name."
    return _task(
        "best_warehouse",
        prompt,
        [_call("search_products", query=product["name"])],
        [_call("get_stock", sku=product["sku"])],
        answer=warehouse,
    )


def latest_order_item(rng: random.Random, store: Store) -> MCPTask | None:
    customer = store.customers[rng.choice(sorted(store.customers))]
    orders = store.list_orders(customer["customer_id"])
    if len(orders) < 1 or (len(orders) > 1 and orders[-1]["date"] == orders[-2]["date"]):
        return None
    items = orders[-1]["items"]
    sku = _unique_max({item["sku"]: item["unit_price"] for item in items})
    if sku is None or len(items) < 2:
        return None
    prompt = (
        f"In {customer['name']}'s most recent order, which product has the highest unit price? "
        "Answer with the product's name."
    )
    return _task(
        "latest_order_item",
        prompt,
        [_call("find_customer", name=customer["name"])],
        [_call("list_orders", customer_id=customer["customer_id"])],
        [_call("get_product", sku=sku)],
        answer=store.products[sku]["name"],
    )


def stock_value(rng: random.Random, store: Store) -> MCPTask | None:
    product = _product(rng, store)
    total = store.get_stock(product["sku"])["total"]
    value = round(product["price"] * total, 2)
    prompt = (
        f"What is the total value, at its unit price, of all units of the {product['name']} "
        "in stock across all warehouses? Answer in dollars."
    )
    return _task(
        "stock_value",
        prompt,
        [_call("search_products", query=product["name"])],
        [_call("get_stock", sku=product["sku"])],
        answer=f"{value:.2f}",
        match="number",
    )


def place_order(rng: random.Random, store: Store) -> MCPTask | None:
    customer = store.customers[rng.choice(sorted(store.customers))]
    product = _product(rng, store)
    sku, customer_id = product["sku"], customer["customer_id"]
    levels = store.get_stock(sku)["warehouses"]
    warehouse = _unique_max(levels)
    if warehouse is None or levels[warehouse] < 2:
        return None
    quantity = rng.randint(1, min(5, levels[warehouse]))
    prompt = (
        f"{customer['name']} wants to buy {quantity} units of the {product['name']}. Place the "
        "order, shipped from the warehouse that has the most units of it."
    )
    ordered = {
        "status": "pending",
        "warehouse": warehouse,
        "items": [{"sku": sku, "quantity": quantity}],
    }
    return _task(
        "place_order",
        prompt,
        [
            _call("find_customer", name=customer["name"]),
            _call("search_products", query=product["name"]),
        ],
        [_call("get_stock", sku=sku)],
        [
            _call(
                "place_order",
                customer_id=customer_id,
                sku=sku,
                quantity=quantity,
                warehouse=warehouse,
            )
        ],
        checks=(
            Check("list_orders", {"customer_id": customer_id}, "result", contains=ordered),
            Check(
                "get_stock",
                {"sku": sku},
                f"warehouses.{warehouse}",
                equals=levels[warehouse] - quantity,
            ),
        ),
    )


def top_up(rng: random.Random, store: Store) -> MCPTask | None:
    product = _product(rng, store)
    sku = product["sku"]
    target, source = rng.sample(WAREHOUSES, 2)
    levels = store.get_stock(sku)["warehouses"]
    if levels[source] < 1:
        return None
    moved = rng.randint(1, min(10, levels[source]))
    wanted = levels[target] + moved
    prompt = (
        f"The {target} warehouse should hold exactly {wanted} units of the {product['name']}. "
        f"Move the missing units there from the {source} warehouse."
    )
    return _task(
        "top_up",
        prompt,
        [_call("search_products", query=product["name"])],
        [_call("get_stock", sku=sku)],
        [
            _call(
                "transfer_stock",
                sku=sku,
                from_warehouse=source,
                to_warehouse=target,
                quantity=moved,
            )
        ],
        checks=(
            Check("get_stock", {"sku": sku}, f"warehouses.{target}", equals=wanted),
            Check("get_stock", {"sku": sku}, f"warehouses.{source}", equals=levels[source] - moved),
        ),
    )


FAMILIES: dict[str, Family] = {
    "category_stock": category_stock,
    "customer_spend": customer_spend,
    "best_warehouse": best_warehouse,
    "latest_order_item": latest_order_item,
    "stock_value": stock_value,
    "place_order": place_order,
    "top_up": top_up,
}


def generate_store_tasks(
    size: int = 140, seed: int = 0, store_seed: int = 0
) -> tuple[MCPTask, ...]:
    """``size`` distinct tasks (families taking turns) for the store built from ``store_seed``.

    The same arguments give the same tasks; ids are ``store/<family>/<index>``.
    """
    store = build_store(store_seed)
    rng = random.Random(seed)
    tasks: list[MCPTask] = []
    prompts: set[str] = set()
    active = list(FAMILIES)
    misses = dict.fromkeys(FAMILIES, 0)
    while len(tasks) < size:
        if not active:
            raise ConfigError(
                "size", size, f"exceeds the {len(tasks)} distinct store tasks", "ask for fewer"
            )
        family = active[len(tasks) % len(active)]
        task = FAMILIES[family](rng, store)
        if task is None or task.prompt in prompts:
            misses[family] += 1
            if misses[family] >= _GIVE_UP:  # the family has no new task left: drop it
                active.remove(family)
            continue
        misses[family] = 0
        prompts.add(task.prompt)
        tasks.append(replace(task, task_id=f"store/{family}/{len(tasks)}"))
    return tuple(tasks)
