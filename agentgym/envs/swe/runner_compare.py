"""The graded tests' comparisons, evaluated on plain data: no value the code under test returns
can answer a test's ``==`` (or ``!=``, ``<``, ``in``, truth) itself.

Shipped into the grading sandbox next to the runner script; standard library only, Python 3.8
or later. ``install`` wraps pytest's assertion rewriting: before pytest rewrites a test module's
``assert`` statements, ``CompareRewriter`` rewrites each comparison in them (and the arguments
of ``unittest``'s ``assertEqual`` family) so that every operand first goes through ``Plain``:

- an operand from which no *forged* object can be reached is used as the test wrote it (the
  common case: the test's semantics are untouched, the repository's own ``__eq__`` included);
- otherwise it is replaced by plain data: a subclass of ``str``, ``int``, ``float``,
  ``complex``, ``bytes`` or ``bytearray`` by the exact builtin value of its contents, read
  through the base type's own methods; a ``list``, ``tuple``, ``dict``, ``set`` or
  ``frozenset`` (or subclass) by the exact builtin container of its elements' plain forms; any
  other object of a Python class by ``Struct``: its exact class and the plain form of its
  attributes, equal only to a ``Struct`` of the same class with equal attributes.

An object is *forged* when its class's comparison or truth methods (``__eq__``, ``__ne__``,
``__lt__``, ``__le__``, ``__gt__``, ``__ge__``, ``__bool__``, ``__len__``, ``__contains__``,
``__hash__``) are not all the builtin types' own or code from the system's folders or from a
file of the repository the graded diff leaves unchanged (``runner_guard.Origins``): a class
the diff defines or changes, or a repository class whose ``__eq__`` it replaced at run time.
Reachability follows the interpreter's own references (``gc.get_referents``), never the
object's methods, so a forged object hidden in the attributes of an honest one is found too.

Two answers stay with the code under test, because they are the behaviour under test: the
truth of an object of a class the diff defines (``assert cache``: its own ``__bool__`` /
``__len__``), and membership in such an object (``assert key in cache``: its own
``__contains__``; the key is plain). Ordering two ``Struct`` raises ``TypeError`` (the test
fails), as does a forged structure with a cycle.
"""

from __future__ import annotations

import ast
import contextlib
import dis
import gc
import os
import sys
import types
from typing import Any

__all__ = ["NAME", "CompareRewriter", "Plain", "Struct", "install"]

NAME = "@agentgym_compare"
"""The name the rewritten test modules bind this module to (no source code can spell it)."""
_SPECIAL = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__len__",
            "__contains__", "__hash__")  # fmt: skip
_EXACT = frozenset({type(None), bool, int, float, complex, str, bytes, type(...),
                    type(NotImplemented)})  # fmt: skip
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.CodeType, types.FrameType, types.TracebackType,
           classmethod, staticmethod, property)  # fmt: skip
"""Compared by identity or never looked into: their referents are code, not data."""
_HEAPTYPE = 1 << 9
_DESCRIPTORS = (types.WrapperDescriptorType, types.MethodDescriptorType,
                types.BuiltinFunctionType, types.MethodWrapperType)  # fmt: skip
_BUSY = object()
# unittest's assertions whose first two arguments are compared (or the first, tested for truth)
_PAIRS = frozenset({"assertEqual", "assertEquals", "assertNotEqual", "assertNotEquals",
                    "assertAlmostEqual", "assertNotAlmostEqual", "assertListEqual",
                    "assertTupleEqual", "assertDictEqual", "assertSetEqual",
                    "assertSequenceEqual", "assertMultiLineEqual", "assertCountEqual",
                    "assertGreater", "assertGreaterEqual", "assertLess",
                    "assertLessEqual"})  # fmt: skip
_MEMBERSHIP = frozenset({"assertIn", "assertNotIn"})
_TRUTH = frozenset({"assertTrue", "assertFalse", "assert_"})


class Struct:
    """A forged object as plain data: its exact class and its attributes' plain forms."""

    __slots__ = ("cls", "state")

    def __init__(self, cls: type, state: dict[str, Any]) -> None:
        self.cls, self.state = cls, state

    def __eq__(self, other: object) -> bool:
        return type(other) is Struct and other.cls is self.cls and other.state == self.state

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self.cls, tuple(sorted(self.state))))

    def _key(self, other: object) -> tuple[tuple[object, ...], tuple[object, ...]]:
        """Both sides' fields in order, as a dataclass with ``order=True`` compares them."""
        params = getattr(self.cls, "__dataclass_params__", None)
        same = type(other) is Struct and other.cls is self.cls
        if not (same and getattr(params, "order", False)):
            raise TypeError(f"objects of {self.cls.__qualname__}, a class the graded diff "
                            "defines or changes, have no order the grader can check")  # fmt: skip
        names = list(getattr(self.cls, "__dataclass_fields__", {}))
        return tuple(self.state.get(n) for n in names), tuple(other.state.get(n) for n in names)

    def __lt__(self, other: object) -> bool:
        mine, theirs = self._key(other)
        return mine < theirs

    def __le__(self, other: object) -> bool:
        mine, theirs = self._key(other)
        return mine <= theirs

    def __gt__(self, other: object) -> bool:
        mine, theirs = self._key(other)
        return mine > theirs

    def __ge__(self, other: object) -> bool:
        mine, theirs = self._key(other)
        return mine >= theirs

    def __repr__(self) -> str:
        return f"<{self.cls.__qualname__} compared as its attributes {self.state!r}>"


