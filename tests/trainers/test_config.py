import ast
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from agentgym.error import ConfigError
from agentgym.trainers import config as config_module
from agentgym.trainers.algorithms import AdvantageEstimator, Aggregation, KLEstimator, KLPlacement
from agentgym.trainers.config import (
    AlgorithmConfig,
    DAPOConfig,
    GRPOConfig,
    PPOConfig,
    algorithm_names,
    config_class,
    config_from_dict,
    make_config,
    register_algorithm,
)

PRESETS = [PPOConfig, GRPOConfig, DAPOConfig]


def test_registry_names_the_three_presets() -> None:
    assert algorithm_names() == ["dapo", "grpo", "ppo"]
    assert [config_class(n) for n in ("ppo", "grpo", "dapo")] == PRESETS


def test_grpo_defaults_follow_deepseekmath() -> None:
    c = GRPOConfig()
    assert c.advantage_estimator is AdvantageEstimator.GROUP
    assert c.scale_by_std
    assert (c.kl_beta, c.kl_estimator, c.kl_placement) == (0.04, KLEstimator.K3, KLPlacement.LOSS)
    assert (c.clip_eps_low, c.clip_eps_high) == (0.2, 0.2)
    assert c.aggregation is Aggregation.SEQ_MEAN_TOKEN_MEAN
    assert c.group_size >= 2


def test_dapo_defaults_follow_the_paper() -> None:
    c = DAPOConfig()
    assert (c.clip_eps_low, c.clip_eps_high) == (0.2, 0.28)
    assert c.dynamic_sampling
    assert c.overlong_shaping
    assert c.aggregation is Aggregation.TOKEN_MEAN
    assert c.kl_beta == 0.0
    assert c.overlong_length == c.max_new_tokens == 256
    assert c.groups_per_batch == c.batch_size // c.group_size


def test_ppo_defaults_use_a_critic_and_gae() -> None:
    c = PPOConfig()
    assert PPOConfig.uses_critic
    assert not GRPOConfig.uses_critic
    assert c.advantage_estimator is AdvantageEstimator.GAE
    assert (c.gamma, c.lam, c.value_clip, c.vf_coef) == (1.0, 0.95, 0.2, 0.5)
    assert c.kl_placement is KLPlacement.REWARD
    assert c.group_size == 1


