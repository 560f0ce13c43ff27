"""``agentgym train`` and ``agentgym eval --output`` leave a trace of every episode: the token
ids, masks and sampling logprobs of exactly the episodes the trainer updated on, with the
trainer's own logprobs, advantages and each episode's outcome."""

from __future__ import annotations

import json

import numpy as np
from small_runs import train_args

from agentgym.cli import main
from agentgym.core.info import OUTCOMES
from agentgym.models import load
from agentgym.rollout import traces
from agentgym.trainers import trainer as trainer_module


def test_the_trace_holds_exactly_the_episodes_the_trainer_updated_on(tmp_path, monkeypatch, capsys):
    updated: list[list] = []  # per update, the episodes run_update trained on
    run_update = trainer_module.run_update

    def spy(inputs, batch, step):
        updated.append([s.episode for s in batch])
        return run_update(inputs, batch, step)

    monkeypatch.setattr(trainer_module, "run_update", spy)
    out = tmp_path / "run"
    args = train_args("--steps", "2", "--out", str(out), group_size=2, batch_size=4, max_turns=4)
    assert main(args) == 0
    assert "from agentgym.rollout.traces import read" in capsys.readouterr().out
    rows = traces.read(out)
    assert len(updated) == 2
    assert list(rows["update"].unique()) == [1, 2]
    for update, episodes in enumerate(updated, start=1):
        trained = rows[(rows["update"] == update) & rows["trained"]]
        assert len(trained) == len(episodes) == 4
        for (_, row), episode in zip(trained.iterrows(), episodes, strict=True):
            assert list(row["token_ids"]) == episode.token_ids
            assert list(row["loss_mask"]) == [bool(m) for m in episode.loss_mask]
            np.testing.assert_array_equal(row["logprobs"], np.float32(episode.logprobs))
            assert row["outcome"] in OUTCOMES
            assert row["outcome"] == episode.outcome
            assert row["task_id"] is not None
            assert row["seed"] == episode.seed
            mask = np.array(episode.loss_mask, dtype=bool)
            mine = np.asarray(row["trainer_logprobs"])
            assert np.all(mine[mask] < 0)
            assert np.all(mine[~mask] == 0)
            # the engine shares the trainer's weights: sampler and trainer agree closely
            assert np.abs(mine[mask] - np.float32(episode.logprobs)[mask]).max() < 1e-2
            assert len(row["advantages"]) == len(episode.token_ids)
            assert json.loads(row["messages"])[-1]["role"] in ("assistant", "user", "tool")
    text = traces.tokens(out, update=1, index=0)
    tokenizer = load()[1]
    sampled = text[text["loss_mask"]]
    assert "".join(sampled["text"]) == tokenizer.decode(list(sampled["id"]))


def test_eval_output_writes_a_trace_beside_it(tmp_path, capsys):
    folder = tmp_path / "model"
    model, tokenizer = load()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    frozen = json.dumps({"size": 2, "hole_prob": 0.0, "max_turns": 2})
    output = tmp_path / "eval.jsonl"
    flags = ["--env", "agentgym/FrozenLake-v0", "--env-kwargs", frozen, "--max-tokens", "4"]
    status = main(
        ["eval", "--model", str(folder), "--episodes", "4", "--output", str(output), *flags]
    )
    capsys.readouterr()
    assert status == 0
    records = [json.loads(line) for line in output.read_text().splitlines()]
    rows = traces.read(f"{output}.traces")
    assert len(rows) == len(records) == 4
    for (_, row), record in zip(rows.iterrows(), records, strict=True):
        assert traces.messages(row) == record["messages"]
        assert sum(row["loss_mask"]) > 0
        assert not row["trained"]
    off = tmp_path / "off.jsonl"
    status = main(["eval", "--model", str(folder), "--episodes", "2", "--output", str(off),
                   "--trace", "off", *flags])  # fmt: skip
    assert status == 0
    assert not (tmp_path / "off.jsonl.traces").exists()
