"""agentgym: Gymnasium-compatible text environments and RL trainers for LLM agents.

``import agentgym`` registers the ``agentgym/*`` envs and every installed plugin's envs, so
``gym.make("agentgym/FrozenLake-v0")`` works right after it.
"""

from __future__ import annotations

from agentgym.core import AgentEnv, Episode, Tool, Turn, tool
from agentgym.registry import EnvInfo, env_info, list_envs, load_plugins, make, plugins, register
from agentgym.registry.builtin import register_builtin_envs

__version__ = "0.1.0"

__all__ = [
    "AgentEnv",
    "EnvInfo",
    "Episode",
    "Tool",
    "Turn",
    "__version__",
    "env_info",
    "list_envs",
    "load_plugins",
    "make",
    "plugins",
    "register",
    "tool",
]

register_builtin_envs()
load_plugins()

# Heavy layers (torch, transformers, docker) load on first use: ``agentgym.trainers.make(...)``
# works after a plain ``import agentgym`` without making every import pay for them.
_LAZY_SUBMODULES = frozenset(
    {"inference", "models", "rollout", "sandbox", "trainers", "utils", "vector", "wrappers"}
)


def __getattr__(name: str) -> object:
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"agentgym.{name}")
    raise AttributeError(f"module 'agentgym' has no attribute {name!r}")
