"""What ``pip install agentgym`` (no extra) relies on: ``import agentgym`` and FrozenLake load
none of the optional dependencies. ``scripts/check_extras.sh`` installs each extra alone."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys

# The user-facing extras; test and dev hold tools (setuptools' .pth loads _distutils_hack).
TOOLING = {"test", "dev"}

SCRIPT = """
import json, sys
import gymnasium as gym
import agentgym
after_import = sorted(sys.modules)
env = gym.make("agentgym/FrozenLake-v0")
env.reset(seed=0)
env.step("down")
env.close()
print(json.dumps({"import": after_import, "frozenlake": sorted(sys.modules)}))
"""


def optional_modules() -> set[str]:
    """Top-level modules of the distributions agentgym's extras require (those installed)."""
    extras = set()
    for line in importlib.metadata.requires("agentgym") or []:
        marker = re.search(r"""extra\s*==\s*["']([^"']+)["']""", line)
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        if marker and name and marker[1] not in TOOLING and name[1].lower() != "agentgym":
            extras.add(re.sub(r"[-_.]+", "-", name[1]).lower())
    modules = set()
    for module, distributions in importlib.metadata.packages_distributions().items():
        if any(re.sub(r"[-_.]+", "-", d).lower() in extras for d in distributions):
            modules.add(module)
    return modules


def test_import_agentgym_and_frozenlake_load_no_optional_dependency():
    optional = optional_modules()
    for expected in ("torch", "transformers", "starlette", "docker", "mcp", "deepspeed"):
        assert expected in optional  # the dev install has every extra: the check sees them
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = json.loads(done.stdout)
    for stage in ("import", "frozenlake"):
        top = {name.partition(".")[0] for name in loaded[stage]}
        assert not top & optional, f"{stage} loaded {sorted(top & optional)}"
