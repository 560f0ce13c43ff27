"""The envs agentgym ships. Entry points are strings: nothing heavy is imported here."""

from __future__ import annotations

import math

from agentgym.registry import register
from agentgym.registry.multiagent import register as register_multiagent


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
    register(
        "agentgym/Code-v0",
        "agentgym.envs.code:CodeEnv",
        family="Code",
        tags=("code", "single-turn", "sandbox"),
        extras=("code",),
        description="Write a Python program that passes hidden tests (HumanEval by default).",
        resources={"num_cpus": 1},  # a sandboxed program per env at a time (workers="ray")
    )
    register(
        "agentgym/Code-MultiTurn-v0",
        "agentgym.envs.code:CodeEnv",
        family="Code",
        tags=("code", "multi-turn", "sandbox"),
        extras=("code",),
        description="Code-v0 with failing-test feedback and up to 4 attempts.",
        kwargs={"max_attempts": 4},
    )
    register(
        "agentgym/Math-v0",
        "agentgym.envs.math:MathEnv",
        family="Math",
        tags=("math", "single-turn", "procedural"),
        extras=("math",),
        description="Answer a math question in \\boxed{}, checked with math-verify.",
    )
    register(
        "agentgym/Math-Python-v0",
        "agentgym.envs.math:MathEnv",
        family="Math",
        tags=("math", "multi-turn", "tools", "sandbox"),
        extras=("math",),
        description="Math-v0 with a sandboxed python tool (up to 8 turns).",
        kwargs={"python_tool": True},
    )
    register(
        "agentgym/SWE-v0",
        "agentgym.envs.swe:SWEEnv",
        family="SWE",
        tags=("code", "swe", "multi-turn", "tools", "sandbox", "repository"),
        extras=("docker",),  # only for the docker backend; "local" needs bubblewrap and git
        reward_range=(0.0, 1.0),
        description="Fix a reported bug in a real repository; graded by its own tests.",
        resources={"num_cpus": 1},  # a container (or sandbox) per env (workers="ray")
    )
    register(
        "agentgym/SWE-Pack-v0",
        "agentgym.envs.swe.pack:SWEPackEnv",
        family="SWE",
        tags=("code", "swe", "multi-turn", "tools", "sandbox", "repository", "synthetic"),
        extras=("docker",),
        reward_range=(0.0, 1.0),
        description="Fix a bug injected into a real open-source Python project; its tests grade.",
        resources={"num_cpus": 1},
    )
    register(
        "agentgym/MCP-v0",
        "agentgym.envs.mcp:MCPEnv",
        family="MCP",
        tags=("tools", "multi-turn", "mcp"),
        extras=("mcp",),
        description="Do a task with an MCP server's tools (default: the shipped store server).",
    )
    register(
        "agentgym/Web-v0",
        "agentgym.envs.web:WebEnv",
        family="Web",
        tags=("web", "browser", "multi-turn", "tools"),
        extras=("web",),  # and Debian's chromium (apt-get install chromium)
        # invalid_action_penalty is 0 by default; the site's reward lies in [0, 1].
        reward_range=(0.0, 1.0),
        description="Shop in the embedded web shop (or your own site) with a real Chromium.",
    )
    register(
        "agentgym/MiniWoB-v0",
        "agentgym.envs.web.miniwob:MiniWoBEnv",
        family="Web",
        tags=("web", "browser", "multi-turn", "tools", "miniwob"),
        extras=("web",),  # and Debian's chromium (apt-get install chromium)
        # MiniWoB's raw reward: -1 for a wrong answer, 1 for a solved task.
        reward_range=(-1.0, 1.0),
        description="MiniWoB++ tasks (click, type, forms) in a real Chromium.",
    )
    register(
        "agentgym/Remote-v0",
        "agentgym.vector.remote:RemoteEnv",
        family="Remote",
        tags=("remote", "openenv"),
        extras=("openenv",),
        # Whatever the served env gives (FrozenLake-v0's -3.2..1 when url=None and no env_id).
        reward_range=(-math.inf, math.inf),
        description="Play an env served by `agentgym serve-env` or any OpenEnv server.",
    )
    register_builtin_multiagent_envs()


def register_builtin_multiagent_envs() -> None:
    """The multi-agent envs: ``agentgym.make`` makes them, ``list_multiagent_envs`` lists them."""
    register_multiagent(
        "agentgym/TicTacToe-v0",
        "agentgym.envs.tictactoe:TicTacToeEnv",
        roles=("x", "o"),
        tags=("game", "two-player", "multi-agent"),
        description="Tic-tac-toe on a 3x3 text board; x moves first; o is random by default.",
    )
    register_multiagent(
        "agentgym/MathSolverJudge-v0",
        "agentgym.envs.math.judge:MathSolverJudgeEnv",
        roles=("solver", "judge"),
        tags=("math", "workflow", "multi-agent"),
        extras=("math",),
        description="A solver answers a Math-v0 problem; a judge's verdict is graded by the "
        "verifier.",
    )
