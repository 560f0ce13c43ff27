"""The run description of ``agentgym train``: recipes, layers, checks, run.json, docs."""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib.resources
import importlib.util
import json
import tomllib
from pathlib import Path

import pytest

from agentgym.cli import build_parser, main
from agentgym.error import ConfigError
from agentgym.recipes import cli as recipes_cli
from agentgym.recipes.config import Layer, RunConfig, find_recipe, resolve_run
from agentgym.trainers import TrainOptions, make_config

ROOT = Path(__file__).resolve().parents[2]
FROZENLAKE = "agentgym/FrozenLake-v0"


def _run(*argv: str) -> RunConfig:
    return recipes_cli.run_from_args(build_parser().parse_args(["train", *argv]))


def _shipped_recipes() -> list[str]:
    root = importlib.resources.files("agentgym.recipes")
    return sorted(
        f"{folder.name}/{path.name}"
        for folder in root.iterdir()
        if folder.is_dir()
        for path in folder.iterdir()
        if path.name.endswith(".toml")
    )


def test_no_flags_give_frozenlakes_tuned_runs():
    # The values agentgym train used before the recipes were data files.
    shared = {"learning_rate": 1e-3, "group_size": 8, "batch_size": 64, "num_minibatches": 4}
    shared |= {"max_new_tokens": 8, "temperature": 1.0, "gamma": 0.95}
    expected = {
        "grpo": {**shared, "entropy_coef": 0.1, "entropy_decay_steps": 100, "step_credit": 1.0},
        "dapo": {**shared, "entropy_coef": 0.1, "entropy_decay_steps": 150, "step_credit": 1.0},
        "ppo": {**shared, "entropy_coef": 0.05, "entropy_decay_steps": 150, "ppo_epochs": 2},
    }
    expected["grpo"] |= {"kl_beta": 0.0, "scale_by_std": False}
    expected["dapo"] |= {"scale_by_std": False, "overlong_cache_length": 4}
    expected["dapo"] |= {"overlong_penalty_factor": 0.1, "max_sampling_rounds": 3}
    expected["dapo"] |= {"partial_batches": True}
    expected["ppo"] |= {"whiten_advantages": False}
    for algo, fields in expected.items():
        run = _run("--algo", algo)
        assert run.env == FROZENLAKE
        assert {name: getattr(run.config, name) for name in fields} == fields, algo
        untouched = make_config(algo).to_dict().keys() - fields.keys() - {"algo"}
        preset = make_config(algo, seed=0).to_dict()
        assert {k: run.config.to_dict()[k] for k in untouched} == {k: preset[k] for k in untouched}
        decay = 1200 if algo == "ppo" else 600
        assert run.options == TrainOptions(decay_steps=decay, min_lr_ratio=0.1)
        assert (run.steps, run.max_turns, run.micro_batch_tokens) == (150, None, 8192)
        assert (run.history_turns, run.action_choices, run.init) == (0, True, "random")
        assert run.env_kwargs == {"tool": False}
        assert run.train_env_kwargs == {"hole_reward": -1.0, "edge_reward": -0.5}


def test_layers_stack_recipe_then_file_then_flags(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        "steps = 40\nhistory_turns = 2\n[env_kwargs]\nsize = 5\n"
        "[config]\nlearning_rate = 0.01\ngroup_size = 4\n[options]\nwarmup_steps = 3\n"
    )
    run = _run("--config", str(path), "--steps", "9", "--set", "group_size=2")
    assert run.steps == 9  # flag over file over recipe (150)
    assert run.history_turns == 2  # file over recipe (0)
    assert run.config.group_size == 2  # --set over file over recipe (8)
    assert run.config.learning_rate == 0.01  # file over recipe (1e-3)
    assert run.config.batch_size == 64  # the recipe's, untouched above
    assert run.env_kwargs == {"tool": False, "size": 5}  # tables merge key by key
    assert run.options == TrainOptions(decay_steps=600, min_lr_ratio=0.1, warmup_steps=3)
    assert run.seed == run.config.seed == 0
    assert _run("--seed", "4").config.seed == 4  # the algorithm config takes the run's seed