MAX_VISITS = 200_000
"""Objects one operand's search for forged objects visits at most (builtin scalars aside)."""


class _TooBig(Exception):
    pass


class _Walk:
    """One search's state: the objects on its path, those found clean, the classes judged."""

    def __init__(self, lenient: bool) -> None:
        self.lenient = lenient
        self.busy: dict[int, object] = {}
        self.clean: dict[int, object] = {}  # id -> the object, kept alive so ids stay unique
        self.classes: dict[type, bool] = {}

    def forged(self, plain: Plain, cls: type) -> bool:
        known = self.classes.get(cls)
        if known is None:
            known = plain.forged_class(cls) or (not self.lenient and _lenient_class(cls))
            self.classes[cls] = known
        return known

    def visit(self, value: object) -> None:
        if len(self.busy) + len(self.clean) >= MAX_VISITS:
            raise _TooBig
        self.busy[id(value)] = value


class Plain:
    """Decides which objects are forged and reduces operands to plain data (module docstring).

    ``origins``: anything with ``value_problem(value) -> str | None`` (``runner_guard.Origins``).
    """

    __slots__ = ("lines", "origins")

    def __init__(self, origins: Any, lines: dict[str, list[int]] | None = None) -> None:
        self.origins = origins
        self.lines = {path: frozenset(numbers) for path, numbers in (lines or {}).items()}

    def forged_class(self, cls: type) -> bool:
        return any(self._forged_method(cls, name) for name in _SPECIAL)

    def _forged_method(self, cls: type, name: str) -> bool:
        for owner in type.__dict__["__mro__"].__get__(cls):
            space = type.__dict__["__dict__"].__get__(owner)
            if name not in space:
                continue
            if not owner.__flags__ & _HEAPTYPE:
                return False  # a builtin type's own slot
            value = space[name]
            if value is None:
                return False  # __hash__ = None: unhashable, nothing to answer
            if isinstance(value, _DESCRIPTORS):
                return getattr(value, "__objclass__", None) is not owner
            if _dataclass_made(owner, value, name):
                return False
            return self._forged_function(value, name)
        return False

    def _forged_function(self, value: object, name: str) -> bool:
        """Whether ``value`` (found as ``name`` on a class) is code the graded diff wrote: from
        a file it adds, from lines it adds to a file, or a repository function put under
        another name (``__eq__ = __lt__``); a function it leaves as it was is not."""
        why = self.origins.value_problem(value)
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        if code is None:
            return why is not None
        path = os.path.realpath(code.co_filename)
        rel = os.path.relpath(path, self.origins.root)
        in_repo = not rel.startswith("..")
        if why is not None and not (in_repo and rel in self.origins.changed):
            return True
        if in_repo and code.co_name != name:
            return True
        added = self.lines.get(rel, frozenset()) if in_repo else frozenset()
        return bool(added) and not added.isdisjoint(_code_lines(code))

    # -- which objects are forged --------------------------------------------------------

    def tainted(self, value: object, lenient: bool = False) -> bool:
        """Whether a forged object can be reached from ``value`` (an object lenient by design,
        ``LENIENT``, counts as forged unless ``lenient``). A search past ``MAX_VISITS``
        objects stops and finds nothing (such operands compare as written)."""
        walk = _Walk(lenient)
        try:
            return self._taint(value, walk)[0]
        except _TooBig:
            return False

    def _taint(self, value: object, walk: _Walk) -> tuple[bool, bool]:
        """(tainted, whether a cycle was met, which makes a clean answer provisional)."""
        cls = type(value)
        if cls in _EXACT or isinstance(value, _OPAQUE) or id(value) in walk.clean:
            return False, False
        if id(value) in walk.busy:
            return False, True
        if cls.__flags__ & _HEAPTYPE and walk.forged(self, cls):
            return True, False
        walk.visit(value)
        cycle = False
        try:
            for ref in gc.get_referents(value):
                if ref is cls:
                    continue
                found, met = self._taint(ref, walk)
                if found:
                    return True, False
                cycle = cycle or met
        finally:
            del walk.busy[id(value)]
        if not cycle:
            walk.clean[id(value)] = value
        return False, cycle

    # -- plain forms ---------------------------------------------------------------------

    def plain(self, value: object, lenient: bool = False) -> object:
        """``value`` itself when nothing forged can be reached from it, else its plain form."""
        if type(value) in _EXACT or not self.tainted(value, lenient):
            return value
        return self._rebuild(value, {}, lenient)

    def written(self, value: object) -> object:
        """``plain`` in a test module that names ``ANY`` or ``approx``: objects lenient by
        design are taken to be the test's own there."""
        return self.plain(value, lenient=True)

    def container(self, value: object) -> object:
        """The right operand of ``in``: an object of a forged class keeps its own
        ``__contains__`` (the behaviour under test); anything else becomes plain."""
        if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset, bytearray)):
            return self.plain(value)
        return value

    def truth(self, value: object) -> bool:
        """The truth of ``value``: a forged builtin subclass's by its contents; an object of a
        forged class by its own ``__bool__`` / ``__len__``, which must give a real bool or int."""
        if type(value) is bool:
            return value
        plain = self.plain(value)
        if type(plain) is not Struct:
            return bool(plain)
        answer = bool(value)
        if type(answer) is not bool:
            raise TypeError("the truth of a value was not a bool")
        return answer

    def _rebuild(self, value: object, busy: dict[int, object], lenient: bool) -> object:
        cls = type(value)
        if cls in _EXACT or isinstance(value, _OPAQUE) or not self.tainted(value, lenient):
            return value
        if id(value) in busy:
            raise TypeError(f"cannot compare cyclic data holding a forged {cls.__qualname__}")
        busy[id(value)] = value
        try:
            return self._reduce(value, cls, busy, lenient)
        finally:
            del busy[id(value)]

    def _reduce(self, value: Any, cls: type, busy: dict[int, object], lenient: bool) -> object:
        each = lambda item: self._rebuild(item, busy, lenient)  # noqa: E731
        for base, read in _SCALAR_READERS:
            if issubclass(cls, base):
                return read(value)
        if issubclass(cls, dict):
            return {each(k): each(v) for k, v in list(dict.items(value))}
        if issubclass(cls, (list, tuple)):
            base = list if issubclass(cls, list) else tuple
            return base(each(item) for item in base.__getitem__(value, slice(None)))
        if issubclass(cls, (set, frozenset)):
            base = set if issubclass(cls, set) else frozenset
            return base(each(item) for item in list(base.__iter__(value)))
        if not cls.__flags__ & _HEAPTYPE:
            raise TypeError(f"cannot compare a {cls.__qualname__} holding a forged object")
        return Struct(cls, {k: each(v) for k, v in _attributes(value, cls).items()})


