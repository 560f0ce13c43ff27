"""Smoke test of one install: ``python scripts/smoke_extra.py <extra> <scratch dir>``.

Run by ``scripts/check_extras.sh`` in a fresh venv holding agentgym with that extra only (``core``:
no extra; ``lowest``: no extra, the core dependencies at their lowest allowed versions). Each check
runs what the extra is for, the way a user would; exits non-zero with the reason on failure.
Run it from outside the source tree, so that ``import agentgym`` finds the installed package.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

SCRIPTS = Path(sysconfig.get_path("scripts"))
AGENTGYM = str(SCRIPTS / "agentgym")
# Catches a hang only: .ci/run runs these at the lowest CPU priority beside the tests, where a
# smoke run that takes a minute alone has taken over ten.
DEADLINE_S = 2400
OPTIONAL = (
    "torch", "transformers", "starlette", "uvicorn", "httpx", "docker", "mcp", "deepspeed",
    "playwright", "ray",
)


def cli(*args: str, stdin: str = "", status: int = 0) -> str:
    """Run the installed ``agentgym`` command; its stdout, after checking its exit status."""
    done = subprocess.run(
        [AGENTGYM, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    if done.returncode != status or "Traceback" in done.stderr:
        raise SystemExit(
            f"agentgym {' '.join(args)}: exit {done.returncode} (expected {status})\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        )
    return done.stdout + done.stderr


def normal_priority() -> None:
    """In the child before it starts: back to nice 0 where allowed (root), else unchanged."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, 0)


