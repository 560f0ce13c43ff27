"""The one KEY=VALUE grammar: values read as JSON else text, JSON objects, the old comma form."""

from __future__ import annotations

import pytest

from agentgym.core.errors import AgentGymDeprecationWarning, ConfigError
from agentgym.core.keyvalue import parse_kwargs, parse_pairs


def test_values_are_json_when_they_parse_else_text() -> None:
    items = ["a=5", "b=true", "c=0.5", "d=hello", "e=[1, 2]", "f=", "g=x=y", "h=null"]
    assert parse_pairs(items, "--set") == {
        "a": 5, "b": True, "c": 0.5, "d": "hello", "e": [1, 2], "f": "", "g": "x=y", "h": None,
    }  # fmt: skip


def test_text_mode_keeps_values_and_takes_any_key() -> None:
    parsed = parse_pairs(["X-Token=123", "PATH=/bin"], "--header", text=True)
    assert parsed == {"X-Token": "123", "PATH": "/bin"}


@pytest.mark.parametrize(("item", "text"), [("size", False), ("=5", False), ("a-b=1", False),
                                            ("no value", True), ("=x", True)])  # fmt: skip
def test_a_malformed_item_names_the_flag_and_the_form(item: str, text: bool) -> None:
    with pytest.raises(ConfigError, match=r"--flag=.*is not KEY=VALUE.*Fix: write e\.g\. --flag"):
        parse_pairs([item], "--flag", text=text)


def test_env_kwargs_take_items_and_json_objects_later_over_earlier() -> None:
    items = ["size=5", '{"sizes": [3, 4], "size": 6}', "name=x", "tool=false"]
    assert parse_kwargs(items) == {"size": 6, "sizes": [3, 4], "name": "x", "tool": False}
    assert parse_kwargs('{"size": 5}') == {"size": 5}  # one string is one item
    assert parse_kwargs(None) == parse_kwargs([]) == {}


def test_a_comma_inside_a_value_is_part_of_it() -> None:
    assert parse_kwargs(["sizes=[3,4]"]) == {"sizes": [3, 4]}
    assert parse_kwargs(["tasks=a.jsonl,b.jsonl"]) == {"tasks": "a.jsonl,b.jsonl"}


def test_the_old_comma_form_still_reads_with_a_deprecation_warning() -> None:
    with pytest.warns(AgentGymDeprecationWarning, match=r"--env-kwargs size=3 tool=true"):
        assert parse_kwargs(["size=3,tool=true"]) == {"size": 3, "tool": True}


@pytest.mark.parametrize("item", ["[1]", '{"size": 5', "5"])
def test_what_is_neither_an_object_nor_a_pair_is_refused(item: str) -> None:
    with pytest.raises(ConfigError, match="--train-env-kwargs"):
        parse_kwargs([item], "--train-env-kwargs")


def test_text_mode_errors_never_show_the_item() -> None:
    """Headers and env vars hold secrets: a curl-style header is refused without echoing it."""
    secret = "sk-header-sentinel-9d2e"
    with pytest.raises(ConfigError, match="--header=<not shown>: is not KEY=VALUE") as info:
        parse_pairs([f"Authorization: Bearer {secret}"], "--header", text=True)
    assert secret not in str(info.value)
