"""``agentgym.error``: the error hierarchy (defined in :mod:`agentgym.core.errors`)."""

from agentgym.core.errors import *  # noqa: F403
from agentgym.core.errors import __all__ as __all__
