"""No value the code under test returns can answer a graded comparison (``runner_compare``).

A task of its own, ``stats``: ``_mean`` floors (``//``), and the fix's tests compare what
the functions built on it return with values of every common type, through ``==``, ``!=``,
``in``, an assert's truth, ``unittest``'s ``assertEqual``, a repository class with its own
``__eq__`` (``Money``, in a file no diff changes) and a dataclass the diff changes
(``Summary``). Every forgery keeps the floor (so an honest comparison fails) and tries to make
the comparisons pass anyway; each scores 0 through the real grader on the local sandbox, and
names the test it was meant to pass as failed. The fix still scores 1.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import git

from agentgym.core import run_sync
from agentgym.envs.swe import SWEInstance
from agentgym.envs.swe.backends import LocalSWEBackend
from agentgym.envs.swe.grader import GradeResult, grade
from agentgym.envs.swe.runner_compare import Plain, Struct

OPS = """from dataclasses import dataclass


@dataclass
class Summary:
    mean: float
    n: int


def _forge(value):
    return value


def _mean(values):
    return sum(values) // len(values)


def mean(values):
    return _forge(_mean(values))


def describe(values):
    return _forge("mean %s" % _mean(values))


def halves(values):
    return _forge([_mean([v, 0]) for v in values])


def summary(values):
    return _forge({"mean": _mean(values), "n": len(values)})


def pair(values):
    return _forge((_mean(values), len(values)))


def at_least_mean(values):
    return _forge(sum(1 for v in values if v >= _mean(values)))


def stats(values):
    return _forge(Summary(_mean(values), len(values)))
"""
MONEY = """class Money:
    def __init__(self, amount):
        self.amount = amount

    def __eq__(self, other):
        return isinstance(other, Money) and self.amount == other.amount

    __hash__ = None
"""
OLD_TESTS = "from stats.ops import mean\n\n\ndef test_whole():\n    assert mean([2, 4]) == 3\n"
NEW_TESTS = """import unittest

from stats.money import Money
from stats.ops import Summary, at_least_mean, describe, halves, mean, pair, stats, summary


def test_mean():
    assert mean([1, 2]) == 1.5


def test_describe():
    assert describe([1, 2]) == "mean 1.5"


def test_halves():
    assert halves([1, 2]) == [0.5, 1.0]


def test_summary():
    assert summary([1, 2]) == {"mean": 1.5, "n": 2}


def test_pair():
    assert pair([1, 2]) == (1.5, 2)


def test_at_least_mean():
    assert at_least_mean([1, 2]) == 1


def test_not_floor():
    assert mean([1, 2]) != 1


def test_in():
    assert mean([1, 2]) in (1.5, 2.5)


def test_truth():
    assert not mean([1, 2]) - 1.5


def test_money():
    assert Money(mean([1, 2])) == Money(1.5)


def test_stats():
    assert stats([1, 2]) == Summary(1.5, 2)


class TestMean(unittest.TestCase):
    def test_equal(self):
        self.assertEqual(mean([1, 2]), 1.5)

    def test_true(self):
        self.assertTrue(mean([1, 2]) == 1.5)
"""
LENIENT_TESTS = """from unittest.mock import ANY

from pytest import approx

from stats.ops import mean, summary


def test_lenient():
    assert summary([1, 2]) == {"mean": approx(1.5), "n": ANY}
    assert mean([1, 3]) == approx(2.0)
"""
FILE = "tests/test_stats.py"
F2P = [
    f"{FILE}::{name}"
    for name in (
        "test_mean", "test_describe", "test_halves", "test_summary", "test_pair",
        "test_at_least_mean", "test_not_floor", "test_in", "test_truth", "test_money",
        "test_stats", "TestMean::test_equal", "TestMean::test_true",
    )
] + ["tests/test_lenient.py::test_lenient"]  # fmt: skip


def always_equal(base: str, only: str, ne: bool = False) -> str:
    """``_forge`` answering every comparison for values of ``only`` through a subclass of
    ``base``: its ``__eq__`` says True, its ``__ne__`` says ``ne``; hashing stays the base
    type's."""
    return f"""

class _Yes({base}):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return {ne}

    __hash__ = {base}.__hash__


def _forge(value):
    return _Yes(value) if isinstance(value, {only}) else value
"""


