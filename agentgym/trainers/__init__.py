"""The training library: episodes in, policy updates out.

::

    trainer = make("grpo", backend="torch", policy=None, config={"group_size": 4})
    trainer.step(episodes)                                   # one update from your episodes
    fit(trainer, "agentgym/FrozenLake-v0", steps=100, out="runs/fl")   # collect, update, resume

``make`` builds a ``Trainer`` from a preset config (``PPOConfig``, ``GRPOConfig``, ``DAPOConfig``
or a registered algorithm) on a backend (``agentgym.trainers.backends``: torch, deepspeed);
``fit`` is the loop over an ``EpisodeSource`` (the rollout collector, ``CollectorSource``, or your
own; both are ``agentgym.rollout``'s, re-exported here), which writes checkpoints under ``out``
and hands its metrics rows to a ``Recorder`` when given one. The algorithm building blocks are
pure functions in ``agentgym.trainers.algorithms``. Run folders, recipes, progress bars and
evaluation reports are the application's (``agentgym.recipes``), not this package's.
"""

from agentgym.rollout.collector_source import CollectorSource
from agentgym.rollout.source import EpisodeSource, SourceBase
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
from agentgym.trainers.recorder import Recorder
from agentgym.trainers.trainer import Trainer, make

__all__ = [
    "AlgorithmConfig",
    "Backend",
    "CollectorSource",
    "DAPOConfig",
    "EpisodeSource",
    "GRPOConfig",
    "PPOConfig",
    "Recorder",
    "SourceBase",
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
