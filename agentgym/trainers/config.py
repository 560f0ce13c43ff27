"""Trainer configs: the PPO, GRPO and DAPO presets, and a registry of algorithm names.

A config is a frozen dataclass validated at construction: a bad value raises ``ConfigError``
naming the value, the rule it breaks and the fix. Each field's docstring is its ``--help`` text
(``field_help``). ``TrainerConfig`` holds what every trainer needs; ``AlgorithmConfig`` adds the
algorithm's knobs with neutral defaults; the presets change defaults and add their own fields::

    config = make_config("dapo", group_size=16)          # or DAPOConfig(group_size=16)
    config = config_from_dict({"algo": "grpo", "kl_beta": 0.0, "scale_by_std": False})
    config.to_dict()                                     # round-trips through config_from_dict

A user's own algorithm is a subclass registered under a new name::

    @register_algorithm("grpo-rloo")
    @dataclass(frozen=True, kw_only=True)
    class RLOOConfig(GRPOConfig):
        advantage_estimator: AdvantageEstimator = AdvantageEstimator.RLOO

The trainers read a preset's own fields by type, never by name: DAPO's dynamic sampling and
overlong shaping apply to a ``DAPOConfig`` (subclass it to keep them), PPO's critic to a config
whose ``uses_critic`` is True; a field of the same name on another config means nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self, TypeVar

from agentgym.core.config import Config, did_you_mean, require
from agentgym.core.errors import ConfigError
from agentgym.trainers.algorithms.advantages import AdvantageEstimator
from agentgym.trainers.algorithms.aggregation import Aggregation
from agentgym.trainers.algorithms.kl import KLEstimator, KLPlacement

__all__ = [
    "AlgorithmConfig",
    "DAPOConfig",
    "GRPOConfig",
    "PPOConfig",
    "TrainerConfig",
    "algorithm_names",
    "config_class",
    "config_from_dict",
    "make_config",
    "register_algorithm",
]


# The checking machinery is the core's (shared with the run description of ``agentgym train``);
# the short names are the ones this module's configs use.
_did_you_mean = did_you_mean
_require = require

MaskableOutcome = Literal["truncated", "timeout"]
"""The outcomes (``agentgym.core.info.OUTCOMES``) compact filtering may mask out of the loss:
those that say a budget ran out, not what the episode achieved."""


@dataclass(frozen=True, kw_only=True)
class TrainerConfig(Config):
    """What every trainer needs, whatever the algorithm."""

    algo: ClassVar[str | None] = None
    uses_critic: ClassVar[bool] = False

    learning_rate: float = 1e-6
    """Policy learning rate (AdamW); 1e-6 as in DeepSeekMath and DAPO."""
    group_size: int = 8
    """Episodes sampled per task; a group shares its task so that its rewards can be compared."""
    batch_size: int = 64
    """Episodes per training step (a multiple of group_size)."""
    ppo_epochs: int = 1
    """Passes over each batch of episodes."""
    num_minibatches: int = 1
    """Optimizer steps per epoch: the batch is split into this many minibatches."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this; None: no clipping."""
    temperature: float = 1.0
    """Sampling temperature; old-policy logprobs are computed at the same temperature."""
    max_new_tokens: int = 256
    """Most tokens the policy may sample in one assistant turn."""
    seed: int = 0
    """Seed of the policy's initialisation, the sampling and the data order."""
    max_staleness: int = 0
    """Asynchronous training: the next batches are collected while the update runs, by a policy
    at most this many updates older than the one trained (older samples are dropped); 0: collect,
    then update (synchronous). With k >= 1 the trainer weights tokens by truncated importance
    sampling (tis_cap 2 unless set, or old_logprobs='engine')."""

    _bounds: ClassVar[dict[str, str]] = {
        "learning_rate": "> 0",
        "group_size": ">= 1",
        "ppo_epochs": ">= 1",
        "max_grad_norm": "> 0",
        "temperature": "> 0",
        "max_new_tokens": ">= 1",
        "seed": ">= 0",
        "max_staleness": ">= 0",
    }

    def __post_init__(self) -> None:
        super().__post_init__()  # types and _bounds
        _require(
            self.batch_size >= 1 and self.batch_size % self.group_size == 0,
            self,
            "batch_size",
            f"must be a positive multiple of group_size={self.group_size}",
            f"use e.g. {self.group_size * max(1, self.batch_size // self.group_size)}",
        )
        _require(
            1 <= self.num_minibatches <= self.batch_size
            and self.batch_size % self.num_minibatches == 0,
            self,
            "num_minibatches",
            f"must divide batch_size={self.batch_size}",
            "use 1 or a divisor of batch_size",
        )

    @property
    def groups_per_batch(self) -> int:
        return self.batch_size // self.group_size

    def to_dict(self) -> dict[str, Any]:
        """Plain values (enums as strings) with ``algo`` first; ``from_dict`` reads it back."""
        values = super().to_dict()
        return values if self.algo is None else {"algo": self.algo, **values}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """A config from a mapping (a config file); unknown keys raise ``ConfigError``."""
        data = dict(data)
        algo = data.pop("algo", cls.algo)
        if algo != cls.algo:
            raise ConfigError(
                "algo",
                algo,
                f"{cls.__name__} is the config of algo={cls.algo!r}",
                "use config_from_dict() to pick the class from 'algo', or drop the key",
            )
        return super().from_dict(data)


