"""The ``agentgym`` command: ``list`` and ``play`` (driven through stdin)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

from agentgym.cli import main, parse_kwargs
from agentgym.envs.frozenlake import generate_map

ENV_ID = "agentgym/FrozenLake-v0"
STEPS = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}


def shortest_moves(rows: tuple[str, ...]) -> list[str]:
    size = len(rows)
    came: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {(0, 0): None}
    queue = deque([(0, 0)])
    while queue:
        here = queue.popleft()
        if rows[here[0]][here[1]] == "G":
            break
        for move, (dr, dc) in STEPS.items():
            r, c = here[0] + dr, here[1] + dc
            if 0 <= r < size and 0 <= c < size and rows[r][c] != "H" and (r, c) not in came:
                came[(r, c)] = (here, move)
                queue.append((r, c))
    moves = []
    while came[here] is not None:
        here, move = came[here]  # type: ignore[misc]
        moves.append(move)
    return moves[::-1]


def run(monkeypatch, capsys, argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --- list ----------------------------------------------------------------------------------------


def test_list_shows_frozenlake_with_its_metadata(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, ["list"])
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith(ENV_ID))
    for field in ("FrozenLake", "grid,multi-turn,tools,procedural", "[-3.2, 1]", "Reach the goal"):
        assert field in line


def test_list_json_and_filters(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, ["list", "--json", "--tag", "tools"])
    envs = {env["id"]: env for env in json.loads(out)}
    assert code == 0
    assert ENV_ID in envs
    assert envs[ENV_ID]["family"] == "FrozenLake"
    assert envs[ENV_ID]["reward_range"] == [-3.2, 1.0]
    _, out, _ = run(monkeypatch, capsys, ["list", "--json", "--family", "NoSuchFamily"])
    assert json.loads(out) == []


# --- play ----------------------------------------------------------------------------------------


def test_play_solves_a_task_through_stdin(monkeypatch, capsys):
    moves = shortest_moves(generate_map(5, 4, 0.2))
    # one move as a line, one as a tool call, the rest as fenced blocks over several lines
    lines = [moves[0]]
    if len(moves) > 1:
        call = {"name": "move", "arguments": {"direction": moves[1]}}
        lines.append(f"<tool_call>{json.dumps(call)}</tool_call>")
    lines += [f"```\n{move}\n```" for move in moves[2:]]
    code, out, err = run(
        monkeypatch, capsys, ["play", ENV_ID, "--task-id", "5"], "\n".join([*lines, ":q"]) + "\n"
    )
    assert code == 0, err
    assert "=== New episode (task 5)" in out
    assert "[system]" in out
    assert "[user]\nP " in out
    assert 'move(direction: "left"|"right"|"up"|"down")' in out
    assert "[tool move]" in out
    assert out.count("reward=0 terminated=False") == len(moves) - 1
    assert "reward=1 terminated=True truncated=False" in out
    assert "Episode over. Return: 1" in out


def test_play_offers_a_new_episode_and_passes_kwargs(monkeypatch, capsys):
    args = ["play", ENV_ID, "--seed", "0", "--kw", "size=2", "hole_prob=0", "--kw", "max_turns=5"]
    code, out, _ = run(monkeypatch, capsys, args, "right\ndown\n\nhello\n:q\n")
    assert code == 0
    assert out.count("=== New episode") == 2
    assert "P F\nF G" in out
    assert "Episode over. Return: 1" in out
    assert "reward=-0.1" in out  # "hello" in the second episode


def test_play_reset_command(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, ["play", ENV_ID, "--seed", "1"], "down\n:r\n:q\n")
    assert code == 0
    assert out.count("=== New episode") == 2


@pytest.mark.parametrize("stdin", ["", ":q\n", "down\n", "```\ndown\n", "\n\n"])
def test_play_quits_cleanly_on_q_and_eof(monkeypatch, capsys, stdin):
    code, _, err = run(monkeypatch, capsys, ["play", ENV_ID, "--seed", "0"], stdin)
    assert code == 0
    assert "Traceback" not in err


def test_play_unknown_env_suggests_the_right_id(monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, ["play", "FrozenLake-v0"])
    assert code == 2
    assert "Did you mean 'agentgym/FrozenLake-v0'?" in err
    assert "Traceback" not in err
    assert out == ""


@pytest.mark.parametrize(
    ("kw", "message"),
    [("size=1", "size=1"), ("size", "KEY=VALUE"), ("colour=3", "colour")],
)
def test_play_bad_kwargs_exit_2_with_a_message(monkeypatch, capsys, kw, message):
    code, _, err = run(monkeypatch, capsys, ["play", ENV_ID, "--kw", kw])
    assert code == 2
    assert message in err


def test_play_rejected_task_id_exits_2(monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, ["play", ENV_ID, "--task-id", "-3"])
    assert code == 2
    assert "task_id" in err
    assert "Traceback" not in err


def test_parse_kwargs_reads_json_then_strings():
    parsed = parse_kwargs(["a=5", "b=true", "c=0.5", "d=hello", "e=[1, 2]", "f=", "g=x=y"])
    assert parsed == {"a": 5, "b": True, "c": 0.5, "d": "hello", "e": [1, 2], "f": "", "g": "x=y"}


def test_no_subcommand_and_help(monkeypatch, capsys):
    assert run(monkeypatch, capsys, [])[0] == 2
    code, out, _ = run(monkeypatch, capsys, ["--help"])
    assert code == 0
    assert "play" in out
    assert "list" in out
    assert run(monkeypatch, capsys, ["nonsense"])[0] == 2


# --- the installed command ------------------------------------------------------------------------


def test_console_script_plays_an_episode():
    script = Path(sys.executable).with_name("agentgym")
    assert script.exists(), "the agentgym console script is not installed next to python"
    result = subprocess.run(
        [str(script), "play", ENV_ID, "--kw", "size=2", "hole_prob=0"],
        input="```right```\ndown\n:q\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Episode over. Return: 1" in result.stdout


def test_python_dash_m_agentgym():
    result = subprocess.run(
        [sys.executable, "-m", "agentgym", "list"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert ENV_ID in result.stdout
    result = subprocess.run(
        [sys.executable, "-m", "agentgym", "play", "agentgym/FrozenLake"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "Did you mean 'agentgym/FrozenLake-v0'?" in result.stderr
    assert "Traceback" not in result.stderr
