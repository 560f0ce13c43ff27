"""Trainers: the algorithm building blocks (``agentgym.trainers.algorithms``) and the PPO, GRPO
and DAPO preset configs.
"""

from agentgym.trainers import algorithms
from agentgym.trainers.config import (
    AlgorithmConfig,
    DAPOConfig,
    GRPOConfig,
    PPOConfig,
    TrainerConfig,
    algorithm_names,
    config_class,
    config_from_dict,
    make_config,
    register_algorithm,
)

__all__ = [
    "AlgorithmConfig",
    "DAPOConfig",
    "GRPOConfig",
    "PPOConfig",
    "TrainerConfig",
    "algorithm_names",
    "algorithms",
    "config_class",
    "config_from_dict",
    "make_config",
    "register_algorithm",
]
