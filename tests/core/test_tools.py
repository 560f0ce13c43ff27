"""Tools: schemas from typed, docstring'd functions, and validated calls."""

from __future__ import annotations

import asyncio
import enum
import json
from typing import Any, Literal, Optional

import jsonschema
import pytest

from agentgym.core import Tool, ToolCallFailed, tool
from agentgym.error import ToolDefinitionError


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def paint(
    wall: int,
    color: Color,
    finish: Literal["matte", "gloss"] = "matte",
    coats: list[int] | None = None,
    note: Optional[str] = None,  # noqa: UP045 -- Optional spelled the old way on purpose
    thickness: float = 1.5,
    dry: bool = True,
) -> str:
    """Paint a wall of the room.

    Only the first paragraph is the description.

    Args:
        wall: index of the wall,
            counted clockwise from the door.
        color: the paint colour.
        finish (str): the surface finish.
        coats: how many layers per section.
        note: free text for the painter.
        thickness: millimetres per coat.
        dry: whether to wait for it to dry.

    Returns:
        A receipt.
    """
    return f"{wall} {color} {finish} {coats} {note} {thickness} {dry}"


PAINT_SCHEMA = {
    "type": "function",
    "function": {
        "name": "paint",
        "description": "Paint a wall of the room.",
        "parameters": {
            "type": "object",
            "properties": {
                "wall": {
                    "type": "integer",
                    "description": "index of the wall, counted clockwise from the door.",
                },
                "color": {
                    "type": "string",
                    "enum": ["red", "blue"],
                    "description": "the paint colour.",
                },
                "finish": {
                    "type": "string",
                    "enum": ["matte", "gloss"],
                    "description": "the surface finish.",
                    "default": "matte",
                },
                "coats": {
                    "type": ["array", "null"],
                    "items": {"type": "integer"},
                    "description": "how many layers per section.",
                    "default": None,
                },
                "note": {
                    "type": ["string", "null"],
                    "description": "free text for the painter.",
                    "default": None,
                },
                "thickness": {
                    "type": "number",
                    "description": "millimetres per coat.",
                    "default": 1.5,
                },
                "dry": {
                    "type": "boolean",
                    "description": "whether to wait for it to dry.",
                    "default": True,
                },
            },
            "required": ["wall", "color"],
            "additionalProperties": False,
        },
    },
}


def test_google_docstring_and_type_hints_give_the_schema() -> None:
    assert Tool.from_function(paint).schema() == PAINT_SCHEMA


def test_sphinx_docstring_gives_descriptions() -> None:
    def look(x: int, y: str = "n") -> str:
        """Look around.

        :param x: how far,
            in squares.
        :param str y: which way.
        :returns: what is seen.
        :raises ValueError: never.
        """
        return ""

    parameters = Tool.from_function(look).parameters
    assert Tool.from_function(look).description == "Look around."
    assert parameters["properties"] == {
        "x": {"type": "integer", "description": "how far, in squares."},
        "y": {"type": "string", "description": "which way.", "default": "n"},
    }
    assert parameters["required"] == ["x"]


def test_decorator_name_and_description_overrides() -> None:
    @tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    assert isinstance(noop, Tool)
    assert noop.schema()["function"] == {
        "name": "noop",
        "description": "Do nothing.",
        "parameters": {
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": False,
        },
    }
    renamed = Tool.from_function(paint, name="daub", description="Daub it.")
    assert (renamed.name, renamed.description) == ("daub", "Daub it.")


def test_more_annotations() -> None:
    def f(a: dict[str, int], b: tuple[str, ...], c: int | str, d: Any, e: list) -> None:  # type: ignore[type-arg]
        """F."""

    assert Tool.from_function(f).parameters["properties"] == {
        "a": {"type": "object"},
        "b": {"type": "array", "items": {"type": "string"}},
        "c": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "d": {},
        "e": {"type": "array"},
    }


def test_schema_returns_a_fresh_copy() -> None:
    paint_tool = Tool.from_function(paint)
    paint_tool.schema()["function"]["parameters"]["properties"].clear()
    assert paint_tool.schema() == PAINT_SCHEMA


def test_the_schema_is_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(Tool.from_function(paint).parameters)


def _no_doc(x: int) -> str:
    return ""


def _no_hint(x) -> str:  # type: ignore[no-untyped-def]
    """Has a docstring."""
    return ""


