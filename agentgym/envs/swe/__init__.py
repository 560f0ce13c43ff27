"""SWE: fix a bug in a real repository with file and shell tools; graded by its tests."""

from agentgym.envs.swe.backends import REPO_DIR, LocalSWEBackend, SWEBackend, make_backend
from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.grader import GradeResult
from agentgym.envs.swe.instances import SWEInstance, load_instances, read_instances
from agentgym.envs.swe.patches import as_action, gold_tool_calls, patch_to_tool_calls
from agentgym.envs.swe.repo import materialize

__all__ = [
    "REPO_DIR",
    "GradeResult",
    "LocalSWEBackend",
    "SWEBackend",
    "SWEEnv",
    "SWEInstance",
    "as_action",
    "gold_tool_calls",
    "load_instances",
    "make_backend",
    "materialize",
    "patch_to_tool_calls",
    "read_instances",
]
