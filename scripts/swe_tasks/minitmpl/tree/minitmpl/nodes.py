"""The parsed template: nodes that render themselves against a context."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import UndefinedError
from .expr import UNDEFINED, Expression
from .filters import Markup, escape


class Environment(Protocol):
    autoescape: bool
    filters: Mapping[str, Callable[..., Any]]


class Node(Protocol):
    def render(self, context: dict[str, Any], env: Environment) -> str: ...


def render_nodes(nodes: list[Node], context: dict[str, Any], env: Environment) -> str:
    return "".join(node.render(context, env) for node in nodes)


@dataclass
class Text:
    text: str

    def render(self, context: dict[str, Any], env: Environment) -> str:
        return self.text


@dataclass
class Output:
    expr: Expression

    def render(self, context: dict[str, Any], env: Environment) -> str:
        value = self.expr.evaluate(context, env.filters)
        if value is UNDEFINED:
            raise UndefinedError(f"{self.expr.value!r} is undefined")
        if isinstance(value, Markup) or not env.autoescape:
            return "" if value is None else str(value)
        return "" if value is None else escape(value)


@dataclass
class If:
    condition: Expression
    negate: bool
    body: list[Node] = field(default_factory=list)
    else_body: list[Node] = field(default_factory=list)

    def render(self, context: dict[str, Any], env: Environment) -> str:
        truth = bool(self.condition.evaluate(context, env.filters)) != self.negate
        return render_nodes(self.body if truth else self.else_body, context, env)


@dataclass(frozen=True)
class LoopInfo:
    """``loop`` inside ``{% for %}``: index (from 1), index0, first, last, length."""

    index0: int
    length: int

    @property
    def index(self) -> int:
        return self.index0 + 1

    @property
    def first(self) -> bool:
        return self.index0 == 0

    @property
    def last(self) -> bool:
        return self.index0 == self.length - 1


@dataclass
class For:
    target: str
    iterable: Expression
    body: list[Node] = field(default_factory=list)
    else_body: list[Node] = field(default_factory=list)

    def render(self, context: dict[str, Any], env: Environment) -> str:
        items = list(self.iterable.evaluate(context, env.filters))
        if not items:
            return render_nodes(self.else_body, context, env)
        saved = {name: context[name] for name in (self.target, "loop") if name in context}
        out = []
        for index, item in enumerate(items):
            context[self.target] = item
            context["loop"] = LoopInfo(index, len(items))
            out.append(render_nodes(self.body, context, env))
        for name in (self.target, "loop"):
            if name in saved:
                context[name] = saved[name]
            else:
                context.pop(name, None)
        return "".join(out)
