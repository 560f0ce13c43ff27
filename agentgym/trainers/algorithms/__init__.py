"""Pure torch building blocks of the RL algorithms: advantages, policy and value losses, KL,
loss aggregation, DAPO's dynamic sampling and overlong shaping, truncated importance sampling,
and token-level utilities.

Every function takes tensors aligned token for token (``[B, T]``) with a mask that is 1 exactly on
the tokens the model sampled (``Episode.loss_mask``), keeps no state and assumes no device.
PPO, GRPO and DAPO are compositions of these; so is any algorithm a user builds.
"""

from agentgym.trainers.algorithms.advantages import (
    AdvantageEstimator,
    as_groups,
    discounted_returns,
    gae,
    group_advantages,
    reinforce_pp_advantages,
    rloo_advantages,
)
from agentgym.trainers.algorithms.aggregation import Aggregation, aggregate, as_aggregation
from agentgym.trainers.algorithms.anchors import anchor_state_advantages, turn_states
from agentgym.trainers.algorithms.dapo import DynamicSampler, informative_groups, overlong_penalty
from agentgym.trainers.algorithms.importance import (
    ImportanceWeights,
    truncated_importance_weights,
)
from agentgym.trainers.algorithms.kl import (
    KLEstimator,
    KLPlacement,
    kl_estimate,
    kl_loss,
    kl_penalized_rewards,
)
from agentgym.trainers.algorithms.masked import (
    check_same_shape,
    masked_mean,
    masked_sum,
    masked_whiten,
)
from agentgym.trainers.algorithms.policy_loss import PolicyLoss, clipped_policy_loss
from agentgym.trainers.algorithms.tokens import (
    EpisodeBatch,
    broadcast_to_tokens,
    collate_episodes,
    per_turn_group_advantages,
    place_turn_rewards,
    turn_returns,
    turn_values_to_tokens,
)
from agentgym.trainers.algorithms.value_loss import ValueLoss, clipped_value_loss

__all__ = [
    "AdvantageEstimator",
    "Aggregation",
    "DynamicSampler",
    "EpisodeBatch",
    "ImportanceWeights",
    "KLEstimator",
    "KLPlacement",
    "PolicyLoss",
    "ValueLoss",
    "aggregate",
    "anchor_state_advantages",
    "as_aggregation",
    "as_groups",
    "broadcast_to_tokens",
    "check_same_shape",
    "clipped_policy_loss",
    "clipped_value_loss",
    "collate_episodes",
    "discounted_returns",
    "gae",
    "group_advantages",
    "informative_groups",
    "kl_estimate",
    "kl_loss",
    "kl_penalized_rewards",
    "masked_mean",
    "masked_sum",
    "masked_whiten",
    "overlong_penalty",
    "per_turn_group_advantages",
    "place_turn_rewards",
    "reinforce_pp_advantages",
    "rloo_advantages",
    "truncated_importance_weights",
    "turn_returns",
    "turn_states",
    "turn_values_to_tokens",
]
