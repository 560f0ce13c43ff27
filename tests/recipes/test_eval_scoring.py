"""``agentgym eval``'s scoring and flags without a server: pass@k, per-episode records, turn
lengths, the engine flags and where the API key goes."""

from __future__ import annotations

import json
from math import comb

import numpy as np
import pytest

from agentgym.cli import main
from agentgym.core.types import Episode, Turn
from agentgym.error import ConfigError
from agentgym.recipes.engines import EngineSpec, make_engine
from agentgym.recipes.evaluation import EvalRun, pass_at_k, turn_tokens


def _exact(n: int, c: int, k: int) -> float:
    """pass@k by its definition: 1 - C(n - c, k) / C(n, k)."""
    return 1.0 - comb(n - c, k) / comb(n, k)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # pass@1 is the fraction that passed
        (5, 2, 2, 0.7),  # 1 - C(3, 2) / C(5, 2) = 1 - 3/10
        (4, 1, 2, 0.5),  # 1 - C(3, 2) / C(4, 2) = 1 - 3/6
        (10, 3, 5, 1 - 21 / 252),  # C(7, 5) = 21, C(10, 5) = 252
        (4, 0, 4, 0.0),  # nothing passed
        (3, 3, 1, 1.0),  # everything passed
        (10, 6, 5, 1.0),  # n - c < k: every k-subset holds a pass
    ],
)
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(_exact(n, c, k), abs=1e-12)


def test_pass_at_k_matches_the_definition_for_large_n():
    for n, c, k in [(200, 13, 1), (200, 13, 10), (200, 13, 100), (64, 1, 32)]:
        assert pass_at_k(n, c, k) == pytest.approx(_exact(n, c, k), rel=1e-9)


