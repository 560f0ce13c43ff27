"""The page as text: a JS DOM walker (``walker.js``), its ``Node``s, and their rendering.

The walker stamps every interactive element with a ``data-agentgym-id`` attribute (kept while the
element lives, so ids are stable across steps) and returns the visible page as nodes; ``render``
writes them one per line under the URL, the focused element and the last action's error::

    URL: http://shop.agentgym.test/search?q=rain+jacket
    Focused: [2]
    Last action error: none
    [1] link "Home"
    [2] textbox "Search" value="rain jacket"
    heading "Results"
    text "$79.99"
    [9] combobox "Size" value="M" options=["S", "M", "L"]

A page longer than the budget is cut with a note saying how much was left out.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from agentgym.core.aio import deadline

if TYPE_CHECKING:
    from playwright.async_api import Page

__all__ = ["ID_ATTRIBUTE", "Node", "PageView", "read_page", "render", "screenshot"]

ID_ATTRIBUTE = "data-agentgym-id"
MAX_NODES = 3000
"""The walker stops collecting after this many nodes (the text budget cuts far earlier)."""


@dataclass(frozen=True)
class Node:
    """One element of the observation.

    Attributes:
        id: the element's stable id (its ``data-agentgym-id``), kept across steps while the
            element lives; ``None`` for text and headings the agent cannot act on.
        role: ``link``, ``button``, ``textbox``, ``combobox``, ``checkbox``, ``radio``,
            ``heading``, ``text``, ``clickable`` (an element with a click handler), ...
        name: the accessible name (label, text, ``aria-label``, ``alt``, placeholder).
        value: a field's current value (``None`` for elements without one).
        options: a ``<select>``'s option labels.
        checked: a checkbox's or radio's state (``None`` for other elements).
        depth: nesting depth among the kept nodes.
    """

    id: int | None
    role: str
    name: str
    value: str | None = None
    options: tuple[str, ...] = ()
    checked: bool | None = None
    depth: int = 0

    @property
    def clickable(self) -> bool:
        return self.id is not None and self.role not in ("textbox", "combobox", "slider")

    def line(self) -> str:
        """The node as one line of the observation."""
        head = f"[{self.id}] {self.role}" if self.id is not None else self.role
        parts = [f"{head} {_quote(self.name)}"]
        if self.value is not None:
            parts.append(f"value={_quote(self.value)}")
        if self.options:
            parts.append("options=[" + ", ".join(_quote(o) for o in self.options) + "]")
        if self.checked is not None:
            parts.append("checked" if self.checked else "unchecked")
        return " ".join(parts)


@dataclass(frozen=True)
class PageView:
    """What the walker read: the URL, the title, the nodes and the focused element's id."""

    url: str
    title: str
    nodes: tuple[Node, ...]
    focused: int | None = None
    left_out: int = 0
    """Nodes past the walker's ``MAX_NODES``."""

    def node(self, element: int) -> Node | None:
        return next((n for n in self.nodes if n.id == element), None)

    @property
    def interactive(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.id is not None)


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


@cache
def walker_source() -> str:
    return resources.files("agentgym.envs.web").joinpath("walker.js").read_text("utf-8")


def _node(raw: list[Any]) -> Node:
    element, role, name, value, options, checked, depth = raw
    return Node(
        id=None if element is None else int(element),
        role=str(role),
        name=str(name),
        value=None if value is None else str(value),
        options=tuple(str(o) for o in options),
        checked=None if checked is None else bool(checked),
        depth=int(depth),
    )


async def read_page(page: Page, timeout: float) -> PageView:
    """Walk the page's DOM (within ``timeout`` seconds)."""
    async with deadline(timeout, "read the page"):
        raw = await page.evaluate(walker_source(), MAX_NODES)
    return PageView(
        url=page.url,
        title=str(raw.get("title") or ""),
        nodes=tuple(_node(n) for n in raw["nodes"]),
        focused=raw.get("focused"),
        left_out=int(raw.get("truncated") or 0),
    )


def render(view: PageView, error: str | None, max_chars: int) -> str:
    """The page as text, at most about ``max_chars`` characters (cut with a note)."""
    focused = f"[{view.focused}]" if view.focused is not None else "none"
    url = view.url if len(view.url) <= 1000 else view.url[:999] + "…"
    header = [f"URL: {url}"]
    if view.title:
        header.append(f"Title: {view.title}")
    header += [f"Focused: {focused}", f"Last action error: {error or 'none'}"]
    used = sum(len(h) + 1 for h in header)
    lines: list[str] = []
    for index, node in enumerate(view.nodes):
        line = node.line()
        if used + len(line) + 1 > max_chars and lines:
            left = len(view.nodes) - index + view.left_out
            lines.append(
                f"... (page cut: {left} more elements not shown; the observation budget is "
                f"{max_chars} characters; ids below the cut still work)"
            )
            break
        lines.append(line)
        used += len(line) + 1
    else:
        if view.left_out:
            lines.append(f"... (page cut: {view.left_out} more elements not shown)")
    if not view.nodes:
        lines.append("(the page is empty)")
    return "\n".join(header + lines)


async def screenshot(page: Page, timeout: float) -> np.ndarray:
    """The viewport as an ``H x W x 3`` uint8 array."""
    from PIL import Image  # the web extra installs pillow

    async with deadline(timeout, "screenshot"):
        png = await page.screenshot(type="png")
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.uint8)
