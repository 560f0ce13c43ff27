"""Template: parse once, render many times.

Tags: ``{% if [not] expr %}`` ... ``{% else %}`` ... ``{% endif %}`` and
``{% for name in expr %}`` ... ``{% else %}`` (when empty) ... ``{% endfor %}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import TemplateSyntaxError
from .expr import parse_expression
from .filters import FILTERS
from .lexer import Token, tokenize
from .nodes import For, If, Node, Output, Text, render_nodes

_FOR = re.compile(r"for\s+(?P<target>[A-Za-z_]\w*)\s+in\s+(?P<iterable>.+)", re.S)
_IF = re.compile(r"if\s+(?P<negate>not\s+)?(?P<condition>.+)", re.S)


class Template:
    """``Template("Hello {{ name|title }}!").render(name="ada")`` -> "Hello Ada!".

    With ``autoescape`` (the default) printed values are HTML-escaped unless marked ``|safe``.
    """

    def __init__(
        self,
        source: str,
        *,
        autoescape: bool = True,
        filters: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        self.autoescape = autoescape
        self.filters = {**FILTERS, **(filters or {})}
        self.nodes = _Parser(self.filters).parse(tokenize(source))

    def render(self, context: Mapping[str, Any] | None = None, **values: Any) -> str:
        return render_nodes(self.nodes, {**(context or {}), **values}, self)


@dataclass
class _Open:
    """A block tag whose end tag has not come yet."""

    node: If | For
    token: Token
    in_else: bool = False


class _Parser:
    def __init__(self, filters: Mapping[str, Callable[..., Any]]) -> None:
        self.filters = filters
        self.root: list[Node] = []
        self.open: list[_Open] = []

    def body(self) -> list[Node]:
        if not self.open:
            return self.root
        block = self.open[-1]
        return block.node.else_body if block.in_else else block.node.body

    def parse(self, tokens: list[Token]) -> list[Node]:
        for token in tokens:
            if token.kind == "text":
                self.body().append(Text(token.value))
            elif token.kind == "var":
                self.body().append(Output(parse_expression(token.value, self.filters)))
            else:
                self.tag(token)
        if self.open:
            token = self.open[-1].token
            raise TemplateSyntaxError(f"line {token.line}: {token.value!r} is never closed")
        return self.root

    def tag(self, token: Token) -> None:
        word = token.value.split(maxsplit=1)[0] if token.value else ""
        if word in ("if", "for"):
            node = self.start(word, token)
            self.body().append(node)
            self.open.append(_Open(node, token))
        elif word == "else" and self.open:
            self.open[-1].in_else = True
        elif word in ("endif", "endfor") and self.open:
            block = self.open.pop()
            if word != f"end{type(block.node).__name__.lower()}":
                raise TemplateSyntaxError(f"line {token.line}: {word} closes {block.token.value!r}")
        else:
            raise TemplateSyntaxError(f"line {token.line}: unexpected tag {token.value!r}")

    def start(self, word: str, token: Token) -> If | For:
        if word == "for":
            match = _FOR.fullmatch(token.value)
            if match is None:
                raise TemplateSyntaxError(f"line {token.line}: expected 'for name in ...'")
            return For(match["target"], parse_expression(match["iterable"], self.filters))
        match = _IF.fullmatch(token.value)
        if match is None:
            raise TemplateSyntaxError(f"line {token.line}: expected 'if condition'")
        condition = parse_expression(match["condition"], self.filters)
        return If(condition, bool(match["negate"]))
