"""Moved to ``agentgym.rollout.curriculum``; this old path warns and will be removed."""

from agentgym.core.deprecation import warn_deprecated
from agentgym.rollout.curriculum import (  # noqa: F401
    CURRICULA,
    Adaptive,
    Curriculum,
    Sampler,
    Schedule,
    Task,
    TaskStats,
    Uniform,
    make_curriculum,
    task_set,
)

warn_deprecated("agentgym.trainers.curriculum", "agentgym.rollout.curriculum")
