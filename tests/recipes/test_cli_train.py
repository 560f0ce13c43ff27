"""``agentgym train`` writes its run folder and resumes; ``agentgym eval`` reports a Wilson CI."""

from __future__ import annotations

import json
import math

import pytest

from agentgym.cli import main
from agentgym.error import ConfigError
from agentgym.recipes.cli import run_from_args
from agentgym.recipes.config import Layer, resolve_run
from agentgym.recipes.report import EvalResult, wilson_interval
from agentgym.trainers import TrainOptions
from agentgym.trainers.checkpoint import read_manifest

SMALL = [
    "--set",
    "group_size=4",
    "--set",
    "batch_size=8",
    "--set",
    "num_minibatches=1",
    "--max-turns",
    "3",
    "--eval-episodes",
    "4",
    "--checkpoint-every",
    "1",
    "--no-progress",
]


def _steps(out) -> list[int]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [int(json.loads(line)["step"]) for line in lines]


def test_train_writes_the_run_folder_and_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["--out", str(out), "--option", "warmup_steps=4", *SMALL]
    assert main(["train", "--steps", "2", *argv]) == 0
    assert _steps(out) == [1, 2]
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    for key in ("reward_mean", "success_rate", "entropy", "tokens_per_s", "collect_s", "step_s"):
        assert key in row
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert (out / "curves.png").read_bytes()[:4] == b"\x89PNG"
    # drawn again after the final evaluation, which it marks
    assert (out / "curves.png").stat().st_mtime_ns >= (out / "summary.json").stat().st_mtime_ns
    assert (out / "checkpoints" / "step-00000002" / "model.safetensors").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2
    assert summary["start"]["episodes"] == summary["end"]["episodes"] == 4
    assert set(summary["end_unseen_tasks"]) >= {"success_rate", "ci95"}
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["group_size"] == 4
    assert run["config"]["algo"] == "grpo"
    # over FrozenLake's default learning-rate decay
    preset = json.loads(json.dumps(TrainOptions().to_dict()))
    expected = {**preset, "decay_steps": 600, "min_lr_ratio": 0.1, "warmup_steps": 4}
    assert run["run"]["options"] == expected
    manifest = read_manifest(out / "checkpoints" / "step-00000002")
    assert manifest["options"]["warmup_steps"] == 4
    assert [
        json.loads(line)["lr"] for line in (out / "metrics.jsonl").read_text().splitlines()
    ] == [
        pytest.approx(1e-3 / 4),
        pytest.approx(2e-3 / 4),
    ]

    # Without --resume an existing run is not overwritten.
    assert main(["train", "--steps", "3", "--out", str(out), *SMALL]) == 2
    assert "--resume" in capsys.readouterr().err

    assert main(["train", "--steps", "3", "--out", str(out), "--resume", *SMALL]) == 0
    assert _steps(out) == [1, 2, 3]
    assert json.loads((out / "summary.json").read_text())["steps"] == 3