def python(code: str, *, normal: bool = False) -> str:
    """``python -c code`` in this venv; ``normal``: at normal CPU priority (normal_priority)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
        preexec_fn=normal_priority if normal else None,
    )
    if done.returncode != 0:
        raise SystemExit(f"python -c {code!r}: exit {done.returncode}\n{done.stderr[-4000:]}")
    return done.stdout


def make_and_reset(env_id: str, **kwargs: object) -> None:
    python(
        "import gymnasium as gym, agentgym\n"
        f"env = gym.make({env_id!r}, **{kwargs!r})\n"
        "obs, info = env.reset(seed=0)\n"
        "assert obs and obs[-1]['content'], obs\n"
        "env.close()\n"
    )


def core(scratch: Path) -> None:
    assert "agentgym/FrozenLake-v0" in cli("list")
    kwargs = ("--env-kwargs", "size=2", "hole_prob=0")
    played = cli("play", "agentgym/FrozenLake-v0", *kwargs, stdin="right\ndown\n:q\n")
    assert "Episode over. Return: 1" in played, played
    loaded = python(
        "import sys, gymnasium as gym, agentgym\n"
        "env = gym.make('agentgym/FrozenLake-v0')\n"
        "env.reset(seed=0)\n"
        "env.step('down')\n"
        f"print([m for m in {OPTIONAL!r} if m in sys.modules])\n"
    )
    assert loaded.strip() == "[]", f"import agentgym loaded optional modules: {loaded}"
    # Each subcommand whose extra is missing says which one to install.
    for args, extra in (
        (["train", "--help"], "train"),
        (["eval"], "train"),
        (["serve", "--help"], "serve"),
        (["mcp", "inspect"], "mcp"),
        (["play", "agentgym/Code-v0"], "code"),
    ):
        said = cli(*args, status=2)
        assert f"pip install 'agentgymnasium[{extra}]'" in said, said


def code(scratch: Path) -> None:
    # Made and reset only: no program runs, so no isolating backend is needed.
    make_and_reset("agentgym/Code-v0", sandbox="unsafe-local")


def math(scratch: Path) -> None:
    python(
        "import gymnasium as gym, agentgym\n"
        "env = gym.make('agentgym/Math-v0')\n"
        "env.reset(seed=0)\n"
        "_, reward, terminated, _, _ = env.step('The answer is \\\\boxed{not a number}')\n"
        "assert terminated and reward <= 0, reward\n"
    )


def mcp(scratch: Path) -> None:
    make_and_reset("agentgym/MCP-v0")
    assert "inspect" in cli("mcp", "--help")


def docker(scratch: Path) -> None:
    python("import docker\nfrom agentgym.sandbox import DockerSandbox\nprint(DockerSandbox)")


def web(scratch: Path) -> None:
    # The JS walker ships as package data; Playwright's async API imports.
    python(
        "from playwright.async_api import async_playwright\n"
        "from agentgym.envs.web.observe import walker_source\n"
        "assert 'data-agentgym-id' in walker_source()\n"
    )
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        make_and_reset("agentgym/Web-v0")
        return
    # No Chromium on this machine (the extra cannot install one): the reset names the fix.
    said = python(
        "import gymnasium as gym, agentgym, agentgym.error\n"
        "env = gym.make('agentgym/Web-v0')\n"
        "try:\n"
        "    env.reset(seed=0)\n"
        "except agentgym.error.Error as e:\n"
        "    print(e)\n"
    )
    assert "apt-get install chromium" in said, said


def models(scratch: Path) -> None:
    python(
        "import asyncio\n"
        "from agentgym import models\n"
        "from agentgym.inference import HFEngine, SamplingParams\n"
        "model, tokenizer = models.load()\n"
        "async def main():\n"
        "    engine = HFEngine(model, tokenizer, seed=0)\n"
        "    sampling = SamplingParams(max_tokens=4, ignore_eos=True)\n"
        "    out = await engine.generate([1, 2, 3], sampling)\n"
        "    await engine.close()\n"
        "    assert len(out.token_ids) == 4, out\n"
        "asyncio.run(main())\n"
    )
    said = cli("train", "--help", status=2)
    assert "pip install 'agentgymnasium[train]'" in said, said


def train(scratch: Path) -> None:
    out = scratch / "run"
    small = ["--set", "group_size=4", "--set", "batch_size=8", "--set", "num_minibatches=1"]
    summary = cli(
        "train",
        "--steps",
        "2",
        "--max-turns",
        "3",
        "--eval-episodes",
        "4",
        "--out",
        str(out),
        *small,
    )
    assert (out / "summary.json").is_file(), summary
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2], steps
    said = cli("eval", "--episodes", "2", "--model", str(out), "--json")
    assert '"success_rate"' in said, said
    said = cli("serve", "--help", status=2)
    assert "pip install 'agentgymnasium[serve]'" in said, said


def deepspeed(scratch: Path) -> None:
    python("import deepspeed\nfrom agentgym.trainers.backends import make_backend\n")
    assert "deepspeed" in cli("train", "--help")


def serve(scratch: Path) -> None:
    assert "--port" in cli("serve", "--help")
    python("from agentgym.inference import OpenAIEngine\nfrom agentgym.inference import server\n")


def ray(scratch: Path) -> None:
    # Ray gives its raylet a fixed 30 s to register (ray/_private/node.py), which a start at
    # .ci/run's nice 19 beside the tests missed: Ray's own processes run at normal priority.
    # address='local' starts a Ray of its own: a bare init() joined the one a test had started
    # beside it (and refused num_cpus for an existing cluster).
    python(
        "import gymnasium as gym, ray, agentgym\n"
        "ray.init(address='local', num_cpus=1, include_dashboard=False)\n"
        "v = gym.make_vec('agentgym/FrozenLake-v0', 2, vectorization_mode='vector_entry_point',\n"
        "                 workers='ray')\n"
        "obs, _ = v.reset(seed=0)\n"
        "assert obs[0][-1]['content'], obs\n"
        "v.step(['down', 'down'])\n"
        "v.close()\n",
        normal=True,
    )


def trl(scratch: Path) -> None:
    python(
        "import os\n"
        "os.environ['TRL_EXPERIMENTAL_SILENCE'] = '1'\n"
        "from trl import GRPOConfig, GRPOTrainer\n"
        "from agentgym import models\n"
        "from agentgym.integrations.trl import AgentGymRollout, env_reward, task_dataset\n"
        "model, tokenizer = models.load()\n"
        f"config = GRPOConfig(output_dir={str(scratch / 'trl')!r}, use_cpu=True, max_steps=1,\n"
        "    per_device_train_batch_size=4, num_generations=2, max_completion_length=8,\n"
        "    beta=0.0, report_to='none', save_strategy='no')\n"
        "rollout = AgentGymRollout(max_turns=2, env_kwargs={'tool': False})\n"
        "GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward,\n"
        "    args=config, train_dataset=task_dataset('agentgym/FrozenLake-v0', 2),\n"
        "    rollout_func=rollout).train()\n"
        "assert len(rollout.last_episodes) == 4, rollout.last_episodes\n"
    )


def openenv(scratch: Path) -> None:
    # serve-env in a child process; Remote-v0 and openenv-core's own client play it.
    assert "--num-envs" in cli("serve-env", "--help")
    python(
        "import asyncio, sys, gymnasium as gym, agentgym\n"
        "from agentgym.vector.remote import start_server\n"
        # at nice 19 beside CI's tests, starting it took over the default 120 s
        f"server = start_server('agentgym/FrozenLake-v0', num_envs=2, timeout={DEADLINE_S // 2})\n"
        "try:\n"
        "    env = gym.make('agentgym/Remote-v0', url=server.url)\n"
        "    obs, info = env.reset(seed=0)\n"
        "    assert obs and info['tools'], info\n"
        "    env.step('```down```')\n"
        "    env.close()\n"
        "    assert 'openenv' not in sys.modules, 'Remote-v0 imported openenv-core'\n"
        "    from openenv.core import GenericEnvClient\n"
        "    async def play():\n"
        "        async with GenericEnvClient(base_url=server.url) as client:\n"
        "            first = await client.reset(seed=0)\n"
        "            assert first.observation['messages'], first\n"
        "            await client.step({'message': '```down```'})\n"
        "    asyncio.run(play())\n"
        "finally:\n"
        "    server.close()\n"
    )


CHECKS: dict[str, Callable[[Path], None]] = {
    "core": core,
    "lowest": core,
    "frozenlake": core,
    "code": code,
    "math": math,
    "mcp": mcp,
    "docker": docker,
    "web": web,
    "models": models,
    "train": train,
    "deepspeed": deepspeed,
    "serve": serve,
    "trl": trl,
    "ray": ray,
    "openenv": openenv,
}


def main() -> None:
    extra, scratch = sys.argv[1], Path(sys.argv[2])
    if extra not in CHECKS:
        raise SystemExit(f"no smoke check for {extra!r}; known: {', '.join(CHECKS)}")
    CHECKS[extra](scratch)
    print(f"{extra}: ok")


if __name__ == "__main__":
    main()