LENIENT = frozenset({("unittest.mock", "_ANY"), ("_pytest.python_api", "ApproxBase")})
"""Classes (module, name) whose ``__eq__`` accepts values by design: honest in a test module
that names them (``== ANY``, ``== approx(1.5)``), forged in any other (returned by the code
under test, an ``approx`` of infinite tolerance included)."""
LENIENT_NAMES = frozenset({"ANY", "approx"})


def _lenient_class(cls: type) -> bool:
    for owner in type.__dict__["__mro__"].__get__(cls):
        space = type.__dict__["__dict__"].__get__(owner)
        if (space.get("__module__"), owner.__name__) in LENIENT:
            return True
    return False


def _names_lenient(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in LENIENT_NAMES)
        or (isinstance(n, ast.Attribute) and n.attr in LENIENT_NAMES)
        for n in ast.walk(node)
    )


def _dataclass_made(owner: type, value: object, name: str) -> bool:
    """Whether ``value`` is the ``name`` method ``dataclasses`` wrote for ``owner``: it
    compares the fields' values, which ``Plain`` looks into like any other state."""
    code = getattr(value, "__code__", None)
    return (
        "__dataclass_fields__" in type.__dict__["__dict__"].__get__(owner)
        and code is not None
        and code.co_filename == "<string>"
        and getattr(value, "__qualname__", None) == f"{owner.__qualname__}.{name}"
    )


def _code_lines(code: types.CodeType) -> range:
    """The lines ``code`` spans (its decorators and nested functions included)."""
    last = code.co_firstlineno
    todo = [code]
    while todo:
        one = todo.pop()
        last = max([last, *(line for _, line in dis.findlinestarts(one) if line is not None)])
        todo += [c for c in one.co_consts if isinstance(c, types.CodeType)]
    return range(code.co_firstlineno, last + 1)


_SCALAR_READERS = (
    (str, lambda v: str.__getitem__(v, slice(None))),
    (bytes, lambda v: bytes.__getitem__(v, slice(None))),
    (bytearray, lambda v: bytearray.__getitem__(v, slice(None))),
    (int, int.__index__),
    (float, float.__float__),
    (complex, lambda v: complex(complex.real.__get__(v), complex.imag.__get__(v))),
)
"""Each builtin type's own way to copy a subclass's contents into an exact instance."""


