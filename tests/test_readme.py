"""The README runs as written: each ```python block in a fresh interpreter, each shell command
either run here, parsed by the real ``agentgym`` parser, or found in the Makefile / ``.ci/run``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from agentgym.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
CI = (ROOT / ".ci" / "run").read_text()
AGENTGYM = str(Path(sys.executable).with_name("agentgym"))


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, flags=re.MULTILINE | re.DOTALL)


def shell_commands() -> list[str]:
    """Each command line of the README's bash blocks, without its comment."""
    lines = [line for block in blocks("bash") for line in block.splitlines()]
    commands = (line.split("  #")[0].strip() for line in lines)
    return [command for command in commands if command]


def run(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    # One torch thread: the 2-core CI machine runs other work beside the tests. The deadline only
    # catches a hang: the fit example took 48 s on a quiet machine and over 240 s (the old deadline)
    # under CI's load.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_readme_has_python_and_shell_examples() -> None:
    # Guards the extraction below: a changed fence style must not make every test vacuous.
    assert len(blocks("python")) >= 5
    assert len(shell_commands()) >= 10


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_block_runs(index: int, tmp_path: Path) -> None:
    code = blocks("python")[index]
    done = run([sys.executable, "-c", code], cwd=tmp_path)
    assert done.returncode == 0, f"README python block {index}:\n{code}\n{done.stderr[-3000:]}"


def test_readme_is_a_guide_of_at_most_200_lines() -> None:
    # Studies, histories and reference tables go to docs/; the README says what it is and how to
    # start.
    assert len(README.splitlines()) <= 200


def test_make_commands_are_makefile_targets() -> None:
    targets = set(re.findall(r"^([a-z][a-z-]*):", MAKEFILE, flags=re.MULTILINE))
    makes = [c.split()[1] for c in shell_commands() if c.startswith("make ")]
    assert "train" in makes
    assert "test" in makes
    assert set(makes) <= targets
    assert "make test" in CI  # the README says CI runs make test


def test_pip_extras_exist() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    named = [
        m.group(1)
        for c in shell_commands()
        if c.startswith("pip install") and (m := re.search(r"agentgymnasium\[(\w+)\]", c))
    ]
    assert len(named) >= 5
    assert set(named) <= set(extras)


def test_agentgym_commands_parse() -> None:
    """Every ``agentgym ...`` line is accepted by the real parser: flags, choices, subcommands."""
    commands = [c for c in shell_commands() if c.startswith("agentgym ")]
    assert {c.split()[1] for c in commands} >= {"train", "eval", "serve", "list"}
    parser = build_parser()
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])
        assert args.command == command.split()[1]


def test_env_table_matches_agentgym_list(tmp_path: Path) -> None:
    done = run([AGENTGYM, "list", "--json"], cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = {
        row["id"]: (row["family"], ",".join(row["extras"]) or "-", row["reward_range"])
        for row in json.loads(done.stdout)
        if row["id"].startswith("agentgym/") and not row.get("roles")  # the single-agent envs
    }
    row = r"^\| `(agentgym/[^`]+)` \| (\w+) \| ([\w,-]+) \| \[([^\]]+)\] \|"
    rows = re.findall(row, README, flags=re.MULTILINE)
    table = {
        env_id: (family, extras, [float(x) for x in reward.split(",")])
        for env_id, family, extras, reward in rows
    }
    assert table == listed


@pytest.mark.timeout(1800)
def test_train_eval_serve_commands_run(tmp_path: Path) -> None:
    """The README's train, eval and serve commands, made small, on one run folder."""
    # The other flags in the README's commands are checked by test_agentgym_commands_parse.
    train = [AGENTGYM, "train", "--env", "agentgym/FrozenLake-v0", "--steps", "1"]
    train += ["--set", "group_size=2", "--set", "batch_size=4", "--max-turns", "4"]
    train += ["--eval-episodes", "0", "--out", "runs/fl", "--no-progress"]
    done = run(train, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "runs" / "fl" / "run.json").is_file()
    evaluate = [AGENTGYM, "eval", "--env", "agentgym/FrozenLake-v0", "--model", "runs/fl"]
    done = run([*evaluate, "--episodes", "4", "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert 0.0 <= result["success_rate"] <= 1.0
    [checkpoint] = (tmp_path / "runs" / "fl" / "checkpoints").glob("step-*")
    assert serves(checkpoint, tmp_path) == 200


def serves(checkpoint: Path, cwd: Path) -> int:
    """Status of ``GET /health`` from ``agentgym serve --model <checkpoint>``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [AGENTGYM, "serve", "--model", str(checkpoint), "--port", str(port)]
    server = subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(240):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    return r.status
            except OSError:
                assert server.poll() is None, server.communicate()[1][-3000:]
                time.sleep(0.5)
        raise AssertionError("agentgym serve did not answer within 120 s")
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_relative_links_point_at_files() -> None:
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", README)
    assert "docs/README.md" in targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert missing == []
