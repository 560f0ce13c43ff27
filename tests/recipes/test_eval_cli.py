"""``agentgym eval`` is honest about what it could not judge, and evaluates a run's env: an
unreachable env server is an error with its cause in the summary (it was ``success 0.000 (0/0)``,
``pass@1 nan`` and exit 0), and ``--model <run folder>`` plays the run's env and arguments
(it played FrozenLake)."""

from __future__ import annotations

import json
import socket

import pytest

from agentgym.cli import main
from agentgym.models import load


def _report(printed: str) -> dict:
    """The JSON report of ``--json`` (a library may have logged a line to stdout before it)."""
    return json.loads(
        printed[printed.index("\n{") + 1 :] if not printed.startswith("{") else printed
    )


@pytest.fixture
def closed_url() -> str:
    """A localhost URL that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_eval_against_a_closed_port_fails_with_the_cause_in_the_summary(closed_url, capsys):
    kwargs = json.dumps({"url": closed_url})
    status = main(
        ["eval", "--env", "agentgym/Remote-v0", "--env-kwargs", kwargs, "--episodes", "3"]
    )
    printed = capsys.readouterr()
    assert status == 1
    assert "none of 3 episodes judged; 3 failed outside the model" in printed.out
    assert "3 x infra:" in printed.out
    assert "ConnectionRefusedError" in printed.out
    assert "nan" not in (printed.out + printed.err).lower()
    assert "no episode could be judged" in printed.err
    assert "Traceback" not in printed.err


def test_eval_of_a_run_folder_plays_the_runs_env_unless_env_says_otherwise(
    tmp_path, closed_url, capsys
):
    folder = tmp_path / "run"
    model, tokenizer = load()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    recorded = {"env": "agentgym/Remote-v0", "env_kwargs": {"url": closed_url}}
    (folder / "run.json").write_text(json.dumps({"run": recorded}))
    status = main(["eval", "--model", str(folder), "--episodes", "2", "--json"])
    report = _report(capsys.readouterr().out)
    assert status == 1  # the run's server is down: nothing judged
    assert report["env"] == "agentgym/Remote-v0"
    assert report["env_kwargs"] == {"url": closed_url}
    assert closed_url.rsplit(":", 1)[1] in report["failure_causes"][0]["example"]
    frozen = json.dumps({"size": 2, "hole_prob": 0.0, "max_turns": 2})
    flags = ["--env", "agentgym/FrozenLake-v0", "--env-kwargs", frozen, "--max-tokens", "4"]
    status = main(["eval", "--model", str(folder), "--episodes", "2", "--json", *flags])
    report = _report(capsys.readouterr().out)
    assert status == 0
    assert report["env"] == "agentgym/FrozenLake-v0"
    assert report["failed"] == 0