def test_a_bad_value_names_its_field_and_the_layer_that_set_it(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[config]\ngamma = 1.5\n")
    with pytest.raises(
        ConfigError, match=r"config\.gamma=1\.5: must be in \[0, 1\] \(set by .*bad"
    ):
        _run("--config", str(path))
    with pytest.raises(ConfigError, match=r"steps=0: must be >= 1 \(set by --steps\)"):
        _run("--steps", "0")
    with pytest.raises(ConfigError, match=r"options\.min_lr_ratio=2.*\(set by --option\)"):
        _run("--option", "min_lr_ratio=2")
    with pytest.raises(ConfigError, match=r"config\.group_size='8': must be of type int"):
        resolve_run(Layer("mine", {"config": {"group_size": "8"}}))
    with pytest.raises(ConfigError, match=r"init='random'.*tiny policy only \(set by --init\)"):
        _run("--model", "some/dir", "--init", "random")
    with pytest.raises(ConfigError, match=r"config\.seed"):
        resolve_run(Layer("mine", {"seed": 1, "config": {"seed": 2}}))


def test_an_unknown_key_suggests_the_field():
    with pytest.raises(ConfigError, match=r"is not a run setting.*Did you mean 'steps'"):
        resolve_run(Layer("mine", {"stepz": 3}))
    with pytest.raises(ConfigError, match=r"config\.learnin_rate.*Did you mean 'learning_rate'"):
        resolve_run(Layer("mine", {"config": {"learnin_rate": 1e-3}}))
    with pytest.raises(ConfigError, match=r"options\.warmup.*not a trainer option.*warmup_steps"):
        _run("--option", "warmup=3")
    with pytest.raises(ConfigError, match="Did you mean 'grpo'"):
        resolve_run(Layer("mine", {"algo": "grpoo"}))


def test_the_run_is_frozen_and_round_trips():
    run = resolve_run()
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.steps = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        run.env_kwargs["tool"] = True  # type: ignore[index]
    assert dataclasses.replace(run, steps=3).steps == 3
    with pytest.raises(ConfigError, match="steps=-3"):
        dataclasses.replace(run, steps=-3)
    data = json.loads(json.dumps(run.to_dict()))
    assert RunConfig.from_dict(data) == run
    assert resolve_run(Layer("run.json", data)) == run  # a recorded run resolves to itself


def test_a_recipe_is_found_by_its_env_and_algo():
    recipe = find_recipe(FROZENLAKE, "ppo")
    assert recipe is not None
    assert (recipe.values["env"], recipe.values["algo"]) == (FROZENLAKE, "ppo")
    assert find_recipe(FROZENLAKE, "no-such-algo") is None
    assert find_recipe("agentgym/Math-v0", "grpo") is None
    run = resolve_run(Layer("mine", {"env": "agentgym/Math-v0", "algo": "dapo"}))
    assert run.config == make_config("dapo")  # no recipe: the preset as it is
    assert (run.steps, run.init, run.history_turns) == (100, "format", None)


def test_every_shipped_recipe_loads_validates_and_ships():
    shipped = _shipped_recipes()
    on_disk = sorted(
        str(p.relative_to(ROOT / "agentgym/recipes"))
        for p in ROOT.glob("agentgym/recipes/*/*.toml")
    )
    assert shipped == on_disk
    assert len(shipped) >= 3  # fails, not skips, when the recipes cannot be found
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    data = patterns["package-data"]["agentgym"]
    pairs = set()
    for name in shipped:
        assert any(fnmatch.fnmatch(f"recipes/{name}", p) for p in data), name
        values = tomllib.loads((ROOT / "agentgym/recipes" / name).read_text())
        pairs.add((values["env"], values["algo"]))
        run = resolve_run(Layer("mine", {"env": values["env"], "algo": values["algo"]}))
        resolved = run.to_dict()
        for key, value in values.items():
            if isinstance(value, dict):  # a TOML list is a tuple in the resolved run
                got = {k: resolved[key][k] for k in value}
                got = {k: list(v) if isinstance(v, tuple) else v for k, v in got.items()}
                assert got == value, (name, key)
            else:
                assert resolved[key] == value, (name, key)
    assert len(pairs) == len(shipped)  # one recipe per pair


def test_resume_reads_the_settings_the_run_recorded(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    recorded = _run("--steps", "7", "--set", "group_size=4", "--history-turns", "all")
    data = {"run": recorded.to_dict(), "config": recorded.config.to_dict()}
    (out / "run.json").write_text(json.dumps(data))
    run = _run("--out", str(out), "--resume", "--steps", "9")
    assert (run.steps, run.config.group_size, run.history_turns) == (9, 4, None)
    assert run.resume
    assert run.out == str(out)


def test_run_json_of_the_first_layout_still_reads(tmp_path):
    # run.json as written before the run was one RunConfig: the user's spec, the resolved run
    # settings and the trainer's config.
    spec = {"env": FROZENLAKE, "algo": "grpo", "seed": 0, "model": None, "history_turns": None}
    spec |= {"config": {"group_size": 4}, "options": {}, "steps": None, "out": str(tmp_path)}
    settings = {"steps": 2, "env_kwargs": {"tool": False}, "history_turns": 1}
    settings |= {"action_choices": True, "init": "random", "options": {"warmup_steps": 4}}
    config = make_config("grpo", group_size=4, batch_size=8, num_minibatches=1).to_dict()
    old = {"spec": spec, "config": config, "run": settings}
    (tmp_path / "run.json").write_text(json.dumps(old))
    trained = recipes_cli._trained_run(str(tmp_path))
    assert trained["env"] == FROZENLAKE
    assert (trained["history_turns"], trained["action_choices"]) == (1, True)
    assert trained["env_kwargs"] == {"tool": False}
    run = _run("--out", str(tmp_path), "--resume")
    assert (run.steps, run.config.group_size, run.config.batch_size) == (2, 4, 8)
    assert run.options.warmup_steps == 4
    assert run.options.decay_steps == 600  # under it, the recipe


def test_help_and_docs_come_from_the_field_docstrings(capsys):
    assert main(["train", "--help"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    for name in ("history_turns", "train_env_kwargs", "eval_episodes"):
        assert RunConfig.field_help()[name] in flat, name
    script = ROOT / "scripts" / "gen_config_docs.py"
    spec = importlib.util.spec_from_file_location("gen_config_docs", script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.render()
    for doc in (RunConfig.field_help()["history_turns"], TrainOptions.field_help()["decay_steps"]):
        assert doc.replace("<", "&lt;") in text
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == text, "docs/configuration.md is stale: run scripts/gen_config_docs.py"


def test_the_training_knobs_reach_the_run_and_their_help_is_the_field_docs(capsys):
    run = _run(
        *("--backend", "deepspeed", "--zero-stage", "3", "--precision", "bf16"),
        *("--group-size", "4", "--batch-size", "16", "--max-new-tokens", "32"),
        *("--gradient-checkpointing", "--lora-rank", "8", "--lora-alpha", "32"),
        *("--lora-targets", "q_proj,v_proj"),
    )
    assert (run.backend, run.zero_stage, run.precision) == ("deepspeed", 3, "bf16")
    config, options = run.config, run.options
    assert (config.group_size, config.batch_size, config.max_new_tokens) == (4, 16, 32)
    assert options.gradient_checkpointing
    lora = (options.lora_rank, options.lora_alpha, options.lora_targets)
    assert lora == (8, 32.0, "q_proj,v_proj")
    assert main(["train", "--help"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    for doc in (TrainOptions.field_help()["lora_rank"], RunConfig.field_help()["zero_stage"]):
        assert doc in flat


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--zero-stage", "2"], r"zero_stage=2: applies to the deepspeed backend, not torch"),
        (["--backend", "deepspeed", "--zero-stage", "4"], r"zero_stage=4: is not 0-3"),
        (["--group-size", "0"], r"config\.group_size=0: must be >= 1 \(set by --group-size\)"),
        (["--batch-size", "6"], r"config\.batch_size=6: must be a positive multiple of group"),
        (["--max-new-tokens", "0"], r"config\.max_new_tokens=0: must be >= 1"),
        (["--lora-rank", "-1"], r"options\.lora_rank=-1: must be >= 0 \(set by --lora-rank\)"),
        (["--lora-alpha", "0"], r"options\.lora_alpha=0.0: must be > 0"),
        (["--lora-targets", ","], r"options\.lora_targets=',': names no module"),
    ],
)
def test_a_bad_training_knob_names_the_value_and_the_fix(argv, message):
    with pytest.raises(ConfigError, match=message) as raised:
        _run(*argv)
    assert "Fix:" in str(raised.value)


def test_a_precision_that_is_not_offered_is_refused(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--precision", "fp16"])
    assert "invalid choice: 'fp16'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"precision='fp16': is not a valid choice"):
        resolve_run(Layer("mine", {"precision": "fp16"}))
