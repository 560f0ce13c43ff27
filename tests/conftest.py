"""Suite-wide collection rule: the acceptance studies (``@pytest.mark.study``, an hour or more of
training each) run only when asked for by name (``pytest -m study``, ``make curriculum-study``);
any other selection, ``-m "not slow"`` included, leaves them out."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "study" in (config.getoption("markexpr") or ""):
        return
    studies = [item for item in items if item.get_closest_marker("study")]
    if studies:
        config.hook.pytest_deselected(items=studies)
        items[:] = [item for item in items if not item.get_closest_marker("study")]
