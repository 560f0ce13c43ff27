"""The store / inventory MCP server shipped with agentgym (``agentgym/MCP-v0``'s default).

Run it over stdio (what the env does by default) or streamable HTTP::

    python -m agentgym.envs.mcp.servers.store                 # stdio
    python -m agentgym.envs.mcp.servers.store --http 8000     # http://127.0.0.1:8000/mcp
    python -m agentgym.envs.mcp.servers.store --seed 3        # another catalog

State lives per episode: a tool call whose ``_meta`` holds ``"agentgym/episode"`` acts on that
episode's own copy of the store (the env sends it), so episodes sharing one server (HTTP, pooled
sessions) never see each other's orders. Calls without it share one default copy. The oldest
copies are dropped past ``--max-episodes``.
"""

from __future__ import annotations

import argparse
import copy
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from agentgym.envs.mcp.servers.store_data import Store, StoreError, build_store

__all__ = ["create_server", "main"]

EPISODE_META_KEY = "agentgym/episode"
T = TypeVar("T")


class Stores:
    """One store per episode key, copied from the seed's pristine store, least recent dropped."""

    def __init__(self, seed: int, max_episodes: int) -> None:
        self.pristine = build_store(seed)
        self.max_episodes = max_episodes
        self._stores: OrderedDict[str, Store] = OrderedDict()

    def get(self, ctx: Context | None) -> Store:
        meta = ctx.request_context.meta if ctx is not None else None
        key = str((meta or {}).get(EPISODE_META_KEY, ""))
        store = self._stores.get(key)
        if store is None:
            store = self._stores[key] = copy.deepcopy(self.pristine)
            while len(self._stores) > self.max_episodes:
                self._stores.popitem(last=False)
        self._stores.move_to_end(key)
        return store


def _run(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except StoreError as e:  # a ToolError's message reaches the model; other errors are hidden
        raise ToolError(str(e)) from e


def create_server(seed: int = 0, max_episodes: int = 4096) -> MCPServer:
    """The store server for catalog ``seed``."""
    stores = Stores(seed, max_episodes)
    server = MCPServer(
        "agentgym-store",
        instructions="A shop's catalog, stock in three warehouses, customers and orders.",
        log_level="WARNING",
    )

    @server.tool()
    async def search_products(
        ctx: Context, query: str = "", category: str | None = None
    ) -> list[dict[str, Any]]:
        """Find products whose name contains `query` (case-insensitive), optionally in one
        category (kitchen, garden, office, toys, tools). An empty query lists them all."""
        return _run(lambda: stores.get(ctx).search_products(query, category))

    @server.tool()
    async def get_product(ctx: Context, sku: str) -> dict[str, Any]:
        """A product's name, category and unit price in dollars."""
        return _run(lambda: stores.get(ctx).product(sku))

    @server.tool()
    async def get_stock(ctx: Context, sku: str) -> dict[str, Any]:
        """Units of a product in each warehouse (north, south, east) and in total."""
        return _run(lambda: stores.get(ctx).get_stock(sku))

    @server.tool()
    async def find_customer(ctx: Context, name: str) -> list[dict[str, Any]]:
        """Customers whose name contains `name` (case-insensitive), with their ids."""
        return _run(lambda: stores.get(ctx).find_customer(name))

    @server.tool()
    async def list_orders(ctx: Context, customer_id: str) -> list[dict[str, Any]]:
        """A customer's orders, oldest first: id, date, status, warehouse, items and total."""
        return _run(lambda: stores.get(ctx).list_orders(customer_id))

    @server.tool()
    async def get_order(ctx: Context, order_id: str) -> dict[str, Any]:
        """One order: customer, date, status, warehouse, items (sku, quantity, unit price)."""
        return _run(lambda: stores.get(ctx).get_order(order_id))

    @server.tool()
    async def place_order(
        ctx: Context, customer_id: str, sku: str, quantity: int, warehouse: str
    ) -> dict[str, Any]:
        """Order `quantity` units of a product for a customer, shipped from one warehouse
        (its stock goes down). Returns the new order, status pending."""
        return _run(lambda: stores.get(ctx).place_order(customer_id, sku, quantity, warehouse))

    @server.tool()
    async def transfer_stock(
        ctx: Context, sku: str, from_warehouse: str, to_warehouse: str, quantity: int
    ) -> dict[str, Any]:
        """Move units of a product from one warehouse to another; returns the new stock."""
        return _run(
            lambda: stores.get(ctx).transfer_stock(sku, from_warehouse, to_warehouse, quantity)
        )

    @server.tool()
    async def cancel_order(ctx: Context, order_id: str) -> dict[str, Any]:
        """Cancel a pending order; its units go back to its warehouse."""
        return _run(lambda: stores.get(ctx).cancel_order(order_id))

    return server


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    parser.add_argument("--seed", type=int, default=0, help="catalog seed (default 0)")
    parser.add_argument("--max-episodes", type=int, default=4096, help="stores kept at once")
    args = parser.parse_args(argv)
    server = create_server(args.seed, args.max_episodes)
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.http)


if __name__ == "__main__":
    main()
