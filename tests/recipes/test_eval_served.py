"""``agentgym eval`` of a model served by ``agentgym serve`` (a separate process) equals the
same model evaluated in-process with the same seeds: through the OpenAI API's completions (token
ids) and chat, and through SGLang's native API, which agentgym serve speaks too."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from agentgym.cli import main
from agentgym.models import load

pytestmark = pytest.mark.slow  # ~1.5 minutes: a server start and eight small evaluations

AGENTGYM = str(Path(sys.executable).with_name("agentgym"))
SECRET = "sk-agentgym-sentinel-3b9e1d"
ENV_KWARGS = "size=3,hole_prob=0.1,max_turns=6,tool=false,random_start=true"
RECORD_KEYS = {"task_id", "task", "sample", "seed", "messages", "reward", "success", "info"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``(url, model dir)``: the shipped tiny policy saved to a directory and served from it."""
    folder = tmp_path_factory.mktemp("tiny")
    model, tokenizer = load()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    port = _free_port()
    command = [AGENTGYM, "serve", "--model", str(folder), "--port", str(port)]
    command += ["--model-name", "tiny-served"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(240):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, server.communicate()[1][-3000:]
                time.sleep(0.5)
        else:
            raise AssertionError("agentgym serve did not answer within 120 s")
        yield f"http://127.0.0.1:{port}", folder
    finally:
        server.terminate()
        server.wait(timeout=30)


def _evaluate(capsys, out: Path, *flags: str) -> tuple[dict, list[dict], str]:
    """``(summary, JSONL rows, everything printed)`` of one ``agentgym eval --json``."""
    args = ["eval", "--env", "agentgym/FrozenLake-v0", "--env-kwargs", ENV_KWARGS, "--json"]
    args += ["--tasks", "8", "-n", "2", "--concurrency", "8", "--output", str(out), *flags]
    status = main(args)
    printed = capsys.readouterr()
    assert status == 0, printed.err[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return json.loads(printed.out), rows, printed.out + printed.err


def _outcomes(rows: list[dict]) -> list[tuple]:
    return [(r["task"], r["sample"], r["seed"], r["reward"], r["success"]) for r in rows]


@pytest.mark.parametrize("temperature", ["0", "1"])
def test_served_eval_equals_in_process(served, tmp_path, capsys, monkeypatch, temperature):
    url, folder = served
    monkeypatch.setenv("AGENTGYM_EVAL_TEST_KEY", SECRET)
    common = ["--temperature", temperature, "--pass-k", "1,2"]
    in_process = ["--model", str(folder), *common]
    local, local_rows, _ = _evaluate(capsys, tmp_path / "local.jsonl", *in_process)
    openai = ["--engine", "openai", "--engine-url", url, "--model", "tiny-served"]
    openai += ["--api-key-env", "AGENTGYM_EVAL_TEST_KEY"]
    ways = {
        "tokens": [*openai, "--api", "completions"],
        "chat": [*openai, "--api", "chat"],
        "sglang": ["--engine", "sglang", "--engine-url", url],  # agentgym serve's native API
    }
    for way, flags in ways.items():
        out = tmp_path / f"{way}.jsonl"
        summary, rows, printed = _evaluate(
            capsys, out, *flags, "--tokenizer", str(folder), *common
        )
        assert summary["api"] == ("chat" if way == "chat" else "tokens")
        for key in ("success_rate", "successes", "mean_return", "pass_at_k", "episodes"):
            assert summary[key] == local[key], (way, key)
        assert _outcomes(rows) == _outcomes(local_rows)
        assert [r["messages"] for r in rows] == [r["messages"] for r in local_rows]
        assert summary["tokens"] == local["tokens"] > 0
        assert SECRET not in printed
        assert SECRET not in out.read_text()
    assert len(local_rows) == local["episodes"] == 16  # one line per episode
    assert all(set(row) >= RECORD_KEYS for row in local_rows)
    assert sorted(local["pass_at_k"]) == ["1", "2"]
    if temperature == "1":  # sampled: some tasks solved, some not (the comparison means much)
        assert 0 < local["successes"] < 16
