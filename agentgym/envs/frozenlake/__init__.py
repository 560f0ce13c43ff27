"""FrozenLake: Gymnasium's grid world as a multi-turn text env with a ``move`` tool."""

from agentgym.envs.frozenlake.env import MOVE, FrozenLakeEnv
from agentgym.envs.frozenlake.maps import (
    generate_map,
    parse_map,
    shortest_path_length,
    squares_reaching_goal,
)

__all__ = [
    "MOVE",
    "FrozenLakeEnv",
    "generate_map",
    "parse_map",
    "shortest_path_length",
    "squares_reaching_goal",
]
