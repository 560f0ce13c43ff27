"""The embedded shop of ``agentgym/Web-v0``: a generated catalogue, BM25 search, product pages,
cart and checkout, served in-process (``ShopApp``), WebShop-like tasks graded on the order
placed, and ``ShopSite``, the ``Site`` that serves it to Chromium by request interception.

``python -m agentgym.envs.web.shop --port 8000`` serves it on a real HTTP server to look at.
"""

from __future__ import annotations

from agentgym.envs.web.shop.app import Response, ShopApp
from agentgym.envs.web.shop.catalog import Product, load_catalog
from agentgym.envs.web.shop.grading import Goal, Grade, grade_order, grade_purchase
from agentgym.envs.web.shop.site import ORIGIN, ShopSite
from agentgym.envs.web.shop.tasks import load_tasks

__all__ = [
    "ORIGIN",
    "Goal",
    "Grade",
    "Product",
    "Response",
    "ShopApp",
    "ShopSite",
    "grade_order",
    "grade_purchase",
    "load_catalog",
    "load_tasks",
]
