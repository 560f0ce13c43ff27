"""Episode traces written by ``fit``: the trainer's numbers come from the update itself, a
trace keeps what its mode says and warns before its budget drops anything, and a resume
rewrites exactly the updates after its checkpoint."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from agentgym import models
from agentgym.error import ConfigError
from agentgym.rollout import traces
from agentgym.rollout.traces import Trace, TraceBudgetWarning
from agentgym.trainers import checkpoint, fit, make

from .ds_step import FIT_CONFIG, SyntheticSource, synthetic_episodes
from .test_checkpoint import RESUME_CONFIGS, batches_for


def _tokens_of(config: dict) -> tuple[list, torch.Tensor, torch.Tensor]:
    trainer = make("grpo", policy=models.load(seed=0), config=config)
    trainer.keep_tokens()
    episodes = synthetic_episodes(2, 4, seed=3)
    trainer.step(episodes)
    kept = trainer.last_tokens
    assert kept is not None
    return episodes, kept.logprobs, kept.advantages


def test_the_trainers_logprobs_are_pi_old_whether_recomputed_or_read_from_the_update():
    # two minibatches: π_old is recomputed before the update; one: read from its only forward
    one = {**FIT_CONFIG, "num_minibatches": 1, "kl_beta": 0.0}
    episodes, recomputed, advantages = _tokens_of({**one, "num_minibatches": 2})
    _, from_forward, advantages_one = _tokens_of(one)
    mask = torch.zeros_like(recomputed, dtype=torch.bool)
    for i, episode in enumerate(episodes):
        mask[i, : len(episode.loss_mask)] = torch.tensor(episode.loss_mask, dtype=torch.bool)
    assert torch.all(recomputed[~mask] == 0)
    assert torch.all(from_forward[~mask] == 0)
    assert torch.all(recomputed[mask] < 0)  # a log-probability on every sampled token
    torch.testing.assert_close(from_forward, recomputed, rtol=0, atol=1e-5)
    # the synthetic sampling logprobs are made up (-5..-9): the trainer's are its own
    sampling = torch.tensor(
        [lp for e in episodes for lp, m in zip(e.logprobs, e.loss_mask, strict=True) if m]
    )
    assert not torch.allclose(recomputed[mask], sampling, atol=0.1)
    # group-normalised: one advantage per episode on its sampled tokens, summing to 0 per group
    per_episode = torch.stack([advantages[i][mask[i]][0] for i in range(len(episodes))])
    assert torch.allclose(per_episode.view(2, 4).sum(1), torch.zeros(2), atol=1e-5)
    torch.testing.assert_close(advantages_one, advantages)


def _fit(out, steps: int, trace: Trace | None, **more) -> list:
    trainer = make("grpo", policy=models.load(seed=0), config=FIT_CONFIG)
    return fit(trainer, SyntheticSource(4), steps=steps, out=out, trace=trace, **more)


def test_every_episode_of_every_update_with_its_numbers(tmp_path):
    _fit(tmp_path, 2, Trace(tmp_path))
    rows = traces.read(tmp_path)
    expected = [e for s in range(2) for e in synthetic_episodes(2, 4, seed=s)]  # the source's
    assert list(rows["update"]) == [1] * 8 + [2] * 8
    assert list(rows["index"]) == list(range(8)) * 2
    for (_, row), episode in zip(rows.iterrows(), expected, strict=True):
        assert list(row["token_ids"]) == episode.token_ids
        assert list(row["loss_mask"]) == [bool(m) for m in episode.loss_mask]
        np.testing.assert_array_equal(row["logprobs"], np.float32(episode.logprobs))
        assert row["outcome"] == episode.outcome
        assert row["success"] == episode.success
        assert list(row["rewards"]) == episode.rewards
        assert traces.messages(row) == episode.messages
        assert row["trained"]
        assert len(row["trainer_logprobs"]) == len(episode.token_ids)
    table = traces.tokens(tmp_path, update=2, index=3)
    assert list(table["id"]) == expected[11].token_ids
    vocabulary = traces.vocabulary(tmp_path)
    tokenizer = models.load(seed=0)[1]
    assert list(table["text"]) == [tokenizer.decode([i]) for i in expected[11].token_ids]
    assert len(vocabulary) == len(tokenizer)
    assert len(pd.read_parquet(tmp_path / "traces")) == 16  # plain pandas reads the folder


def test_off_writes_nothing_and_sample_keeps_the_first_groups(tmp_path):
    _fit(tmp_path / "off", 1, Trace(tmp_path / "off", "off"))
    assert not (tmp_path / "off" / "traces").exists()
    _fit(tmp_path / "sample", 2, Trace(tmp_path / "sample", "sample:1"))
    rows = traces.read(tmp_path / "sample")
    assert list(rows["index"]) == [0, 1, 2, 3] * 2  # group 0 of each update (groups of 4)
    with pytest.raises(ConfigError, match="sample:N"):
        Trace(tmp_path, "sample:0")


def test_the_budget_warns_before_it_keeps_less(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # an update's file is ~10 kB: 2 pass 80% of 24 kB, 3 pass it (a checkpoint after each
        # update waits for its file: the writer is not behind when the next one comes)
        _fit(tmp_path, 4, Trace(tmp_path, budget_gb=24e-6), checkpoint_every=1)
    said = [str(w.message) for w in caught if w.category is TraceBudgetWarning]
    assert len(said) == 2
    assert "80%" in said[0]
    assert "one group per update" in said[1]
    counts = traces.read(tmp_path).groupby("update").size().tolist()
    assert counts == [8, 8, 8, 4]  # every episode, then one group


def test_a_resume_rewrites_the_updates_after_its_checkpoint(tmp_path):
    _fit(tmp_path, 3, Trace(tmp_path), checkpoint_every=2)  # checkpoints after 2 and 3
    first = traces.read(tmp_path)
    # the checkpoint of update 3 is lost: the run resumes from 2 and plays 3 again
    (tmp_path / "checkpoints" / "step-00000003" / checkpoint.MANIFEST).unlink()
    _fit(tmp_path, 4, Trace(tmp_path), checkpoint_every=2)
    again = traces.read(tmp_path)
    assert again.groupby("update").size().tolist() == [8, 8, 8, 8]
    for name in ("token_ids", "trainer_logprobs", "advantages"):
        for a, b in zip(first[name], again[name][:24], strict=True):
            np.testing.assert_array_equal(a, b)


class Batches:
    """An ``EpisodeSource`` of given batches, in order."""

    def __init__(self, batches: list[list]) -> None:
        self.batches, self.position = batches, 0

    def collect(self, num_groups: int) -> list:
        self.position += 1
        return self.batches[self.position - 1]

    def state_dict(self) -> dict:
        return {"position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.position = state["position"]


def test_dapo_traces_every_sampling_round_with_the_update_it_fed(tmp_path):
    batches = batches_for("dapo")  # batch 2 has one informative group: a second round follows
    trainer = make("dapo", policy=models.load(seed=0), config=RESUME_CONFIGS["dapo"])
    fit(trainer, Batches(batches), steps=2, out=tmp_path, trace=Trace(tmp_path))
    rows = traces.read(tmp_path)
    first, second = rows[rows["update"] == 1], rows[rows["update"] == 2]
    assert first["trained"].tolist() == [True] * 8
    assert second["index"].tolist() == list(range(16))  # both rounds' episodes
    trained = second["trained"].tolist()
    assert trained[4:8] == [False] * 4  # round 1's flat group: left out
    assert sum(trained) == 8
    assert all(len(t) > 0 for t in second[second["trained"]]["trainer_logprobs"])
    assert second[~second["trained"]]["trainer_logprobs"].isna().all()
