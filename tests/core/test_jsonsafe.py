"""json_safe: one JSON converter, one policy for the objects JSON cannot hold."""

from __future__ import annotations

import enum
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from agentgym.core.jsonsafe import REPR_LIMIT, json_safe


class Shade(enum.Enum):
    DARK = "dark"


class Opaque:
    def __repr__(self) -> str:
        return "Opaque(7)"


class Huge:
    def __repr__(self) -> str:
        return "x" * 10_000


class Broken:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": (1, 2.5, "x"), 3: None, "ok": True}, {"a": [1, 2.5, "x"], "3": None, "ok": True}),
        ([float("nan"), float("inf"), np.float64(-np.inf)], [None, None, None]),
        (
            {"n": np.int64(3), "f": np.float32(0.5), "b": np.bool_(True)},
            {"n": 3, "f": 0.5, "b": True},
        ),
        (np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]]),
        (torch.tensor([0.5, 1.0]), [0.5, 1.0]),
        ({"b", "a", "c"}, ["a", "b", "c"]),  # sets in a stable order
        (frozenset({3, 1}), [1, 3]),
        (Shade.DARK, "dark"),
        (Path("runs/a"), "runs/a"),
    ],
)
def test_json_types_and_their_kin_are_converted(value: Any, expected: Any) -> None:
    assert json_safe(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Opaque(), "<Opaque: Opaque(7)>"),
        (Decimal("1.5"), "<Decimal: Decimal('1.5')>"),
        (b"raw", "<bytes: b'raw'>"),
        (Broken(), "<Broken>"),
    ],
)
def test_an_unknown_object_is_its_type_name_and_repr(value: Any, expected: str) -> None:
    assert json_safe({"x": [value]}) == {"x": [expected]}


def test_an_unknown_objects_repr_is_cut_to_the_limit() -> None:
    text = json_safe(Huge())
    assert text.startswith("<Huge: xxx")
    assert text.endswith("... (10000 characters)>")
    assert len(text) < REPR_LIMIT + 40


def test_a_circular_container_does_not_recurse_forever() -> None:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    assert json_safe(loop) == {"name": "loop", "self": "<dict: circular>"}
    shared = [1]
    assert json_safe({"a": shared, "b": shared}) == {"a": [1], "b": [1]}  # seen twice, no cycle


def test_the_result_is_strict_json() -> None:
    value = {"obj": Opaque(), "nan": float("nan"), "arr": np.zeros(2), "set": {1}}
    text = json.dumps(json_safe(value), allow_nan=False)
    expected = {"obj": "<Opaque: Opaque(7)>", "nan": None, "arr": [0.0, 0.0], "set": [1]}
    assert json.loads(text) == expected
