"""The viewer's JSON API and command line on a real tiny run, without a browser: pages and
filters agree with the trace read whole, one episode's tokens with ``traces.tokens``, a new
update file shows up, and a missing, truncated or corrupt trace is named in a clear error."""

from __future__ import annotations

import hashlib
import shlex
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from starlette.testclient import TestClient

from agentgym.cli import build_parser, main
from agentgym.rollout import traces
from agentgym.view import Filters, RunData, TraceFileError, make_app


@pytest.fixture(scope="module")
def client(tiny_run: Path) -> TestClient:
    return TestClient(make_app([RunData(tiny_run)]))


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*")) if p.is_file()
    }  # fmt: skip


def test_pages_and_filters_agree_with_the_whole_trace(client, tiny_run):
    whole = traces.read(tiny_run)
    page = client.get("/api/episodes", params={"limit": 3}).json()
    assert page["total"] == len(whole) == 8
    assert [(e["update"], e["index"]) for e in page["episodes"]] == list(
        zip(whole["update"][:3], whole["index"][:3], strict=True)
    )
    assert "token_ids" not in page["episodes"][0]  # lists never carry token columns
    second = client.get("/api/episodes", params={"limit": 3, "offset": 6}).json()
    assert len(second["episodes"]) == 2
    outcome = whole["outcome"].iloc[0]
    cases = [
        ({"outcome": outcome}, whole["outcome"] == outcome),
        ({"success": "false"}, whole["success"] == False),  # noqa: E712
        ({"reward_min": "-0.25"}, whole["reward"] >= -0.25),
        ({"reward_max": "-0.25"}, whole["reward"] <= -0.25),
        ({"task_id": whole["task_id"].iloc[0]}, whole["task_id"] == whole["task_id"].iloc[0]),
        ({"update_min": "2"}, whole["update"] >= 2),
        ({"update_max": "1", "outcome": outcome},
         (whole["update"] <= 1) & (whole["outcome"] == outcome)),
        ({"text": "no such text in any conversation"}, whole["update"] < 0),
    ]  # fmt: skip
    for params, expected in cases:
        found = client.get("/api/episodes", params={**params, "limit": 100}).json()
        assert found["total"] == int(expected.sum()), params
        assert all(e["outcome"] for e in found["episodes"])
    role = traces.messages(whole.iloc[0])[0]["content"][:20]
    assert client.get("/api/episodes", params={"text": role}).json()["total"] >= 1
    bad = client.get("/api/episodes", params={"reward_min": "lots"})
    assert bad.status_code == 400
    assert "reward_min='lots'" in bad.json()["error"]


def test_an_episode_has_its_tokens_conversation_and_task_history(client, tiny_run):
    episode = client.get("/api/episode", params={"update": 2, "index": 1}).json()
    expected = traces.tokens(tiny_run, update=2, index=1)
    assert episode["tokens"]["text"] == list(expected["text"])
    assert episode["tokens"]["loss_mask"] == list(expected["loss_mask"])
    np.testing.assert_allclose(episode["tokens"]["advantage"], expected["advantage"], rtol=1e-6)
    assert episode["messages"][-1]["role"] in ("assistant", "user", "tool")
    assert len(episode["reward_components"]) == episode["turns"]
    history = client.get("/api/task", params={"task_id": episode["task_id"]}).json()
    assert (2, 1) in {(e["update"], e["index"]) for e in history["episodes"]}
    assert {e["task_id"] for e in history["episodes"]} == {episode["task_id"]}
    missing = client.get("/api/episode", params={"update": 9, "index": 0})
    assert missing.status_code == 422
    assert "update=9 index=0" in missing.json()["error"]


def test_an_update_shows_its_groups_advantages_and_the_look_here_lists(client, tiny_run):
    whole = traces.read(tiny_run)
    rows = client.get("/api/update", params={"update": 1}).json()["episodes"]
    assert len(rows) == int((whole["update"] == 1).sum())
    for row in rows:
        source = whole[(whole["update"] == 1) & (whole["index"] == row["index"])].iloc[0]
        mask = np.asarray(source["loss_mask"], dtype=bool)
        assert row["advantage"] == pytest.approx(np.asarray(source["advantages"])[mask].mean())
    look = client.get("/api/look").json()
    longest = [e["answer_tokens"] for e in look["longest answers"]]
    assert longest == sorted(longest, reverse=True)
    assert longest[0] == max(int(np.sum(m)) for m in whole["loss_mask"])
    drift = look["largest drift"][0]
    source = whole[(whole["update"] == drift["update"]) & (whole["index"] == drift["index"])].iloc[
        0
    ]
    mask = np.asarray(source["loss_mask"], dtype=bool)
    gap = np.abs(np.asarray(source["trainer_logprobs"]) - np.asarray(source["logprobs"]))[mask]
    assert drift["drift"] == pytest.approx(gap.max())
    run = client.get("/api/run").json()
    assert run["config"]["run"]["env"] == "agentgym/FrozenLake-v0"
    assert [m["step"] for m in run["metrics"]] == [1, 2]