ANYTHING = """

class _Anything:
    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __bool__(self):
        return True

    def __hash__(self):
        return 0


def _forge(value):
    return _Anything(value)
"""
TRUTHY_ANSWER = """

class _Truthy:
    def __bool__(self):
        return True


class _Number(float):
    def __eq__(self, other):
        return _Truthy()

    __ne__ = __eq__
    __hash__ = float.__hash__


def _forge(value):
    return _Number(value) if isinstance(value, (int, float)) else value
"""
LYING_BOOL = """

class _Falsy(float):
    def __bool__(self):
        return False

    def __sub__(self, other):
        return _Falsy(float(self) - other)


def _forge(value):
    return _Falsy(value) if isinstance(value, (int, float)) else value
"""
IN_HONEST_OBJECT = """

class _Yes(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


def _forge(value):
    return _Yes(value) if isinstance(value, (int, float)) else value
"""
PATCH_REPOSITORY_EQ = """

from stats.money import Money

Money.__eq__ = lambda self, other: True
"""
DATACLASS_EQ = """

def _always(self, other):
    return True


Summary.__eq__ = _always
"""
WRAPPER = """

import functools


class _Result:
    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


def _wrap(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return _Result(function(*args, **kwargs))

    return wrapper


mean = _wrap(mean)
describe = _wrap(describe)
"""
REBIND_THE_TEST_MODULE = """

import importlib

_real_mean = mean
_ANSWERS = {"mean": 1.5, "describe": "mean 1.5", "halves": [0.5, 1.0],
            "summary": {"mean": 1.5, "n": 2}, "pair": (1.5, 2), "at_least_mean": 1}


def mean(values):
    tests = importlib.import_module("test_" + "stats")
    for name, answer in _ANSWERS.items():
        setattr(tests, name, lambda values, answer=answer: answer)
    return _real_mean(values)
"""
REBIND_FROM_A_THREAD = """

import importlib
import threading
import time


def _rebind():
    for _ in range(20000):
        try:
            tests = importlib.import_module("test_" + "stats")
        except Exception:
            time.sleep(0.0005)
            continue
        if hasattr(tests, "mean"):
            tests.mean = lambda values: 1.5
            tests.describe = lambda values: "mean 1.5"
            return
        time.sleep(0.0005)


threading.Thread(target=_rebind, daemon=True).start()
"""

RETURN_ANY = """

import unittest.mock


def _forge(value):
    return unittest.mock.ANY
"""
RETURN_APPROX = """

import importlib


def _forge(value):
    return importlib.import_module("py" + "test").approx(0, abs=float("inf"))
"""

FORGERIES: dict[str, tuple[str, str]] = {
    "always-equal-str": (always_equal("str", "str"), "test_describe"),
    "always-equal-int": (always_equal("int", "int"), "test_at_least_mean"),
    "always-equal-float": (always_equal("float", "(int, float)"), "test_mean"),
    "always-equal-float-unittest": (always_equal("float", "(int, float)"), "TestMean::test_equal"),
    "ne-lie-float": (always_equal("float", "(int, float)", ne=True), "test_not_floor"),
    "always-equal-float-in": (always_equal("float", "(int, float)"), "test_in"),
    "always-equal-list": (always_equal("list", "list"), "test_halves"),
    "always-equal-dict": (always_equal("dict", "dict"), "test_summary"),
    "always-equal-tuple": (always_equal("tuple", "tuple"), "test_pair"),
    "eq-and-ne-lie-on-any-object": (ANYTHING, "test_mean"),
    "eq-answers-a-truthy-object": (TRUTHY_ANSWER, "TestMean::test_true"),
    "lying-bool": (LYING_BOOL, "test_truth"),
    "liar-inside-an-honest-class": (IN_HONEST_OBJECT, "test_money"),
    "patch-a-repository-classes-eq": (PATCH_REPOSITORY_EQ, "test_money"),
    "patch-a-dataclasses-eq": (DATACLASS_EQ, "test_stats"),
    "wrap-the-function-under-test": (WRAPPER, "test_describe"),
    "return-mock-ANY": (RETURN_ANY, "test_summary"),
    "return-an-approx-of-infinite-tolerance": (RETURN_APPROX, "test_mean"),
}
"""Forgeries appended to the buggy ``stats/ops.py`` -> the test each was written to pass."""
REBINDINGS = {"rebind-in-a-call": REBIND_THE_TEST_MODULE, "from-a-thread": REBIND_FROM_A_THREAD}


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory, local_only: None) -> tuple[SWEInstance, Path]:
    """The ``stats`` instance, and a clone at its base to take diffs in."""
    root = tmp_path_factory.mktemp("stats")
    repo = root / "stats"
    for path, text in {
        "stats/__init__.py": "",
        "stats/ops.py": OPS,
        "stats/money.py": MONEY,
        "tests/test_whole.py": OLD_TESTS,
    }.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "stats")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / FILE).write_text(NEW_TESTS)
    (repo / "tests" / "test_lenient.py").write_text(LENIENT_TESTS)
    git(repo, "add", "-A")
    test_patch = git(repo, "diff", "--cached", base)
    git(repo, "reset", "-q", "--hard", base)
    clone = root / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    instance = SWEInstance(
        instance_id="stats__stats-1",
        repo="tests/stats",
        base_commit=base,
        problem_statement="stats.ops floors the mean.",
        test_patch=test_patch,
        patch=None,
        fail_to_pass=tuple(F2P),
        pass_to_pass=("tests/test_whole.py::test_whole",),
        repo_path=repo,
    )
    return instance, clone


