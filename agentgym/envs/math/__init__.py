"""Math: answer in ``\\boxed{}``, graded with math-verify; tasks from reasoning-gym or a file."""

from agentgym.envs.math.env import MathEnv
from agentgym.envs.math.grading import Verdict, all_boxed, grade, last_boxed, verify_answer
from agentgym.envs.math.tasks import DEFAULT_GENERATORS, MathTask, generate_tasks, load_file

__all__ = [
    "DEFAULT_GENERATORS",
    "MathEnv",
    "MathTask",
    "Verdict",
    "all_boxed",
    "generate_tasks",
    "grade",
    "last_boxed",
    "load_file",
    "verify_answer",
]