def test_eval_of_a_run_uses_the_window_and_env_arguments_it_was_trained_with(tmp_path, capsys):
    out = tmp_path / "run"
    flags = [*SMALL, "--history-turns", "1", "--eval-episodes", "0", "--env-kwargs", "tool=false"]
    assert main(["train", "--steps", "1", "--out", str(out), *flags]) == 0
    assert json.loads((out / "run.json").read_text())["run"]["history_turns"] == 1
    capsys.readouterr()
    checkpoint = str(out / "checkpoints" / "step-00000001")
    trained = {"tool": False}
    for model, given, expected, env_kwargs in [
        (str(out), [], 1, trained),
        (checkpoint, [], 1, trained),
        (checkpoint, ["--history-turns", "all"], None, trained),
        (checkpoint, ["--env-kwargs", "tool=true", "size=3"], 1, {"tool": True, "size": 3}),
        (None, [], None, {}),
    ]:
        args = ["eval", "--episodes", "2", "--json", *given]
        assert main([*args, *(["--model", model] if model else [])]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["history_turns"] == expected
        assert report["env_kwargs"] == env_kwargs
    assert main(["eval", "--episodes", "2", "--history-turns", "-1"]) == 2
    assert "history_turns" in capsys.readouterr().err
    bad = tmp_path / "bad"
    assert main(["train", "--history-turns", "some", "--out", str(bad), *SMALL]) == 2
    assert "history_turns" in capsys.readouterr().err
    assert not bad.exists()  # refused before the run folder is made


def test_training_env_kwargs_apply_to_training_episodes_only(tmp_path, monkeypatch):
    from agentgym.recipes import run as run_module

    seen: dict[str, list] = {"train": [], "eval": []}
    real_source, real_evaluate = run_module.CollectorSource, run_module.evaluate

    def source(*args, **kwargs):
        seen["train"].append(kwargs["env_kwargs"])
        return real_source(*args, **kwargs)

    def evaluate(*args, **kwargs):
        seen["eval"].append(kwargs["env_kwargs"])
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(run_module, "CollectorSource", source)
    monkeypatch.setattr(run_module, "evaluate", evaluate)
    out = tmp_path / "run"
    given = ["--env-kwargs", "size=3"]
    given += ["--train-env-kwargs", "edge_reward=-0.5", "random_start=true"]
    assert main(["train", "--steps", "1", "--out", str(out), *SMALL, *given]) == 0
    # over FrozenLake's training defaults: text moves only; hole and edge penalties in training
    trained = {"tool": False, "size": 3}
    assert seen["train"] == [
        {**trained, "hole_reward": -1.0, "edge_reward": -0.5, "random_start": True}
    ]
    assert seen["eval"] == [trained, trained]  # before and after training
    run = json.loads((out / "run.json").read_text())["run"]
    assert run["train_env_kwargs"] == {
        "hole_reward": -1.0,
        "edge_reward": -0.5,
        "random_start": True,
    }


def test_train_takes_your_own_env_as_module_colon_id_or_with_import(
    tmp_path, monkeypatch, user_envs
):
    """The run records the id and the module to import, so that --resume and eval find it."""
    module, env_id = user_envs
    path = tmp_path / "run.toml"
    path.write_text(f'env = "{env_id}"\nimports = ["{module}"]\n')
    for run in (_run("--env", f"{module}:{env_id}"), _run("--config", str(path))):
        assert (run.env, run.imports) == (env_id, (module,))
        assert json.loads(json.dumps(run.to_dict()))["imports"] == [module]  # run.json
        assert run.out is not None
        assert ":" not in run.out
    started = []
    monkeypatch.setattr("agentgym.recipes.run.train_run", lambda run: started.append(run) or {})
    assert main(["train", "--env", f"{module}:{env_id}", "--out", str(tmp_path / "run")]) == 0
    assert started[0].env == env_id
    with pytest.raises(ConfigError, match="imports"):
        resolve_run(Layer("test", {"imports": "mypkg"}))


def test_eval_of_a_run_on_your_own_env_imports_its_module(tmp_path, monkeypatch, capsys, user_envs):
    module, env_id = user_envs
    out = tmp_path / "run"
    out.mkdir()
    run = resolve_run(Layer("test", {"env": f"{module}:{env_id}", "out": str(out)}))
    (out / "run.json").write_text(json.dumps({"run": run.to_dict()}))
    monkeypatch.setattr("agentgym.models.load", lambda *a, **k: pytest.fail("a model loaded"))
    assert main(["eval", "--model", str(out), "--env-kwargs", "sise=5"]) == 2
    assert f"is not an argument of {env_id}" in capsys.readouterr().err  # found, then checked


def _run(*argv: str):
    from agentgym.cli import build_parser

    return run_from_args(build_parser().parse_args(["train", *argv]))


def test_train_reads_a_config_file_and_flags_win(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'algo = "dapo"\nsteps = 7\nseed = 3\n[config]\nlearning_rate = 0.01\n'
        "[options]\nwarmup_steps = 5\nadam_eps = 1e-6\n"
    )
    options = ["--option", "warmup_steps=2", "--option", "adam_betas=[0.9,0.95]"]
    run = _run("--config", str(path), "--steps", "9", "--set", "group_size=4", *options)
    assert (run.algo, run.steps, run.seed) == ("dapo", 9, 3)
    assert (run.config.learning_rate, run.config.group_size) == (0.01, 4)
    assert run.config.seed == 3
    assert run.options == TrainOptions(
        decay_steps=600, min_lr_ratio=0.1, warmup_steps=2, adam_eps=1e-6, adam_betas=(0.9, 0.95)
    )
    with pytest.raises(ConfigError, match="warmup"):  # a bad option fails before any folder
        resolve_run(Layer("test", {"options": {"warmup": 3}}))
    with pytest.raises(ConfigError, match="options"):
        resolve_run(Layer("test", {"options": [1]}))
    with pytest.raises(ConfigError, match="--option"):
        _run("--option", "warmup_steps")
    assert run.history_turns == 0  # FrozenLake's training default: the latest board only
    assert run.env_kwargs == {"tool": False}  # FrozenLake's default: text moves only
    assert _run("--env-kwargs", "tool=true").env_kwargs == {"tool": True}
    with pytest.raises(ConfigError, match="env_kwargs"):
        resolve_run(Layer("test", {"env_kwargs": [1]}))
    train_env = _run("--train-env-kwargs", "hole_reward=-1").train_env_kwargs
    assert train_env == {"hole_reward": -1, "edge_reward": -0.5}
    with pytest.raises(ConfigError, match="--train-env-kwargs"):
        _run("--train-env-kwargs", "[1]")
    for flag, window in [("all", None), ("3", 3)]:
        assert _run("--history-turns", flag).history_turns == window
    with pytest.raises(ConfigError, match="history_turns"):
        _run("--history-turns", "some")


def test_wilson_interval_matches_a_hand_computed_value():
    # 8 of 10, z = 1.96: centre (0.8 + 0.19207) / 1.38415 = 0.71679,
    # half-width 1.96 / 1.38415 * sqrt(0.016 + 0.0096037) = 0.22658.
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.49016, abs=1e-4)
    assert high == pytest.approx(0.94337, abs=1e-4)
    # exactly the ends, not a rounding above the rate (0/6 gave 2.8e-17, and the curves' error
    # bar for it made matplotlib raise after a run's final evaluation)
    for n in range(1, 40):
        assert wilson_interval(0, n)[0] == 0.0
        assert wilson_interval(n, n)[1] == 1.0