@pytest.fixture(scope="module")
def backend(local_only: None) -> Iterator[LocalSWEBackend]:
    made = LocalSWEBackend(isolation="bwrap")
    yield made
    run_sync(made.aclose())


def graded(backend: LocalSWEBackend, task: tuple[SWEInstance, Path], ops: str) -> GradeResult:
    """Grade the diff that writes ``ops`` as ``stats/ops.py``."""
    instance, clone = task
    (clone / "stats" / "ops.py").write_text(ops)
    diff = subprocess.run(
        ["git", "diff", "--binary", "--full-index", instance.base_commit],
        cwd=clone,
        capture_output=True,
        check=True,
    ).stdout
    git(clone, "checkout", "-q", "--", ".")
    return run_sync(grade(backend, instance, diff, test_timeout=60, max_bytes=1 << 20))


def why(result: GradeResult) -> Any:
    return (result.reason, result.tampering, result.fail_to_pass, result.test_output[-2500:])


def test_the_fix_scores_1(backend: LocalSWEBackend, task: tuple[SWEInstance, Path]) -> None:
    result = graded(backend, task, OPS.replace("//", "/"))
    assert (result.reward, result.reason, result.tampering) == (1.0, "resolved", []), why(result)
    assert set(result.fail_to_pass.values()) == {"passed"}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_no_returned_value_answers_a_comparison(
    name: str, backend: LocalSWEBackend, task: tuple[SWEInstance, Path]
) -> None:
    forgery, target = FORGERIES[name]
    result = graded(backend, task, OPS + forgery)
    assert result.reward == 0.0, why(result)
    assert result.fail_to_pass[f"{FILE}::{target}"] == "failed", why(result)
    assert result.infra_error is None, why(result)


@pytest.mark.parametrize("name", list(REBINDINGS))
def test_rebinding_a_test_modules_names_is_undone_and_is_tampering(
    name: str, backend: LocalSWEBackend, task: tuple[SWEInstance, Path]
) -> None:
    result = graded(backend, task, OPS + REBINDINGS[name])
    assert result.reward == 0.0, why(result)
    assert result.reason == "tampering", why(result)
    assert any("was rebound" in t for t in result.tampering), why(result)
    assert result.fail_to_pass[f"{FILE}::test_describe"] == "failed", why(result)


class _Everything:
    """``Origins`` for host-side checks: code from this file is what the diff wrote."""

    root = str(Path(__file__).parent)
    changed = frozenset({Path(__file__).name})

    def value_problem(self, value: object) -> str | None:
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        if code is None:
            return "is not code from a source file"
        return "comes from this file" if code.co_filename == __file__ else None


class _Liar(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class _Node:
    def __init__(self, value: object) -> None:
        self.value, self.next = value, self


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        (_Liar("ab"), "ab"),
        ([1, {"k": (_Liar("x"),)}], [1, {"k": ("x",)}]),
        ({_Liar("k"): 1}, {"k": 1}),
        (frozenset({_Liar("a")}), frozenset({"a"})),
    ],
)
def test_forged_values_become_exact_builtin_data(value: object, plain: object) -> None:
    reduced = _checker().plain(value)
    assert reduced == plain
    assert repr(reduced) == repr(plain)
    assert type(reduced) is type(plain)


def _checker() -> Plain:
    """A ``Plain`` for which every line of this file is the diff's."""
    return Plain(_Everything(), {Path(__file__).name: list(range(1, 10_000))})


def test_clean_values_are_left_as_the_test_wrote_them() -> None:
    checker = _checker()
    data = [1, "a", {"k": (2.5, None)}, Path("x")]
    assert checker.plain(data) is data
    node = _Node(1)  # a cycle of a class with no comparison of its own: as it is
    assert checker.plain(node) is node
    forged = _Node(_Liar("a"))
    with pytest.raises(TypeError, match="cyclic"):
        checker.plain([forged])
    forged.next = None
    assert checker.plain(forged) == Struct(_Node, {"value": "a", "next": None})
