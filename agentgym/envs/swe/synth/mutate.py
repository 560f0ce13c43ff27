"""Procedural bugs: one small edit to a function or method of a Python source file.

``mutations(path, source)`` lists every candidate edit of every kind in ``KINDS``, each as a
minimal text edit of the original source (the rest of the file, its formatting and comments are
kept, so the diff is a line or two). ``pick(candidates, n, seed)`` chooses ``n`` of them,
deterministically for a seed. Every edit parses, and changes the code's AST.
"""

from __future__ import annotations

import ast
import itertools
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "Mutation", "apply_edits", "mutations", "pick"]

KINDS = (
    "compare_op",  # a < b -> a <= b, == -> !=, in -> not in, is -> is not
    "bool_op",  # and <-> or
    "arith_op",  # + <-> -, * <-> //, % -> //, ...
    "slice_off_by_one",  # x[a:b] -> x[a:b - 1], x[a:] -> x[a + 1:]
    "range_off_by_one",  # range(n) -> range(n - 1), range(a, b) -> range(a, b + 1)
    "drop_condition",  # a and b -> a
    "negate_condition",  # if c: -> if not c:, while c: -> while not c:
    "remove_not",  # not c -> c
    "swap_arguments",  # f(a, b) -> f(b, a)
    "remove_statement",  # a statement -> pass
    "change_constant",  # 1 -> 2, 0 -> 1, True -> False
    "change_default",  # def f(x=1) -> def f(x=2), None -> a value
    "swap_branches",  # if c: A else: B -> if c: B else: A
    "early_return",  # return result before the loop that fills it
)
_COMPARE = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip
_ARITH = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd, ast.LShift: ast.RShift, ast.RShift: ast.LShift,
}  # fmt: skip


@dataclass(frozen=True)
class Mutation:
    """One edit: replace ``source[start:end]`` (character offsets) of ``path`` with ``new``."""

    kind: str
    path: str
    function: str
    """The qualified name of the function or method edited (``Class.method``)."""
    line: int
    start: int
    end: int
    old: str
    new: str

    @property
    def key(self) -> str:
        """A stable id of the edit: path, offsets and kind."""
        return f"{self.path}:{self.start}-{self.end}:{self.kind}"

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "path": self.path,
            "function": self.function,
            "line": self.line,
            "start": self.start,
            "end": self.end,
            "old": self.old,
            "new": self.new,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Mutation:
        return cls(**data)  # type: ignore[arg-type]


def apply_edits(source: str, edits: list[Mutation]) -> str:
    """``source`` with ``edits`` (of one file, not overlapping) applied."""
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        if source[edit.start : edit.end] != edit.old:
            raise ValueError(f"{edit.key}: the source changed since the edit was made")
        source = source[: edit.start] + edit.new + source[edit.end :]
    return source


def pick(candidates: list[Mutation], n: int | None, seed: int) -> list[Mutation]:
    """``n`` of ``candidates`` (all when ``None``), shuffled by ``seed``, kinds interleaved so
    that every kind is represented before any is repeated."""
    rng = random.Random(seed)
    by_kind: dict[str, list[Mutation]] = {}
    for candidate in sorted(candidates, key=lambda m: m.key):
        by_kind.setdefault(candidate.kind, []).append(candidate)
    for group in by_kind.values():
        rng.shuffle(group)
    order = sorted(by_kind)
    rng.shuffle(order)
    chosen: list[Mutation] = []
    while any(by_kind.values()) and (n is None or len(chosen) < n):
        for kind in order:
            if by_kind[kind] and (n is None or len(chosen) < n):
                chosen.append(by_kind[kind].pop())
    return chosen