@pytest.mark.parametrize(
    ("cls", "field", "value", "rule"),
    [
        (GRPOConfig, "learning_rate", 0.0, "must be > 0"),
        (GRPOConfig, "batch_size", 12, "multiple of group_size=8"),
        (GRPOConfig, "num_minibatches", 3, "must divide batch_size=64"),
        (GRPOConfig, "ppo_epochs", 0, ">= 1"),
        (PPOConfig, "target_kl", 0.0, "> 0"),
        (GRPOConfig, "max_grad_norm", 0.0, "> 0"),
        (GRPOConfig, "temperature", 0.0, "> 0"),
        (GRPOConfig, "max_new_tokens", 0, ">= 1"),
        (GRPOConfig, "seed", -1, ">= 0"),
        (GRPOConfig, "group_size", 1, "must be >= 2 for group advantages"),
        (GRPOConfig, "advantage_estimator", "gae", "needs a value model"),
        (GRPOConfig, "clip_eps_low", 1.0, "(0, 1)"),
        (DAPOConfig, "clip_eps_high", 0.0, "> 0"),
        (GRPOConfig, "dual_clip", 1.0, "> 1"),
        (GRPOConfig, "norm_length", 0, ">= 1"),
        (GRPOConfig, "kl_beta", -0.1, ">= 0"),
        (GRPOConfig, "tis_cap", 0.5, ">= 1"),
        (GRPOConfig, "gamma", 1.5, "[0, 1]"),
        (PPOConfig, "advantage_estimator", "rloo", "PPOConfig trains a critic"),
        (PPOConfig, "lam", 1.5, "[0, 1]"),
        (PPOConfig, "value_clip", 0.0, "> 0"),
        (PPOConfig, "vf_coef", 0.0, "> 0"),
        (DAPOConfig, "max_sampling_rounds", 0, ">= 1"),
        (DAPOConfig, "overlong_cache_length", 300, "(0, L_max=256]"),
        (DAPOConfig, "overlong_max_length", 0, ">= 1"),
        (DAPOConfig, "overlong_penalty_factor", -1.0, ">= 0"),
    ],
)
def test_bad_values_name_the_value_the_rule_and_the_fix(
    cls: type[AlgorithmConfig], field: str, value: object, rule: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        cls(**{field: value})
    err = caught.value
    assert (err.name, err.value) == (field, value)
    assert rule in err.rule
    assert err.fix
    assert str(err).startswith(f"{field}={value!r}: ")
    assert "Fix: " in str(err)


def test_per_turn_credit_needs_group_advantages() -> None:
    with pytest.raises(ConfigError, match="per_turn_credit=True"):
        GRPOConfig(per_turn_credit=True, advantage_estimator="rloo")
    assert GRPOConfig(per_turn_credit=True).per_turn_credit


def test_types_are_checked_and_coerced() -> None:
    with pytest.raises(ConfigError, match="group_size='8': must be of type int"):
        GRPOConfig(group_size="8")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must be of type int"):
        GRPOConfig(group_size=True)
    with pytest.raises(ConfigError, match="must be of type bool"):
        DAPOConfig(dynamic_sampling=1)  # type: ignore[arg-type]
    # An optional field says how to turn it off (--set value_clip=null).
    with pytest.raises(ConfigError, match=r"must be of type float.*or None \(null"):
        PPOConfig(value_clip="none")  # type: ignore[arg-type]
    assert PPOConfig(value_clip=None).value_clip is None
    c = GRPOConfig(learning_rate=1, aggregation="token-mean")  # type: ignore[arg-type]
    assert type(c.learning_rate) is float
    assert c.aggregation is Aggregation.TOKEN_MEAN


def test_bad_enum_value_suggests_the_closest_choice() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'token-mean'"):
        GRPOConfig(aggregation="token_mean")  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", PRESETS)
def test_to_dict_round_trips_through_json(cls: type[AlgorithmConfig]) -> None:
    config = cls(seed=3, dual_clip=3.0)
    data = json.loads(json.dumps(config.to_dict()))
    assert data["algo"] == cls.algo
    assert config_from_dict(data) == config
    assert cls.from_dict(data) == config


def test_make_config_applies_overrides() -> None:
    c = make_config("grpo", scale_by_std=False, aggregation="seq-mean-token-sum-norm")
    assert isinstance(c, GRPOConfig)
    assert not c.scale_by_std
    assert c.aggregation_length == c.max_new_tokens
    assert make_config("grpo", norm_length=1024).aggregation_length == 1024


def test_unknown_key_suggests_the_field() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'learning_rate'"):
        config_from_dict({"algo": "grpo", "learning_rat": 1e-5})
    with pytest.raises(ConfigError, match="is not a field of PPOConfig"):
        make_config("ppo", overlong_shaping=True)


def test_unknown_or_missing_or_mismatched_algo() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'grpo'"):
        make_config("grpoo")
    with pytest.raises(ConfigError, match="must name its algorithm"):
        config_from_dict({"learning_rate": 1e-5})
    with pytest.raises(ConfigError, match="algo='dapo'"):
        GRPOConfig.from_dict({"algo": "dapo"})


def test_configs_are_frozen_and_replace_revalidates() -> None:
    c = DAPOConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.seed = 1  # type: ignore[misc]
    assert dataclasses.replace(c, seed=1).seed == 1
    with pytest.raises(ConfigError, match="seed=-1"):
        dataclasses.replace(c, seed=-1)


@pytest.mark.parametrize("cls", PRESETS)
def test_every_field_has_help_text(cls: type[AlgorithmConfig]) -> None:
    help_text = cls.field_help()
    assert list(help_text) == [f.name for f in dataclasses.fields(cls)]
    assert all(help_text.values()), [name for name, text in help_text.items() if not text]


def test_users_register_their_own_algorithm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_module, "_ALGORITHMS", dict(config_module._ALGORITHMS))

    @register_algorithm("grpo-rloo")
    @dataclass(frozen=True, kw_only=True)
    class RLOOConfig(GRPOConfig):
        advantage_estimator: AdvantageEstimator = AdvantageEstimator.RLOO

    c = make_config("grpo-rloo", kl_beta=0.0)
    assert isinstance(c, RLOOConfig)
    assert c.advantage_estimator is AdvantageEstimator.RLOO
    assert c.to_dict()["algo"] == "grpo-rloo"
    assert GRPOConfig.algo == "grpo"
    assert config_from_dict(c.to_dict()) == c
    assert RLOOConfig.field_help()["advantage_estimator"]  # inherited help text
    with pytest.raises(ConfigError, match="registered already"):
        register_algorithm("grpo")(RLOOConfig)


def _fields_of_every_config() -> set[str]:
    classes = [AlgorithmConfig, *(config_class(n) for n in algorithm_names())]
    return {f.name for c in classes for f in dataclasses.fields(c)}


def test_trainers_read_no_config_field_through_getattr() -> None:
    """An algorithm's field is read with typed access (``isinstance(config, DAPOConfig)``, or a
    field every config has), never ``getattr(config, "name", default)``: a misspelt or foreign
    name must be an error, not a silent default."""
    package = Path(config_module.__file__).parent
    fields, found = _fields_of_every_config(), []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in fields
            ):
                found.append(f"{path.relative_to(package)}:{node.lineno} {ast.unparse(node)}")
    assert found == []


def test_a_config_that_trains_a_critic_must_be_a_ppo_config() -> None:
    @dataclass(frozen=True, kw_only=True)
    class CriticWithoutSettings(AlgorithmConfig):
        uses_critic: ClassVar[bool] = True
        advantage_estimator: AdvantageEstimator = AdvantageEstimator.GAE

    with pytest.raises(ConfigError, match=r"not a PPOConfig.*subclass PPOConfig"):
        CriticWithoutSettings()

    @dataclass(frozen=True, kw_only=True)
    class MyPPO(PPOConfig):
        lam: float = 0.9

    assert MyPPO().uses_critic
