"""Moved to ``agentgym.rollout.collector_source``; this old path warns and will be removed."""

from agentgym.core.deprecation import warn_deprecated
from agentgym.rollout.collector_source import (  # noqa: F401
    CollectorSource,
    episode_task,
    shard_size,
)

warn_deprecated("agentgym.trainers.collector", "agentgym.rollout.collector_source")
