"""A third-party plugin with a sync (Gymnasium-style) env and an async env, each registered with a
callable entry point and seeding through ``super().reset(seed=seed)``: installed with pip, it
passes both checkers, runs 64-wide in an ``AgentVectorEnv`` and is trained by ``agentgym train``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "agentgym_plugin_styles"
IDS = ("stylesns/SyncPick-v0", "stylesns/AsyncPick-v0")
CLI = "import sys; from agentgym.cli import main; sys.exit(main(sys.argv[1:]))"

SCRIPT = """
import json, warnings
import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
import agentgym
from agentgym.utils import check_env

out = {}
for env_id in %r:
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gymnasium_check_env(env.unwrapped, skip_render_check=True)
    env.close()
    report = check_env(gym.make(env_id))
    venv = gym.make_vec(env_id, num_envs=64, vectorization_mode="vector_entry_point")
    obs, infos = venv.reset(seed=0)
    targets = [o[0]["content"].split()[1].rstrip(".") for o in obs]
    _, rewards, terminated, truncated, step_infos = venv.step(targets[:32] + ["left"] * 32)
    venv.close()
    out[env_id] = {
        "checks": list(report.checks),
        "entry_point": agentgym.registry.env_info(env_id).entry_point_name,
        "targets": targets,
        "rewards": rewards.tolist(),
        "terminated": terminated.tolist(),
        "infra_error": "infra_error" in step_infos,
        "success": step_infos["success"].tolist(),
    }
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("styles")
    shutil.copytree(FIXTURE, root / "src")  # the build must not litter the repo
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--target", str(root / "site"), str(root / "src")],
        check=True, capture_output=True,
    )  # fmt: skip
    return root / "site"


def _run(site: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def played(site: Path) -> dict[str, Any]:
    done = _run(site, [sys.executable, "-c", SCRIPT % (IDS,)])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("env_id", IDS)
def test_each_style_passes_both_checkers_with_a_callable_entry_point(
    played: dict[str, Any], env_id: str
) -> None:
    result = played[env_id]
    assert {"determinism", "garbage actions", "close"} <= set(result["checks"])
    assert result["entry_point"].startswith("stylespkg:")


@pytest.mark.parametrize("env_id", IDS)
def test_each_style_runs_64_wide_seeded_per_env(played: dict[str, Any], env_id: str) -> None:
    result = played[env_id]
    targets = result["targets"]
    assert len(targets) == 64
    assert set(targets) == {"left", "right"}  # seeds 0..63 draw both words
    assert not result["infra_error"]
    assert all(result["terminated"])
    assert result["rewards"][:32] == [1.0] * 32  # the right word, everywhere
    assert result["rewards"][32:] == [float(t == "left") for t in targets[32:]]
    assert result["success"] == [r == 1.0 for r in result["rewards"]]


def test_both_styles_draw_the_same_tasks_from_the_same_seeds(played: dict[str, Any]) -> None:
    assert played[IDS[0]]["targets"] == played[IDS[1]]["targets"]


@pytest.mark.slow
@pytest.mark.parametrize("env_id", IDS)
def test_agentgym_train_trains_each_style(site: Path, tmp_path: Path, env_id: str) -> None:
    out = tmp_path / "run"
    done = _run(
        site,
        [sys.executable, "-c", CLI, "train", "--env", env_id, "--steps", "3",
         "--out", str(out), "--action-choices", "--set", "group_size=4", "--set",
         "batch_size=16", "--eval-episodes", "16", "--checkpoint-every", "3", "--no-progress"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert all(0.0 <= row["success_rate"] <= 1.0 for row in rows)
    assert all(row["episodes"] == 16 for row in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["end"]["episodes"] == 16
    assert summary["end"]["success_unknown"] == 0  # the env said, every time
    assert (out / "checkpoints" / "step-00000003" / "model.safetensors").is_file()
