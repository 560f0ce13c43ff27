"""Trainers: ``make(algo, backend, policy=..., config=...)`` returns a ``Trainer``; the algorithm
building blocks (``agentgym.trainers.algorithms``), the PPO, GRPO and DAPO preset configs, the
backends (``agentgym.trainers.backends``), checkpoints and the training loop.
"""

from agentgym.trainers import algorithms
from agentgym.trainers.backends import Backend, TorchBackend, make_backend
from agentgym.trainers.checkpoint import find_latest
from agentgym.trainers.config import (
    AlgorithmConfig,
    DAPOConfig,
    GRPOConfig,
    PPOConfig,
    TrainerConfig,
    TrainOptions,
    algorithm_names,
    config_class,
    config_from_dict,
    make_config,
    register_algorithm,
)
from agentgym.trainers.fit import fit
from agentgym.trainers.source import EpisodeSource
from agentgym.trainers.trainer import Trainer, make

__all__ = [
    "AlgorithmConfig",
    "Backend",
    "DAPOConfig",
    "EpisodeSource",
    "GRPOConfig",
    "PPOConfig",
    "TorchBackend",
    "TrainOptions",
    "Trainer",
    "TrainerConfig",
    "algorithm_names",
    "algorithms",
    "config_class",
    "config_from_dict",
    "find_latest",
    "fit",
    "make",
    "make_backend",
    "make_config",
    "register_algorithm",
]
