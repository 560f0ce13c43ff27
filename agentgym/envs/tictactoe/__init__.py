"""Tic-tac-toe: a two-player text game (``agentgym/TicTacToe-v0``), and its scripted players."""

from agentgym.envs.tictactoe.env import TicTacToeEnv
from agentgym.envs.tictactoe.players import heuristic_move, random_move

__all__ = ["TicTacToeEnv", "heuristic_move", "random_move"]
