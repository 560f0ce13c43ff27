"""What ``pip install agentgymnasium`` (no extra) relies on: ``import agentgym`` and FrozenLake load
none of the optional dependencies. ``scripts/check_extras.sh`` installs each extra alone."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

from agentgym.extras import DISTRIBUTION, install_hint, pip_install

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
    for line in importlib.metadata.requires(DISTRIBUTION) or []:
        marker = re.search(r"""extra\s*==\s*["']([^"']+)["']""", line)
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        if marker and name and marker[1] not in TOOLING and name[1].lower() != DISTRIBUTION:
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


def test_installed_under_a_name_free_of_the_unrelated_agentgym_on_the_package_index():
    # "agentgym" on the package index is another project ("Agent Gym - Pytorch"): every install
    # line must name this one's distribution, and it is the one installed here.
    assert DISTRIBUTION != "agentgym"
    assert importlib.metadata.distribution(DISTRIBUTION).entry_points.select(name="agentgym")
    assert pip_install("math", "code") == f"pip install '{DISTRIBUTION}[math,code]'"
    assert pip_install() == f"pip install {DISTRIBUTION}"
    assert install_hint(["web"]) == f" Fix: pip install '{DISTRIBUTION}[web]'"


def test_no_install_line_names_the_unrelated_agentgym():
    root = Path(__file__).resolve().parent.parent
    wrong = re.compile(r"(?<![\w-])agentgym\[|pip install (?:-U )?['\"]?agentgym(?![\w-])")
    found = []
    for folder in ("agentgym", "docs", "examples", "scripts", "benchmarks", "tests"):
        for path in (root / folder).rglob("*"):
            if path.suffix in {".py", ".md", ".sh", ".toml"} and path != Path(__file__).resolve():
                text = path.read_text(errors="replace")
                found += [f"{path.relative_to(root)}: {m[0]}" for m in wrong.finditer(text)]
    for name in ("README.md", "Makefile", "pyproject.toml"):
        found += [f"{name}: {m[0]}" for m in wrong.finditer((root / name).read_text())]
    assert not found, found


def _uv_flags(listed: str) -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    try:
        from uv_flags import uv_flags
    finally:
        sys.path.pop(0)
    return uv_flags(listed)


def test_check_extras_gives_uv_the_indexes_links_constraints_and_certificates_pip_uses():
    # scripts/check_extras.sh installs through uv, which reads no pip configuration: what
    # `pip config list` shows (files and PIP_* variables) becomes uv's flags, each once.
    listed = "\n".join(
        [
            ":env:.cert='/etc/ssl/certs/bundle.crt'",
            ":env:.default-timeout='180'",
            ":env:.find-links='/srv/wheels'",
            "global.cert='/etc/ssl/certs/bundle.crt'",
            "global.constraint='/etc/pip/constraints.txt'",
            "global.extra-index-url='file:///srv/a/simple file:///srv/b/simple'",
            "global.find-links='/srv/wheels'",
            "install.index-url='https://mirror.example/simple'",
        ]
    )
    assert _uv_flags(listed) == [
        "--cert=/etc/ssl/certs/bundle.crt",
        "--find-links=/srv/wheels",
        "--constraint=/etc/pip/constraints.txt",
        "--extra-index-url=file:///srv/a/simple",
        "--extra-index-url=file:///srv/b/simple",
        "--index-url=https://mirror.example/simple",
    ]
    assert _uv_flags("") == []
    assert _uv_flags("global.timeout='60'\nglobal.no-cache-dir='true'") == []
