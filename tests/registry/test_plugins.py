"""Plugins: a real third-party package adds an env through the ``agentgym.envs`` entry point.

The packages under ``tests/fixtures/`` are built and installed with pip into a temporary
directory, then a fresh interpreter with that directory on ``PYTHONPATH`` imports agentgym.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

import agentgym
from agentgym.error import PluginWarning

# The module, not the ``plugins()`` function that agentgym.registry exports under the same name.
plugins_module = importlib.import_module("agentgym.registry.plugins")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# Runs in a fresh interpreter; prints one JSON object.
SCRIPT = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import agentgym
import gymnasium as gym
from agentgym.error import PluginWarning

env = gym.make("theirns/TheirEnv-v0")
obs, info = env.reset(seed=0)
_, reward, terminated, truncated, _ = env.step(str(env.unwrapped.number))
print(json.dumps({
    "obs": obs,
    "reward": reward,
    "terminated": terminated,
    "ids": [i.id for i in agentgym.list_envs()],
    "tags": list(agentgym.env_info("theirns/TheirEnv-v0").tags),
    "plugins": {p.name: [p.distribution, p.error] for p in agentgym.plugins()},
    "warnings": [str(w.message) for w in caught if issubclass(w.category, PluginWarning)],
    "frozenlake": type(gym.make("agentgym/FrozenLake-v0").unwrapped).__name__,
}))
"""


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("plugins")
    sources = []
    for name in ("agentgym_plugin_demo", "agentgym_plugin_broken"):
        shutil.copytree(FIXTURES / name, root / name)  # the build must not litter the repo
        sources.append(str(root / name))
    site = root / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            *sources,
        ],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_installed_plugin_env_makes_and_runs(plugin_run: dict[str, Any]) -> None:
    [message] = plugin_run["obs"]
    assert message["role"] == "user"
    assert message["content"].startswith("Say ")
    assert plugin_run["reward"] == 1.0
    assert plugin_run["terminated"] is True


def test_installed_plugin_env_is_listed_with_its_metadata(plugin_run: dict[str, Any]) -> None:
    assert "theirns/TheirEnv-v0" in plugin_run["ids"]
    assert "agentgym/FrozenLake-v0" in plugin_run["ids"]
    assert plugin_run["tags"] == ["third-party"]
    assert plugin_run["plugins"]["theirns"] == ["agentgym-plugin-demo", None]


def test_broken_plugins_warn_by_name_and_break_nothing(plugin_run: dict[str, Any]) -> None:
    warned = plugin_run["warnings"]
    assert len(warned) == 2
    [raises] = [w for w in warned if "'raises'" in w]
    assert "agentgym-plugin-broken" in raises
    assert "RuntimeError: brokenpkg cannot register its envs" in raises
    [missing] = [w for w in warned if "'missing'" in w]
    assert "ModuleNotFoundError" in missing
    distribution, error = plugin_run["plugins"]["raises"]
    assert distribution == "agentgym-plugin-broken"
    assert error.startswith("RuntimeError")
    assert plugin_run["frozenlake"] == "FrozenLakeEnv"


# --- load_plugins itself, with entry points made in-process ----------------------------------

CALLS: list[str] = []


def register_ok() -> None:
    CALLS.append("ok")


def register_raises() -> None:
    raise ValueError("bad plugin")


NOT_CALLABLE = {"a": "dict"}


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> list[EntryPoint]:
    points: list[EntryPoint] = []
    monkeypatch.setattr(plugins_module, "_LOADED", {})
    monkeypatch.setattr(plugins_module, "entry_points", lambda group: list(points))
    CALLS.clear()
    return points


def _point(name: str, attribute: str) -> EntryPoint:
    return EntryPoint(name, f"{__name__}:{attribute}", plugins_module.ENTRY_POINT_GROUP)


def test_load_plugins_calls_each_entry_point_once(entry_points: list[EntryPoint]) -> None:
    entry_points.extend([_point("good", "register_ok"), _point("data", "NOT_CALLABLE")])
    statuses = agentgym.load_plugins()
    assert [(s.name, s.ok) for s in statuses] == [("good", True), ("data", True)]
    assert CALLS == ["ok"]
    assert agentgym.load_plugins() == []  # already loaded
    assert CALLS == ["ok"]
    assert [s.name for s in agentgym.plugins()] == ["good", "data"]


def test_load_plugins_warns_and_records_a_failing_plugin(entry_points: list[EntryPoint]) -> None:
    entry_points.extend([_point("bad", "register_raises"), _point("good", "register_ok")])
    with pytest.warns(PluginWarning, match=r"plugin 'bad' .* ValueError: bad plugin"):
        statuses = agentgym.load_plugins()
    assert [(s.name, s.error) for s in statuses] == [
        ("bad", "ValueError: bad plugin"),
        ("good", None),
    ]
    assert CALLS == ["ok"]  # one broken plugin does not stop the others