def mutations(path: str, source: str) -> list[Mutation]:
    """Every candidate edit of the functions and methods of ``source`` (``[]`` when it does not
    parse). ``path`` is recorded in each."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    offsets = _Offsets(source)
    found: dict[str, Mutation] = {}
    seen: set[tuple[int, int, str]] = set()
    for function, qualname in _functions(tree):
        segment = _Segment(source, function, offsets)
        for node, kind, new in _edits(function, offsets):
            start, end = offsets.span(node)
            old = source[start:end]
            if new is None or new == old or not segment.changed_by(start, end, new):
                continue
            line = getattr(node, "lineno", function.lineno)
            mutation = Mutation(kind, path, qualname, line, start, end, old, new)
            if (start, end, new) not in seen:
                seen.add((start, end, new))
                found.setdefault(mutation.key, mutation)
    return sorted(found.values(), key=lambda m: (m.start, m.kind))


class _Offsets:
    """AST positions (line, UTF-8 byte column) to character offsets of the source."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for text in self.lines:
            self.starts.append(self.starts[-1] + len(text))

    def at(self, line: int, col: int) -> int:
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.starts[line - 1] + len(text.encode()[:col].decode(errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.at(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.at(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def indent(self, node: ast.AST) -> str:
        text = self.lines[node.lineno - 1]  # type: ignore[attr-defined]
        return text[: len(text) - len(text.lstrip())]


def _functions(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[ast.AST, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield child, prefix + child.name
                yield from walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")

    yield from walk(tree, "")  # type: ignore[misc]


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not those of functions or classes nested in it."""
    stack: list[ast.AST] = list(function.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


_Edit = tuple[ast.AST, str, "str | None"]


def _edits(function: ast.FunctionDef | ast.AsyncFunctionDef, o: _Offsets) -> Iterator[_Edit]:
    body = function.body
    docstring = body[:1] if _is_docstring(body[0]) else []
    for default in (*function.args.defaults, *function.args.kw_defaults):
        if isinstance(default, ast.Constant):
            yield default, "change_default", _other_constant(default.value, default=True)
    for node in _own_nodes(function):
        if not (docstring and docstring[0].value is node):  # type: ignore[attr-defined]
            handler = _HANDLERS.get(type(node))
            if handler is not None:
                yield from handler(node, o)
    yield from _statement_edits(function, docstring, o)


def _compare_edits(node: ast.Compare, o: _Offsets) -> Iterator[_Edit]:
    op = _COMPARE.get(type(node.ops[0])) if len(node.ops) == 1 else None
    if op is not None:
        parts = [node.left, *node.comparators]
        yield node, "compare_op", _swap_ops(node, parts, _symbol(node.ops[0]), _symbol(op()), o)


def _boolop_edits(node: ast.BoolOp, o: _Offsets) -> Iterator[_Edit]:
    other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    yield node, "bool_op", _swap_ops(node, node.values, _symbol(node.op), _symbol(other), o)
    if len(node.values) == 2:
        yield node, "drop_condition", o.text(node.values[0])


def _binop_edits(node: ast.BinOp, o: _Offsets) -> Iterator[_Edit]:
    op = _ARITH.get(type(node.op))
    if op is not None and not _is_string_format(node):
        parts = [node.left, node.right]
        yield node, "arith_op", _swap_ops(node, parts, _symbol(node.op), _symbol(op()), o)


def _unary_edits(node: ast.UnaryOp, o: _Offsets) -> Iterator[_Edit]:
    if isinstance(node.op, ast.Not):
        yield node, "remove_not", o.text(node.operand)


def _subscript_edits(node: ast.Subscript, o: _Offsets) -> Iterator[_Edit]:
    if isinstance(node.slice, ast.Slice):
        yield from _slice_edit(node.slice, o.text)


def _condition_edits(node: ast.If | ast.While, o: _Offsets) -> Iterator[_Edit]:
    test = node.test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield test, "negate_condition", o.text(test.operand)
    else:
        yield test, "negate_condition", f"not {_paren(o.text(test), test)}"
    if isinstance(node, ast.If) and node.orelse and not _is_elif(node, o):
        yield node, "swap_branches", _swapped_if(node, o)


def _constant_edits(node: ast.Constant, o: _Offsets) -> Iterator[_Edit]:
    if type(node.value) in (int, float, bool):
        yield node, "change_constant", _other_constant(node.value, default=False)


_HANDLERS: dict[type, Callable[[Any, _Offsets], Iterator[_Edit]]] = {
    ast.Compare: _compare_edits,
    ast.BoolOp: _boolop_edits,
    ast.BinOp: _binop_edits,
    ast.UnaryOp: _unary_edits,
    ast.Subscript: _subscript_edits,
    ast.Call: lambda node, o: _call_edits(node, o.text),
    ast.If: _condition_edits,
    ast.While: _condition_edits,
    ast.Constant: _constant_edits,
}


def _symbol(op: ast.operator | ast.cmpop | ast.boolop) -> str:
    if isinstance(op, ast.boolop):
        return "and" if isinstance(op, ast.And) else "or"
    if isinstance(op, ast.cmpop):
        return ast.unparse(ast.Compare(ast.Name("a"), [op], [ast.Name("b")]))[2:-2]
    return ast.unparse(ast.BinOp(ast.Name("a"), op, ast.Name("b")))[2:-2]


def _swap_ops(
    node: ast.AST, parts: Sequence[ast.AST], old: str, new: str, o: _Offsets
) -> str | None:
    """The text of ``node`` with operator ``old`` between each two of ``parts`` made ``new``
    (only the text between the operands changes: their parentheses and spacing are kept)."""
    start, end = o.span(node)
    text = o.source[start:end]
    out, at = [], start
    for left, right in itertools.pairwise(parts):
        gap_start, gap_end = o.span(left)[1], o.span(right)[0]
        gap = o.source[gap_start:gap_end]
        pattern = r"(?<![\w=<>!*/])" + re.escape(old) + r"(?![\w=<>*/])"
        if len(re.findall(pattern, gap)) != 1:
            return None
        out.append(o.source[at:gap_start] + re.sub(pattern, new, gap))
        at = gap_end
    out.append(o.source[at:end])
    return "".join(out) if text else None


def _paren(text: str, node: ast.AST) -> str:
    simple = isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Constant | ast.Subscript)
    return text if simple or text.startswith("(") else f"({text})"


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _is_string_format(node: ast.BinOp) -> bool:
    return isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant | ast.JoinedStr)


def _other_constant(value: object, *, default: bool) -> str | None:
    if isinstance(value, bool):
        return repr(not value)
    if isinstance(value, int):
        return repr(value + 1) if value != -1 else "0"
    if isinstance(value, float):
        return repr(value * 2 if value else 1.0)
    if default and value is None:
        return "0"
    return None


def _slice_edit(node: ast.Slice, src: object) -> Iterator[_Edit]:
    text = src  # type: ignore[assignment]
    if node.upper is not None:
        yield node.upper, "slice_off_by_one", _plus(text(node.upper), node.upper, -1)  # type: ignore[operator]
    elif node.lower is not None:
        yield node.lower, "slice_off_by_one", _plus(text(node.lower), node.lower, 1)  # type: ignore[operator]


def _plus(text: str, node: ast.AST, delta: int) -> str:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return repr(node.value + delta)
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        if isinstance(node.op, ast.USub) and type(value) is int:
            return repr(-value + delta)
    return f"{_paren(text, node)} {'+' if delta > 0 else '-'} {abs(delta)}"


def _call_edits(node: ast.Call, src: object) -> Iterator[_Edit]:
    text = src  # type: ignore[assignment]
    args = node.args
    if isinstance(node.func, ast.Name) and node.func.id == "range" and args:
        if len(args) == 1:
            yield args[0], "range_off_by_one", _plus(text(args[0]), args[0], -1)  # type: ignore[operator]
        else:
            yield args[1], "range_off_by_one", _plus(text(args[1]), args[1], 1)  # type: ignore[operator]
    elif len(args) >= 2 and not any(isinstance(a, ast.Starred) for a in args[:2]):
        first, second = text(args[0]), text(args[1])  # type: ignore[operator]
        if first != second and "\n" not in first + second:
            yield _Pair(args[0], args[1]), "swap_arguments", f"{second}, {first}"


class _Pair(ast.AST):
    """The span from the first of two nodes to the end of the second."""

    def __init__(self, first: ast.AST, second: ast.AST) -> None:
        super().__init__()
        self.lineno, self.col_offset = first.lineno, first.col_offset  # type: ignore[attr-defined]
        self.end_lineno = second.end_lineno  # type: ignore[attr-defined]
        self.end_col_offset = second.end_col_offset  # type: ignore[attr-defined]


def _is_elif(node: ast.If, o: _Offsets) -> bool:
    return o.lines[node.lineno - 1].lstrip().startswith("elif")


def _swapped_if(node: ast.If, o: _Offsets) -> str | None:
    if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If) and _is_elif(node.orelse[0], o):
        return None
    swapped = ast.If(test=node.test, body=node.orelse, orelse=node.body)
    indent = o.indent(node)
    lines = ast.unparse(swapped).splitlines()
    return "\n".join([lines[0], *(indent + line for line in lines[1:])])


def _statement_edits(
    function: ast.FunctionDef | ast.AsyncFunctionDef, docstring: list[ast.stmt], o: _Offsets
) -> Iterator[_Edit]:
    for node in [function, *_own_nodes(function)]:
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            for statement in body:
                if statement in docstring or statement.lineno != statement.end_lineno:
                    continue
                removable = isinstance(
                    statement, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Expr
                ) and not _is_docstring(statement)
                if removable and len(body) > 1:
                    yield statement, "remove_statement", "pass"
        if node is function:
            yield from _early_return(function, o)


def _early_return(function: ast.FunctionDef | ast.AsyncFunctionDef, o: _Offsets) -> Iterator[_Edit]:
    body = function.body
    last = body[-1]
    if len(body) < 3 or not isinstance(last, ast.Return) or last.value is None:
        return
    if not isinstance(last.value, ast.Name | ast.Constant):
        return
    before = body[-2]
    if isinstance(before, ast.For | ast.While | ast.If | ast.With | ast.Try):
        value = o.text(last.value)
        yield _Start(before), "early_return", f"return {value}\n{o.indent(before)}"


class _Start(ast.AST):
    """An empty span at the start of a statement (an insertion point)."""

    def __init__(self, node: ast.AST) -> None:
        super().__init__()
        self.lineno = self.end_lineno = node.lineno  # type: ignore[attr-defined]
        self.col_offset = self.end_col_offset = node.col_offset  # type: ignore[attr-defined]


class _Segment:
    """A function's source from its ``def`` line to its end, parsed on its own (an indented
    one inside ``if True:``), to check that an edit of it parses and changes its AST without
    parsing the whole file again for every edit."""

    def __init__(self, source: str, function: ast.AST, o: _Offsets) -> None:
        self.base = o.starts[function.lineno - 1]  # type: ignore[attr-defined]
        self.text = source[self.base : o.span(function)[1]]
        self.indented = self.text[:1].isspace()
        self.dump = self._dump(self.text)

    def _dump(self, text: str) -> str | None:
        try:
            return ast.dump(ast.parse("if True:\n" + text if self.indented else text))
        except (SyntaxError, ValueError):
            return None

    def changed_by(self, start: int, end: int, new: str) -> bool:
        a, b = start - self.base, end - self.base
        if self.dump is None or a < 0 or b > len(self.text):
            return False
        mutated = self._dump(self.text[:a] + new + self.text[b:])
        return mutated is not None and mutated != self.dump
