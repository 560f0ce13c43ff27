"""``AgentVectorEnv``: a ``gymnasium.vector.VectorEnv`` of agentgym envs driven by asyncio.

Gymnasium's lockstep ``reset``/``step`` plus a ragged API for LLM rollouts (step one env when its
action is ready, receive ``Transition`` s in completion order), groups of envs sharing a task,
a concurrency limit, per-call deadlines and isolation of failing envs.
"""

from gymnasium.vector import AutoresetMode

from agentgym.vector.env import AgentVectorEnv
from agentgym.vector.runner import Transition

__all__ = ["AgentVectorEnv", "AutoresetMode", "Transition"]