def _var_args(*xs: int) -> str:
    """Has a docstring."""
    return ""


def _var_kwargs(**kw: int) -> str:
    """Has a docstring."""
    return ""


def _set_arg(x: set[int]) -> str:
    """Has a docstring."""
    return ""


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (_no_doc, "no docstring"),
        (_no_hint, "no type hint"),
        (_var_args, r"\*xs"),
        (_var_kwargs, r"\*kw"),
        (_set_arg, "cannot express type"),
    ],
)
def test_undescribable_functions_raise_tool_definition_error(fn: Any, match: str) -> None:
    with pytest.raises(ToolDefinitionError, match=match):
        Tool.from_function(fn)


@pytest.mark.parametrize("name", ["has space", "x" * 65, "dots.not.allowed", "ünï"])
def test_bad_tool_names_raise(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="not allowed"):
        Tool.from_function(paint, name=name)


def test_call_runs_sync_functions_and_converts_enums() -> None:
    result = asyncio.run(Tool.from_function(paint).call({"wall": 2, "color": "blue"}))
    assert result == "2 Color.BLUE matte None None 1.5 True"


def test_call_accepts_null_for_optional_parameters() -> None:
    result = asyncio.run(Tool.from_function(paint).call({"wall": 0, "color": "red", "note": None}))
    assert result == "0 Color.RED matte None None 1.5 True"


def test_call_runs_async_functions_and_serialises_non_text_results() -> None:
    async def add(a: int, b: int) -> dict[str, int]:
        """Add."""
        await asyncio.sleep(0)
        return {"sum": a + b}

    assert json.loads(asyncio.run(Tool.from_function(add).call({"a": 2, "b": 3}))) == {"sum": 5}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"color": "red"}, "'wall' is a required property"),
        ({"wall": "two", "color": "red"}, "'two' is not of type 'integer'"),
        ({"wall": 1, "color": "green"}, "'green' is not one of ['red', 'blue']"),
        ({"wall": 1, "color": "red", "extra": 1}, "('extra' was unexpected)"),
        ({"wall": 1, "color": "red", "coats": ["x"]}, "'x' is not of type 'integer'"),
    ],
)
def test_call_rejects_arguments_that_break_the_schema(
    arguments: dict[str, Any], problem: str
) -> None:
    paint_tool = Tool.from_function(paint)
    assert problem in (paint_tool.validation_error(arguments) or "")
    with pytest.raises(ToolCallFailed, match="invalid arguments for paint") as caught:
        asyncio.run(paint_tool.call(arguments))
    assert problem in str(caught.value)


def test_validation_error_does_not_echo_a_huge_argument() -> None:
    message = Tool.from_function(paint).validation_error({"wall": 1, "color": "r" * 1_000_000})
    assert message is not None
    assert len(message) < 1_000


def test_valid_arguments_have_no_validation_error() -> None:
    assert Tool.from_function(paint).validation_error({"wall": 1, "color": "red"}) is None


def test_tool_call_failed_raised_by_the_tool_propagates() -> None:
    def refuse() -> str:
        """Refuse."""
        raise ToolCallFailed("no")

    with pytest.raises(ToolCallFailed, match="no"):
        asyncio.run(Tool.from_function(refuse).call({}))


def test_literal_schema_names_its_type_and_optional_literal_accepts_null() -> None:
    def pick(mode: Literal["fast", "slow"] | None = None) -> str:
        """Pick a mode.

        Args:
            mode: how to go.
        """
        return str(mode)

    picked = Tool.from_function(pick)
    assert picked.parameters["properties"]["mode"]["type"] == ["string", "null"]
    assert picked.parameters["properties"]["mode"]["enum"] == ["fast", "slow", None]
    assert picked.validation_error({"mode": None}) is None
    assert picked.validation_error({"mode": "fast"}) is None
    assert picked.validation_error({"mode": "medium"}) is not None


def test_a_non_text_result_is_json_with_the_one_policy_for_unknown_objects() -> None:
    class Reading:
        def __repr__(self) -> str:
            return "Reading(3)"

    def measure() -> dict[str, Any]:
        """Measure."""
        return {"reading": Reading(), "unit": {"cm"}}

    result = asyncio.run(Tool.from_function(measure).call({}))
    assert json.loads(result) == {"reading": "<Reading: Reading(3)>", "unit": ["cm"]}
