"""The page as text: a JS DOM walker, its ``Node``s, and their rendering within a budget."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Node"]


@dataclass(frozen=True)
class Node:
    """One element of the observation.

    Attributes:
        id: the element's stable id (its ``data-agentgym-id``), kept across steps while the
            element lives; ``None`` for text and headings the agent cannot act on.
        role: ``link``, ``button``, ``textbox``, ``combobox``, ``checkbox``, ``radio``,
            ``heading``, ``text``, ...
        name: the accessible name (label, text, ``aria-label``, ``alt``, placeholder).
        value: a field's current value (``None`` for elements without one).
        options: a ``<select>``'s option labels.
        checked: a checkbox's or radio's state (``None`` for other elements).
        depth: nesting depth among the kept nodes (for indentation).
    """

    id: int | None
    role: str
    name: str
    value: str | None = None
    options: tuple[str, ...] = ()
    checked: bool | None = None
    depth: int = 0