def _attributes(value: object, cls: type) -> dict[str, object]:
    """``value``'s instance dict and slots, read through the interpreter's own descriptors."""
    found: dict[str, object] = {}
    for owner in reversed(type.__dict__["__mro__"].__get__(cls)):
        space = type.__dict__["__dict__"].__get__(owner)
        for name, member in space.items():
            if type(member) is types.MemberDescriptorType and name != "__weakref__":
                with contextlib.suppress(AttributeError):  # an unset slot
                    found[name] = member.__get__(value, cls)
            elif name == "__dict__" and type(member) is types.GetSetDescriptorType:
                found.update(dict.items(member.__get__(value, cls)))
    return found


# -- rewriting the test modules -----------------------------------------------------------


class CompareRewriter(ast.NodeTransformer):
    """Wraps the operands of every comparison of a test module, the test of each ``assert``
    and the arguments of ``unittest``'s assertions in calls to ``Plain``, bound in the module
    as ``NAME``."""

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        self.generic_visit(node)
        node.test = self._test(node.test)
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        name = node.func.attr if isinstance(node.func, ast.Attribute) else None
        args = node.args
        if name in _PAIRS and len(args) >= 2:
            args[0], args[1] = self._call("plain", args[0]), self._call("plain", args[1])
        elif name in _MEMBERSHIP and len(args) >= 2:
            args[0], args[1] = self._call("plain", args[0]), self._call("container", args[1])
        elif name in _TRUTH and args:
            args[0] = self._call("truth", args[0])
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.Compare:
        self.generic_visit(node)
        if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            return node  # identity: nothing to answer
        wrapped = [self._call("plain", node.left)]
        for op, operand in zip(node.ops, node.comparators):  # noqa: B905 (Python 3.8)
            kind = "container" if isinstance(op, (ast.In, ast.NotIn)) else "plain"
            wrapped.append(self._call(kind, operand))
        node.left, node.comparators = wrapped[0], wrapped[1:]
        return node

    def _test(self, node: ast.expr) -> ast.expr:
        """An ``assert``'s test with its truth taken by ``Plain.truth`` (comparisons, already
        rewritten, and ``and`` / ``or`` / ``not`` are looked into)."""
        if isinstance(node, ast.BoolOp):
            node.values = [self._test(v) for v in node.values]
            return node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node.operand = self._test(node.operand)
            return node
        if isinstance(node, ast.Compare):
            return node
        return self._call("truth", node)

    def __init__(self, lenient: bool = False) -> None:
        self.plain = "written" if lenient else "plain"

    def _call(self, method: str, node: ast.expr) -> ast.expr:
        method = self.plain if method == "plain" else method
        func = ast.Attribute(ast.Name(NAME, ast.Load()), method, ast.Load())
        return ast.copy_location(ast.Call(func, [node], []), node)


def rewrite(tree: ast.Module) -> None:
    """Rewrite ``tree``'s comparisons and bind ``NAME`` at its top (after its docstring and
    ``__future__`` imports, where pytest puts its own)."""
    CompareRewriter(lenient=_names_lenient(tree)).visit(tree)
    at = 0
    for index, stmt in enumerate(tree.body):
        doc = index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (doc or future):
            break
        at = index + 1
    bind = ast.ImportFrom(__name__, [ast.alias("PLAIN", NAME)], 0)
    tree.body[at:at] = [bind]
    ast.fix_missing_locations(tree)


PLAIN: Plain | None = None
"""The test process's ``Plain`` (``install`` sets it)."""


def install(origins: Any, lines: dict[str, list[int]] | None = None) -> Plain:
    """Make pytest rewrite every test module's comparisons (before its own assertion
    rewriting) and never load a cached rewritten module; the ``Plain`` the modules bind.
    Call before any code of the repository runs."""
    global PLAIN
    from _pytest.assertion import rewrite as pytest_rewrite

    PLAIN = Plain(origins, lines)
    original = pytest_rewrite.rewrite_asserts

    def rewrite_asserts(mod: ast.Module, *args: Any, **kwargs: Any) -> None:
        rewrite(mod)
        original(mod, *args, **kwargs)

    pytest_rewrite.rewrite_asserts = rewrite_asserts
    pytest_rewrite._read_pyc = lambda *args, **kwargs: None
    return PLAIN


def rewritten(module: object, plain: Plain) -> bool:
    """Whether ``module`` was imported through ``install``'s rewriting (binding ``plain``)."""
    return getattr(module, "__dict__", {}).get(NAME) is plain


if __name__ == "__main__":  # pragma: no cover
    sys.exit("runner_compare is imported by the runner, not run")