@pytest.mark.parametrize(("n", "c", "k"), [(4, 1, 5), (4, 1, 0), (4, 5, 1), (3, -1, 1)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ConfigError, match="pass_at_k"):
        pass_at_k(n, c, k)


def _episode(group: int, sample: int, success: bool | None, reward: float) -> Episode:
    info = {} if success is None else {"success": success}
    info |= {"state": np.int64(3), "board": np.zeros(2), "nan": float("nan"), "obj": object()}
    turn = Turn({"role": "assistant", "content": "x"}, (), reward, True, False, info)
    episode = Episode("agentgym/FrozenLake-v0", group=group, seed=100 + group)
    episode.messages = [{"role": "user", "content": "go"}, turn.action]
    episode.turns = [turn]
    episode.reset_info = {"task_id": f"t{group}", "tools": [{"name": "move"}]}
    episode.metrics = {"sample": float(sample), "sampled_tokens": 3.0}
    return episode


def test_eval_run_pass_at_k_per_task_and_records():
    outcomes = [[True, False, False], [False] * 3, [True, True, False], [None, True, True]]
    episodes = [
        _episode(g, s, ok, 1.0 if ok else 0.0)
        for g, row in enumerate(outcomes)
        for s, ok in enumerate(row)
    ]
    run = EvalRun(episodes, samples=3, seconds=2.0, api="tokens")
    # the last task's env did not judge one sample: it is left out of pass@k
    expected = {k: sum(_exact(3, c, k) for c in (1, 0, 2)) / 3 for k in (1, 2, 3)}
    assert run.pass_at((1, 2, 3)) == pytest.approx(expected)
    summary = run.to_dict((1, 3))
    assert summary["tasks"] == 4
    assert summary["samples"] == 3
    assert summary["tokens"] == 36
    assert summary["success_unknown"] == 1
    assert summary["pass_at_k"]["1"] == pytest.approx(expected[1])
    rows = list(run.records())
    assert len(rows) == 12
    assert [(r["task"], r["sample"]) for r in rows[:3]] == [(0, 0), (0, 1), (0, 2)]
    first = rows[0]
    assert set(first) >= {"task_id", "sample", "seed", "messages", "reward", "success", "info"}
    assert (first["task_id"], first["seed"], first["success"]) == ("t0", 100, True)
    assert first["info"]["state"] == 3  # numpy scalar made plain
    assert first["info"]["board"] == [0.0, 0.0]
    assert first["info"]["nan"] is None
    assert first["info"]["obj"].startswith("<object: <object object at")  # json_safe's policy
    json.dumps(rows)  # every row is JSON
    table = run.table((1, 3))
    assert "pass@3" in table
    assert "success unknown" in table


def test_turn_tokens_by_env_family():
    assert turn_tokens("agentgym/FrozenLake-v0") == 16
    assert turn_tokens("agentgym/Math-v0") == 1024
    assert turn_tokens("agentgym/Code-MultiTurn-v0") == 1024
    assert turn_tokens("agentgym/SWE-v0") > turn_tokens("agentgym/Math-v0")


def test_engine_spec_refuses_incomplete_or_mixed_flags():
    with pytest.raises(ConfigError, match="engine_url/model"):
        EngineSpec("openai", url="http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="engine_url"):
        EngineSpec("hf", url="http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="api"):
        EngineSpec("hf", api="chat")
    with pytest.raises(ConfigError, match="NAME of an environment variable") as refused:
        EngineSpec("openai", url="http://h", model="m", api_key_env="sk-live-123")
    assert "sk-live-123" not in str(refused.value)
    with pytest.raises(ConfigError, match="engine"):
        EngineSpec("vllm")  # type: ignore[arg-type]


def test_api_key_comes_from_the_environment_and_stays_out_of_the_spec(monkeypatch):
    secret = "sk-sentinel-7f3c9a"
    monkeypatch.setenv("AGENTGYM_TEST_KEY", secret)
    spec = EngineSpec("openai", url="http://h", model="m", api_key_env="AGENTGYM_TEST_KEY")
    assert secret not in json.dumps(spec.to_dict())
    assert secret not in repr(spec)
    engine = make_engine(spec)
    assert engine._http._client.headers["Authorization"] == f"Bearer {secret}"
    monkeypatch.delenv("AGENTGYM_TEST_KEY")
    with pytest.raises(ConfigError, match="AGENTGYM_TEST_KEY"):
        spec.api_key()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--episodes", "5", "-n", "2"], "--episodes"),
        (["--tasks", "3", "--episodes", "5"], "--tasks"),
        (["-n", "2", "--pass-k", "1,3"], "--pass-k"),
        (["--pass-k", "one"], "--pass-k"),
        (["--samples", "0"], "--samples"),
        (["--engine", "openai"], "engine_url/model"),
        (["--engine-url", "http://127.0.0.1:1"], "engine_url"),
        (["--env", "agentgym/FrozenLke-v0"], "FrozenLake-v0"),  # did you mean
        (["--max-tokens", "0"], "max_tokens"),
    ],
)
def test_eval_flags_refused_before_anything_runs(flags, says, capsys):
    assert main(["eval", *flags]) == 2
    assert says in capsys.readouterr().err


def test_eval_help_names_chat_evaluation(capsys):
    assert main(["eval", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--engine", "--engine-url", "--samples", "--pass-k", "--output", "--api"):
        assert flag in text
    assert "chat API" in text


def test_a_chat_only_server_is_evaluated_through_its_chat_api(monkeypatch):
    """A server without /v1/completions (a hosted API) and no tokenizer: --api auto falls
    back to chat; the key from the environment is sent; the episodes are played."""
    import httpx

    from agentgym.core.aio import run_sync
    from agentgym.inference import OpenAIEngine
    from agentgym.recipes.eval_cli import _use_chat
    from agentgym.recipes.evaluation import evaluate_samples

    seen: list[httpx.Request] = []

    def server(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path != "/v1/chat/completions":
            return httpx.Response(404, json={"error": {"message": "not found"}})
        body = json.loads(request.content)
        moves = sum(m["role"] == "assistant" for m in body["messages"])
        move = "```right```" if moves == 0 else "```down```"  # the 2x2 map's way to the goal
        message = {"role": "assistant", "content": move}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return httpx.Response(200, json={"choices": [choice]})

    monkeypatch.setenv("OPENAI_API_KEY", "sk-sentinel-chat")
    spec = EngineSpec("openai", url="https://api.example.com/v1", model="hosted")
    engine = OpenAIEngine(
        spec.url, spec.model, spec.api_key(), transport=httpx.MockTransport(server)
    )
    assert run_sync(_use_chat(spec, engine)) is True
    kwargs = {"size": 2, "hole_prob": 0.0, "tool": False}
    run = evaluate_samples(
        engine, "agentgym/FrozenLake-v0", tasks=3, samples=2, seed=0, max_tokens=16,
        concurrency=4, env_kwargs=kwargs, chat=True,
    )  # fmt: skip
    run_sync(engine.close())
    assert run.api == "chat"
    assert run.result.success_rate == 1.0
    assert run.pass_at([1, 2]) == {1: 1.0, 2: 1.0}
    assert [(r["task"], r["sample"], r["turns"]) for r in run.records()] == [
        (t, s, 2) for t in range(3) for s in range(2)
    ]
    assert all(r.headers["Authorization"] == "Bearer sk-sentinel-chat" for r in seen)


@pytest.mark.parametrize("api", ["auto", "chat"])
def test_a_server_that_is_down_is_an_error_naming_its_url(api, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: nothing listens
    flags = ["--engine", "openai", "--engine-url", url, "--model", "m", "--api", api]
    assert main(["eval", "--episodes", "2", "--tokenizer", "agentgym-tiny", *flags]) == 1
    assert url in capsys.readouterr().err