def test_the_start_evaluation_can_play_fewer_episodes(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--steps", "1", "--out", str(out), *SMALL, "--start-eval-episodes", "2"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["start"]["episodes"], summary["end"]["episodes"]) == (2, 4)
    assert main([*argv[:4], str(tmp_path / "none"), *SMALL, "--start-eval-episodes", "0"]) == 0
    assert json.loads((tmp_path / "none" / "summary.json").read_text())["start"] is None
    with pytest.raises(ConfigError, match="start_eval_episodes"):
        _run("--start-eval-episodes", "-1")


def test_eval_result_text_and_json():
    result = EvalResult([("a", True, 1.0), ("b", False, -0.2), ("a", True, 1.0), (None, False, 0)])
    assert result.describe().startswith("success 0.500 [95% CI 0.150, 0.850] (2/4)")
    assert result.to_dict()["mean_return"] == pytest.approx(0.45)
    assert result.only(lambda key: key == "a").success_rate == 1.0


def test_eval_command_reports_success_with_a_confidence_interval(capsys):
    args = ["eval", "--env", "agentgym/FrozenLake-v0", "--episodes", "4", "--seed", "5"]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 4
    low, high = report["ci95"]
    assert (low, high) == pytest.approx(wilson_interval(report["successes"], 4))
    assert low <= report["success_rate"] <= high
    assert math.isfinite(report["mean_return"])
    assert main(args) == 0
    text = capsys.readouterr().out
    assert text.startswith("agentgym/FrozenLake-v0: success ")
    assert "95% CI" in text


def test_frozenlake_trains_a_random_init_policy_among_the_offered_moves(tmp_path, capsys):
    run = resolve_run()
    assert (run.init, run.action_choices) == ("random", True)
    run = resolve_run(Layer("test", {"env": "agentgym/Math-v0"}))  # no recipe: as shipped, free
    assert (run.init, run.action_choices) == ("format", False)
    run = _run("--init", "format", "--no-action-choices")
    assert (run.init, run.action_choices) == ("format", False)
    assert _run("--model", "some/dir").init is None  # a given model is as it is
    for bad, name in [
        ({"model": "some/dir", "init": "random"}, "init"),
        ({"init": "zeros"}, "init"),
        ({"action_choices": "yes"}, "action_choices"),
    ]:
        with pytest.raises(ConfigError, match=name):
            resolve_run(Layer("test", bad))

    out = tmp_path / "run"
    assert main(["train", "--steps", "1", "--out", str(out), *SMALL, "--eval-episodes", "0"]) == 0
    recorded = json.loads((out / "run.json").read_text())["run"]
    assert (recorded["init"], recorded["action_choices"]) == ("random", True)
    capsys.readouterr()
    for given, expected in [([], True), (["--no-action-choices"], False)]:
        argv = ["eval", "--model", str(out), "--episodes", "2", "--json", *given]
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)["action_choices"] is expected
