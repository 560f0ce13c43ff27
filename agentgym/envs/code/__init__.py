"""Code: write a program that passes hidden tests run in a sandbox (HumanEval by default)."""

from agentgym.envs.code.env import CodeEnv
from agentgym.envs.code.grader import GradeResult, grade, normalise_output
from agentgym.envs.code.tasks import CodeTask, StdioCase, load_tasks
from agentgym.envs.code.text import last_code_block

__all__ = [
    "CodeEnv",
    "CodeTask",
    "GradeResult",
    "StdioCase",
    "grade",
    "last_code_block",
    "load_tasks",
    "normalise_output",
]