@dataclass(frozen=True, kw_only=True)
class AlgorithmConfig(TrainerConfig):
    """The knobs PPO, GRPO and DAPO share, with neutral defaults; the presets set them."""

    advantage_estimator: AdvantageEstimator = AdvantageEstimator.GROUP
    """How advantages are computed: gae (needs a critic: algo ppo), group, rloo, reinforce++."""
    scale_by_std: bool = True
    """Group advantages: divide by the group's reward std (GRPO); False only subtracts the mean
    (Dr. GRPO)."""
    gamma: float = 1.0
    """Discount: per sampled token for gae and reinforce++, per turn for per_turn_credit and
    step credit."""
    per_turn_credit: bool = False
    """Multi-turn: credit each turn with its own return-to-go against the group baseline instead
    of giving every turn the episode's advantage."""
    step_credit: float = 0.0
    """Multi-turn: weight ω of GiGPO's step-level advantage, added to every turn's advantage:
    the turn's discounted return-to-go against the other turns of its group taken from the same
    state (the env's ``info["state"]``, else the same observation text); 0 turns it off."""
    episode_credit: float = 1.0
    """With step credit: weight of the episode-level group advantage in each turn's advantage
    (GiGPO's eq. 8 uses 1). 0 leaves only the step-level term: a turn is credited only against
    turns taken from the same state, and a turn from a state met once gets 0."""
    clip_eps_low: float = 0.2
    """ε_low: the probability ratio is clipped at 1 − ε_low where the advantage is negative."""
    clip_eps_high: float = 0.2
    """ε_high: the probability ratio is clipped at 1 + ε_high where the advantage is positive
    (DAPO's clip-higher: 0.28)."""
    dual_clip: float | None = None
    """Dual clip c > 1: the loss of a negative-advantage token is at most −c·A; None: off."""
    aggregation: Aggregation = Aggregation.TOKEN_MEAN
    """Per-token losses to one number: token-mean, seq-mean-token-mean, seq-mean-token-sum,
    seq-mean-token-sum-norm."""
    norm_length: int | None = None
    """Constant divisor of seq-mean-token-sum-norm (Dr. GRPO); None: max_new_tokens."""
    kl_beta: float = 0.0
    """Weight β of the KL penalty against the reference policy; 0 turns it off (no reference
    model is kept)."""
    kl_estimator: KLEstimator = KLEstimator.K3
    """KL estimator: k1, k2 or k3 (Schulman's approximations)."""
    kl_placement: KLPlacement = KLPlacement.LOSS
    """Where the KL penalty goes: loss (β·KL added to the loss) or reward (−β·KL per token)."""
    entropy_coef: float = 0.0
    """Entropy bonus: subtract this times the policy's entropy at the sampled tokens
    (aggregated like the policy loss) from the loss, against early collapse onto one answer;
    0 turns it off."""
    entropy_decay_steps: int = 0
    """Updates over which the entropy bonus falls linearly from entropy_coef to 0 (explore
    early, commit late); 0 keeps it constant."""
    target_kl: float | None = None
    """KL early stopping (as in Spinning Up and SB3): once a minibatch's approx_kl, the k3
    estimate of KL[π_old ‖ π_θ] over its tokens measured before its optimizer step, exceeds
    this, the update skips its remaining optimizer steps (epochs and minibatches); None: off.
    Only matters with several optimizer steps per update (ppo_epochs x num_minibatches > 1)."""
    tis_cap: float | None = None
    """Truncated importance sampling: weight each token by min(π_old / π_sampler, C) with this
    C when the engine's logprobs differ from the trainer's (e.g. SGLang); None: off."""
    mask_outcomes: tuple[MaskableOutcome, ...] = ()
    """Compact filtering (DeepSWE): episodes that ended in one of these outcomes keep their
    reward in their group's baseline but add nothing to the loss, so a long try that ran out
    of turns or context is not punished for it: truncated (a turn or context limit), timeout
    (the env's info says timed_out: only where that is an episode's overall time budget; where
    it is the model's own code hanging, masking it lets a failing policy escape its negative
    signal). An episode that succeeded is never masked; () trains on every episode."""

    _bounds: ClassVar[dict[str, str]] = {
        "gamma": "in [0, 1]",
        "step_credit": ">= 0",
        "episode_credit": ">= 0",
        "clip_eps_low": "in (0, 1)",
        "clip_eps_high": "> 0",
        "dual_clip": "> 1",
        "norm_length": ">= 1",
        "kl_beta": ">= 0",
        "entropy_coef": ">= 0",
        "entropy_decay_steps": ">= 0",
        "target_kl": "> 0",
        "tis_cap": ">= 1",
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_advantages()

    def _check_advantages(self) -> None:
        estimator, name = self.advantage_estimator, type(self).__name__
        _require(
            self.uses_critic == (estimator == AdvantageEstimator.GAE),
            self,
            "advantage_estimator",
            f"{name} trains a critic for gae advantages"
            if self.uses_critic
            else f"gae needs a value model, which {name} does not train",
            "use gae with algo 'ppo' and group / rloo / reinforce++ with the others",
        )
        _require(
            not self.uses_critic or isinstance(self, PPOConfig),
            self,
            "uses_critic",
            f"{name} trains a critic but is not a PPOConfig, which holds the critic's settings "
            "(lam, whiten_advantages, value_clip, vf_coef)",
            "subclass PPOConfig for an algorithm with a value model",
        )
        _require(
            estimator not in (AdvantageEstimator.GROUP, AdvantageEstimator.RLOO)
            or self.group_size >= 2,
            self,
            "group_size",
            f"must be >= 2 for {estimator} advantages (a baseline from the rest of the group)",
            "use e.g. 8",
        )
        _require(
            not self.per_turn_credit or estimator == AdvantageEstimator.GROUP,
            self,
            "per_turn_credit",
            f"is implemented for group advantages, not {estimator}",
            "set advantage_estimator='group' or per_turn_credit=False",
        )
        _require(
            not self.step_credit
            or estimator in (AdvantageEstimator.GROUP, AdvantageEstimator.RLOO),
            self,
            "step_credit",
            f"adds to group or rloo advantages, not to {estimator}",
            "set advantage_estimator='group' or step_credit=0",
        )
        _require(
            self.episode_credit == 1.0 or self.step_credit > 0,
            self,
            "episode_credit",
            "weights the episode term against step credit, which is off (step_credit=0)",
            "set step_credit > 0 or leave episode_credit at 1",
        )

    @property
    def aggregation_length(self) -> int:
        """The constant ``max_length`` to pass to ``aggregate`` for seq-mean-token-sum-norm."""
        return self.max_new_tokens if self.norm_length is None else self.norm_length


_SEQUENCE_ESTIMATORS = (AdvantageEstimator.GROUP, AdvantageEstimator.RLOO)
_ALGORITHMS: dict[str, type[AlgorithmConfig]] = {}
C = TypeVar("C", bound=type[AlgorithmConfig])


def register_algorithm(name: str) -> Callable[[C], C]:
    """Class decorator: make ``make_config(name)`` and ``{"algo": name}`` build this config."""

    def add(cls: C) -> C:
        if not (isinstance(cls, type) and issubclass(cls, AlgorithmConfig)):
            raise ConfigError(
                "config class", cls, "must subclass AlgorithmConfig", "subclass a preset"
            )
        if _ALGORITHMS.get(name, cls) is not cls:
            raise ConfigError(
                "algo", name, f"is registered already ({_ALGORITHMS[name].__name__})", "rename"
            )
        cls.algo = name
        _ALGORITHMS[name] = cls
        return cls

    return add


def algorithm_names() -> list[str]:
    return sorted(_ALGORITHMS)


def config_class(algo: str) -> type[AlgorithmConfig]:
    """The config class registered as ``algo``; ``ConfigError`` with a suggestion otherwise."""
    try:
        return _ALGORITHMS[algo]
    except (KeyError, TypeError):
        raise ConfigError(
            "algo", algo, "is not a registered algorithm", _did_you_mean(str(algo), _ALGORITHMS)
        ) from None


def make_config(algo: str, **overrides: Any) -> AlgorithmConfig:
    """The preset ``algo`` with ``overrides`` applied (unknown names raise ``ConfigError``)."""
    return config_class(algo).from_dict(overrides)


def config_from_dict(data: Mapping[str, Any]) -> AlgorithmConfig:
    """A config from a mapping whose ``algo`` key names the preset."""
    if "algo" not in data:
        raise ConfigError(
            "algo",
            None,
            "a config file must name its algorithm",
            f"add algo: one of {algorithm_names()}",
        )
    return config_class(data["algo"]).from_dict(data)


@register_algorithm("ppo")
@dataclass(frozen=True, kw_only=True)
class PPOConfig(AlgorithmConfig):
    """PPO (Schulman et al. 2017) with a critic and GAE (Schulman et al. 2016); a KL penalty, when
    on, goes into the reward as in InstructGPT."""

    uses_critic: ClassVar[bool] = True
    _bounds: ClassVar[dict[str, str]] = {"lam": "in [0, 1]", "value_clip": "> 0", "vf_coef": "> 0"}

    group_size: int = 1
    advantage_estimator: AdvantageEstimator = AdvantageEstimator.GAE
    kl_estimator: KLEstimator = KLEstimator.K1
    kl_placement: KLPlacement = KLPlacement.REWARD

    lam: float = 0.95
    """GAE λ: 1 gives Monte Carlo returns minus the value, 0 one-step TD errors."""
    value_clip: float | None = 0.2
    """Clip range ε of the value loss around the values at collection time; None: unclipped."""
    vf_coef: float = 0.5
    """Weight of the value loss in the total loss."""
    whiten_advantages: bool = True
    """Normalise GAE advantages to mean 0 and std 1 over the batch's sampled tokens."""


@register_algorithm("grpo")
@dataclass(frozen=True, kw_only=True)
class GRPOConfig(AlgorithmConfig):
    """GRPO as in DeepSeekMath (Shao et al. 2024, eq. 3): group-normalised advantages, k3 KL in
    the loss with β = 0.04, ε = 0.2, losses averaged per sequence then over sequences."""

    aggregation: Aggregation = Aggregation.SEQ_MEAN_TOKEN_MEAN
    kl_beta: float = 0.04


@register_algorithm("dapo")
@dataclass(frozen=True, kw_only=True)
class DAPOConfig(AlgorithmConfig):
    """DAPO (Yu et al. 2025): clip-higher (ε 0.2 / 0.28), dynamic sampling, token-mean loss,
    overlong reward shaping, no KL penalty."""

    _bounds: ClassVar[dict[str, str]] = {
        "max_sampling_rounds": ">= 1",
        "overlong_max_length": ">= 1",
        "overlong_penalty_factor": ">= 0",
    }

    clip_eps_high: float = 0.28

    dynamic_sampling: bool = True
    """Drop groups whose rewards are all equal and sample more until the batch is full."""
    max_sampling_rounds: int = 10
    """Most sampling rounds per training step before DynamicSamplingExhausted is raised."""
    partial_batches: bool = False
    """When ``max_sampling_rounds`` rounds did not fill the batch, train on the informative
    groups they kept (a smaller batch) instead of raising DynamicSamplingExhausted. When they kept
    none (every group won or lost all its episodes), the step counts as an update without an
    optimizer step (``optimizer_steps`` 0), so a policy that has mastered the tasks it draws does
    not stop the run. For policies that master most tasks: the paper's rule (sample until full)
    then costs many rounds per update."""
    overlong_shaping: bool = True
    """Punish responses longer than overlong_max_length − overlong_cache_length (DAPO eq. 13)."""
    overlong_max_length: int | None = None
    """L_max of the overlong punishment, in sampled tokens; None: max_new_tokens."""
    overlong_cache_length: int = 64
    """L_cache: the punishment falls linearly from 0 to −overlong_penalty_factor over the last
    this many tokens before L_max."""
    overlong_penalty_factor: float = 1.0
    """Scale of the overlong punishment (1 in the paper)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _require(
            not self.overlong_shaping or 0 < self.overlong_cache_length <= self.overlong_length,
            self,
            "overlong_cache_length",
            f"must lie in (0, L_max={self.overlong_length}]",
            "use about a fifth of L_max (DAPO: 4096 of 20480)",
        )

    @property
    def overlong_length(self) -> int:
        """L_max: ``overlong_max_length``, or ``max_new_tokens`` when that is None."""
        if self.overlong_max_length is None:
            return self.max_new_tokens
        return self.overlong_max_length


@dataclass(frozen=True, kw_only=True)
class TrainOptions(Config):
    """How a trainer runs the algorithm, beside the algorithm's own config (the ``[options]``
    table of a run file, ``--option name=value``)."""

    old_logprobs: Literal["recompute", "engine"] = "recompute"
    """π_old: recompute with the policy at the sampling temperature before the update (when the
    batch takes one optimizer step, the live logprobs detached), or take the engine's sampling
    logprobs (``Episode.logprobs``) as they are."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_betas: tuple[float, float] = (0.9, 0.999)
    """AdamW β1, β2."""
    adam_eps: float = 1e-8
    """AdamW ε."""
    warmup_steps: int = 0
    """Optimizer steps of linear learning-rate warm-up; constant after (unless decay_steps)."""
    decay_steps: int = 0
    """Optimizer steps, after the warm-up, over which the learning rate falls linearly to
    ``min_lr_ratio`` times its peak, then stays there; 0: no decay."""
    min_lr_ratio: float = 0.1
    """Where ``decay_steps`` ends, as a fraction of the peak learning rate."""
    critic_learning_rate: float | None = None
    """Learning rate of the PPO value model; None: the policy's learning_rate."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass (transformers'
    gradient checkpointing): activation memory of one layer instead of all, for about a third
    more compute. Prompt sharing between a group's rows is then off in gradient passes."""
    logits_chunk: int | None = None
    """Positions whose output-layer logits the update computes at once; each chunk is
    recomputed in the backward pass, so the [tokens x vocab] logits never exist whole. None:
    2^25 logits per chunk (220 positions of a 151,936-token vocabulary; one pass for small
    vocabularies); 0: one pass always."""
    lora_rank: int = 0
    """Rank of LoRA adapters (peft) on the policy: only they are trained (the engine sharing
    the policy runs them; an engine elsewhere and saved models get the merged weights); 0: the
    whole policy is trained."""
    lora_alpha: float = 16.0
    """LoRA scaling numerator: the adapters' update is scaled by lora_alpha / lora_rank."""
    lora_targets: str = "all-linear"
    """Modules that get LoRA adapters: all-linear (every linear layer but the output layer), or
    comma-separated module names, e.g. q_proj,v_proj."""

    _bounds: ClassVar[dict[str, str]] = {
        "logits_chunk": ">= 0",
        "lora_rank": ">= 0",
        "lora_alpha": "> 0",
        "weight_decay": ">= 0",
        "adam_betas": "in [0, 1)",
        "adam_eps": ">= 0",
        "warmup_steps": ">= 0",
        "decay_steps": ">= 0",
        "min_lr_ratio": "in [0, 1]",
        "critic_learning_rate": "> 0",
    }

    def __post_init__(self) -> None:
        super().__post_init__()  # types and _bounds
        _require(
            bool(self.lora_targets.replace(",", "").strip()),
            self,
            "lora_targets",
            "names no module",
            "use all-linear, or module names such as q_proj,v_proj",
        )

    @classmethod
    def _unknown_key_rule(cls) -> str:
        return "is not a trainer option"
