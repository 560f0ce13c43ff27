"""Old spellings: they work, warn once with the new name, and blame the user's code."""

from __future__ import annotations

import pytest

from agentgym.core.deprecation import renamed_argument, warn_deprecated
from agentgym.core.errors import AgentGymDeprecationWarning, ConfigError


def test_a_renamed_argument_takes_the_old_name_with_a_warning() -> None:
    with pytest.warns(AgentGymDeprecationWarning, match="data= is deprecated.*use tasks=") as seen:
        assert renamed_argument("data", "a.jsonl", "tasks", None) == "a.jsonl"
    assert seen[0].filename == __file__  # the caller outside agentgym, not agentgym itself
    assert renamed_argument("data", None, "tasks", "b.jsonl") == "b.jsonl"


def test_both_names_at_once_are_refused() -> None:
    with pytest.raises(ConfigError, match="data='a': is the old name of tasks"):
        renamed_argument("data", "a", "tasks", "b")


def test_the_warning_is_a_deprecation_warning_python_shows_for_a_script() -> None:
    assert issubclass(AgentGymDeprecationWarning, DeprecationWarning)
    with pytest.warns(DeprecationWarning, match="--kw is deprecated and will be removed; use x"):
        warn_deprecated("--kw", "x")
