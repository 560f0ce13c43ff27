"""``agentgym train``'s evaluation before training: when failures outside the model leave none
of its episodes judged (an env server that is down), the run stops there with the causes, before
any update (it printed ``success 0.000 (0/0)`` and trained on)."""

from __future__ import annotations

import json
import socket

from agentgym.cli import main


def test_a_start_evaluation_that_judged_nothing_stops_the_run_with_its_causes(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: nothing listens
    out = tmp_path / "run"
    flags = ["--env", "agentgym/Remote-v0", "--env-kwargs", json.dumps({"url": url})]
    flags += ["--steps", "1", "--eval-episodes", "2", "--out", str(out), "--no-progress"]
    status = main(["train", *flags, "--set", "group_size=2", "--set", "batch_size=2"])
    err = capsys.readouterr().err
    assert status == 1
    assert "the evaluation before training: no episode could be judged" in err
    assert "2 x infra:" in err
    assert "ConnectionRefusedError" in err
    assert "Traceback" not in err
    assert not (out / "start_eval.json").exists()  # a resumed run evaluates again
    metrics = out / "metrics.jsonl"
    assert not metrics.exists() or not metrics.read_text().strip()  # no update ran