def test_a_new_update_file_shows_up_on_the_next_poll(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("checkpoints"))
    client = TestClient(make_app([RunData(run)]))
    before = client.get("/api/updates").json()["updates"]
    assert client.get("/api/episodes").json()["total"] == 8
    table = pq.read_table(run / "traces" / "update-00000002.parquet")
    table = table.set_column(0, "update", pc.add(table["update"], pa.scalar(1, pa.int32())))
    pq.write_table(table, run / "traces" / "update-00000003.parquet")
    after = client.get("/api/updates").json()["updates"]
    assert [u["file"] for u in after] == [*(u["file"] for u in before), "update-00000003.parquet"]
    assert client.get("/api/episodes", params={"update_min": 3}).json()["total"] == 4


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "not a trace"])
def test_a_damaged_trace_is_named_with_what_is_wrong(tiny_run, tmp_path, capsys, damage):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("checkpoints"))
    bad = run / "traces" / "update-00000002.parquet"
    data = bad.read_bytes()
    if damage == "truncated":
        bad.write_bytes(data[: len(data) // 2])
    elif damage == "corrupt":
        bad.write_bytes(data[:4] + bytes(len(data) - 8) + data[-4:])  # magic kept, body zeroed
    else:
        pq.write_table(pq.read_table(bad, columns=["token_ids"]), bad)
    digest = _digest(run)
    assert main(["view", str(run), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err
    assert {"truncated": "truncated or corrupt", "corrupt": "corrupt",
            "not a trace": "lacks the columns"}[damage] in err  # fmt: skip
    with pytest.raises(TraceFileError, match="update-00000002"):
        RunData(run).table()
    page = TestClient(make_app([RunData(run)])).get("/")
    assert page.status_code == 422
    assert str(bad) in page.text
    assert "cannot be shown" in page.text
    assert _digest(run) == digest  # the viewer never writes


def test_a_missing_path_or_a_folder_without_a_trace_is_a_clear_cli_error(tmp_path, capsys):
    assert main(["view", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'nowhere'}: does not exist" in err
    assert "Fix: pass a run folder" in err
    assert main(["view", str(tmp_path)]) == 2
    assert "holds no trace" in capsys.readouterr().err
    assert main(["view", str(tmp_path), "--port", "70000"]) == 2
    assert "--port 70000" in capsys.readouterr().err


def test_agentgym_train_ends_with_the_view_command_for_its_run(tiny_run, capsys):
    last = (tiny_run.parent / "train.stdout").read_text().splitlines()[-1]
    assert last == f"see the run in a browser: agentgym view {tiny_run} (docs/view.md)"
    command = shlex.split(last.split(": ", 1)[1].removesuffix(" (docs/view.md)"))
    parsed = build_parser().parse_args([*command[1:], "--port", "0"])
    assert (parsed.command, parsed.path) == ("view", str(tiny_run))
    assert RunData(parsed.path).table().num_rows == 8


def test_a_second_run_is_served_beside_the_first(tiny_run, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(tiny_run / "traces", other / "traces")
    (other / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 0.5}\n')
    client = TestClient(make_app([RunData(tiny_run), RunData(other)]))
    first, second = client.get("/api/run").json(), client.get("/api/run?run=1").json()
    assert first["runs"] == second["runs"] == [str(tiny_run), str(other)]
    assert second["metrics"] == [{"step": 1, "reward_mean": 0.5}]
    assert second["config"] is None
    wrong = client.get("/api/run?run=2")
    assert wrong.status_code == 400
    assert "run=2 is not one of the 2 runs" in wrong.json()["error"]


def test_an_eval_output_or_one_trace_file_is_viewed_too(tiny_run, tmp_path):
    output = tmp_path / "e.jsonl"  # agentgym eval --output e.jsonl writes e.jsonl.traces/
    output.write_text("")
    shutil.copytree(tiny_run / "traces", tmp_path / "e.jsonl.traces")
    assert RunData(output).search(Filters()).get("total") == 8
    assert RunData(output).run_info()["metrics"] == []
    one = RunData(tiny_run / "traces" / "update-00000002.parquet")
    assert [e["update"] for e in one.search(Filters())["episodes"]] == [2, 2, 2, 2]
    assert one.episode(2, 3)["tokens"]["text"]
