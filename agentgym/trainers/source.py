"""Moved to ``agentgym.rollout.source``; this old path warns and will be removed."""

from agentgym.core.deprecation import warn_deprecated
from agentgym.rollout.source import EpisodeSource  # noqa: F401

warn_deprecated("agentgym.trainers.source", "agentgym.rollout.source")
