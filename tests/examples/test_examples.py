"""Each script in examples/ runs as a user would run it, with small arguments."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym.sandbox import bwrap_usable

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run_script(
    script: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # One torch thread: the 2-core CI machine runs other work beside the tests.
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny policy saved as a plain transformers directory, as a user's model would be."""
    from agentgym import models

    directory = tmp_path_factory.mktemp("model")
    model, tokenizer = models.load(seed=0)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def test_train_grpo_math_trains_and_resumes(model_dir: Path, tmp_path: Path) -> None:
    script = EXAMPLES / "train_grpo_math.py"
    small = ["--model-dir", str(model_dir), "--out", "run", "--groups", "2", "--group-size", "2"]
    small += ["--max-tokens", "16"]
    first = run_script(script, *small, "--updates", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    # A second call with more updates continues the run instead of starting over.
    second = run_script(script, *small, "--updates", "2", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert last_json(second.stdout)["updates"] == 2
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    metrics = [json.loads(line) for line in lines]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["episodes"] == 4 for m in metrics)  # groups x group_size
    assert "update    2" in second.stdout
    assert "update    1" not in second.stdout


def test_eval_code_grades_every_episode_in_the_chosen_sandbox(
    model_dir: Path, tmp_path: Path
) -> None:
    sandbox = "local" if bwrap_usable() else "unsafe-local"
    script = EXAMPLES / "eval_code.py"
    args = ["--model", str(model_dir), "--episodes", "2", "--max-tokens", "16"]
    done = run_script(script, *args, "--sandbox", sandbox, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = last_json(done.stdout)
    assert result["sandbox"] == sandbox
    assert result["episodes"] == 2
    assert result["graded"] == 2  # the env gave its verdict on each
    assert 0.0 <= result["ci95"][0] <= result["success_rate"] <= result["ci95"][1] <= 1.0


def test_eval_code_passes_the_sandbox_choice_to_the_env(model_dir: Path, tmp_path: Path) -> None:
    script = EXAMPLES / "eval_code.py"
    done = run_script(script, "--model", str(model_dir), "--sandbox", "nowhere", cwd=tmp_path)
    assert done.returncode != 0
    assert "nowhere" in done.stderr


def test_custom_env_registers_itself_and_plays(tmp_path: Path) -> None:
    script = EXAMPLES / "custom_env" / "play.py"
    done = run_script(script, "--episodes", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = last_json(done.stdout)
    assert result["registered_by"] == "script"
    # Binary search finds any number in 1..100 within the env's 7 guesses.
    assert result["episodes"] == [{"reward": 1.0, "success": True}] * 3


def test_custom_env_out_of_guesses_is_a_failure(tmp_path: Path) -> None:
    script = EXAMPLES / "custom_env" / "play.py"
    done = run_script(script, "--episodes", "3", "--high", "100000", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    # 7 guesses cannot pin down one of 100000 numbers.
    assert last_json(done.stdout)["episodes"] == [{"reward": 0.0, "success": False}] * 3


def test_custom_env_as_an_installed_plugin(tmp_path: Path) -> None:
    source = tmp_path / "custom_env"
    shutil.copytree(EXAMPLES / "custom_env", source)  # the build must not litter the repo
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, "--target", str(site), str(source)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    plugin = {"PYTHONPATH": str(site)}
    done = run_script(source / "play.py", "--episodes", "1", cwd=tmp_path, env=plugin)
    assert done.returncode == 0, done.stderr[-3000:]
    assert last_json(done.stdout)["registered_by"] == "plugin"
    listed = subprocess.run(
        [str(Path(sys.executable).with_name("agentgym")), "list", "--json"],
        env={**os.environ, **plugin},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [row] = [r for r in json.loads(listed.stdout) if r["id"] == "example/GuessNumber-v0"]
    assert row["tags"] == ["multi-turn", "example"]


def test_react_frozenlake_plays_through_the_scaffold_and_trains(tmp_path: Path) -> None:
    script = EXAMPLES / "react_frozenlake.py"
    done = run_script(script, "--episodes", "2", "--updates", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Work in steps. Each reply has two lines:" in done.stdout  # ReAct's instruction
    assert "[user] Observation: " in done.stdout  # the env's answers, as observations
    result = last_json(done.stdout)
    assert result["episodes"] == 2
    assert result["updates"] == 1


@pytest.mark.slow  # ~30 s wall, ~14 s CPU each on 2 shared cores
@pytest.mark.parametrize(
    ("script", "extra"),
    [
        # Code-v0 never rewards the tiny policy (it writes no code block), so every GRPO
        # advantage is 0: a small entropy bonus gives the update a gradient, which shows the
        # gateway's episodes reached the optimizer (not that reward rose).
        (
            "agent_tool_calling.py",
            ["--max-tokens", "32", "--max-calls", "2", "--entropy-coef", "0.01"],
        ),
        ("agent_selfcheck_math.py", []),
    ],
)
def test_an_agent_program_example_trains_through_the_gateway(
    script: str, extra: list[str], tmp_path: Path
) -> None:
    small = ["--updates", "2", "--groups", "2", "--group-size", "2", *extra]
    if script == "agent_tool_calling.py":
        small += ["--sandbox", "local" if bwrap_usable() else "docker"]
    done = run_script(EXAMPLES / script, *small, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = last_json(done.stdout)
    assert summary["updates"] == 2
    assert len(summary["reward_mean"]) == 2
    outcomes = summary["outcomes"]  # the last batch: 4 programs, none crashed or silent
    assert sum(n for key, n in outcomes.items() if key != "programs/no_model_call") == 4
    assert "programs/infra" not in outcomes
    assert outcomes["programs/no_model_call"] == 0
    if script == "agent_tool_calling.py":
        # graded by Code-v0: its outcomes only (a program's own reward has no "invalid")
        assert set(outcomes) <= {f"programs/{o}" for o in ("success", "failed", "invalid")} | {
            "programs/no_model_call"
        }
        assert summary["weights_moved"] is True
