"""The envs agentgym ships. Entry points are strings: nothing heavy is imported here."""

from __future__ import annotations

from agentgym.registry import register


def register_builtin_envs() -> None:
    register(
        "agentgym/FrozenLake-v0",
        "agentgym.envs.frozenlake:FrozenLakeEnv",
        family="FrozenLake",
        tags=("grid", "multi-turn", "tools", "procedural"),
        # 32 invalid turns (max_turns = 2*4*4) at -0.1 each, up to reaching the goal.
        reward_range=(-3.2, 1.0),
        description="Reach the goal on a text grid without falling into a hole.",
    )
