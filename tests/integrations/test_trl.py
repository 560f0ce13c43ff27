"""TRL's GRPOTrainer trains on an agentgym env through ``agentgym.integrations.trl``.

The trainer test runs real TRL steps on CPU with the tiny policy on FrozenLake and checks what
the integration promises: TRL's loss covers exactly the ids that were sampled, the env received
exactly their decoding, the env's own tokens are in the sequence but out of the loss, the
rewards (hence the advantages) are the env's returns, and the weights moved.

Without trl the tests that need it skip, unless the rest of ``agentgymnasium[dev]`` is installed (CI
installs dev, which includes trl): then they fail.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError
from agentgym.core.types import Episode, Turn, assistant, user
from agentgym.envs.frozenlake import FrozenLakeEnv
from agentgym.extras import missing_requirements
from agentgym.inference import SamplingParams
from agentgym.integrations.trl import (
    AgentGymRollout,
    TRLEngine,
    env_reward,
    env_success,
    episode_fields,
    parse_task_prompt,
    task_dataset,
    task_prompt,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trl() -> Any:
    try:
        import trl
    except ImportError:
        if missing_requirements("dev") == ["trl"]:
            pytest.fail(
                "agentgymnasium[dev] is installed without trl (pip install 'agentgymnasium[trl]')"
            )
        pytest.skip("trl is not installed (pip install 'agentgymnasium[trl]')")
    return trl


def test_task_keys_round_trip_and_bad_ones_name_the_fix() -> None:
    assert parse_task_prompt(task_prompt("agentgym/Math-v0", 17)) == ("agentgym/Math-v0", 17)
    with pytest.raises(ConfigError, match="task_dataset"):
        parse_task_prompt("What is 2 + 2?")
    with pytest.raises(ConfigError, match="seed"):
        task_prompt("agentgym/Math-v0", -1)


def test_task_dataset_holds_consecutive_seeds(trl: Any) -> None:
    dataset = task_dataset("agentgym/FrozenLake-v0", 3, seed=5)
    assert dataset["seed"] == [5, 6, 7]
    assert [parse_task_prompt(p) for p in dataset["prompt"]] == [
        ("agentgym/FrozenLake-v0", s) for s in (5, 6, 7)
    ]


def _episode(trainable: bool = True, turns: int = 1) -> Episode:
    # prompt [1, 2], turn 1 sampled [3, 4], env [5], turn 2 sampled [6]
    episode = Episode("x", token_ids=[1, 2, 3, 4, 5, 6], loss_mask=[0, 0, 1, 1, 0, 1])
    episode.logprobs = [0.0, 0.0, -0.5, -0.25, 0.0, -1.0]
    episode.turn_spans = [(2, 4), (5, 6)][:turns]
    episode.turns = [Turn(assistant("a"), (user("b"),), 0.5, False, False, {})] * turns
    episode.trainable = trainable
    return episode


def test_episode_fields_split_prompt_and_mask_the_env_tokens() -> None:
    fields = episode_fields([_episode(turns=2), _episode(False, turns=2)], eos_token_id=9)
    assert fields["prompt_ids"] == [[1, 2], [1, 2]]
    assert fields["completion_ids"] == [[3, 4, 5, 6], [3, 4, 5, 6]]
    assert fields["env_mask"] == [[1, 1, 0, 1], [0, 0, 0, 0]]  # infra error: nothing to learn
    assert fields["logprobs"][0] == [-0.5, -0.25, 0.0, -1.0]
    assert fields["agentgym_reward"] == [1.0, None]  # None: TRL gives it no advantage
    assert episode_fields([_episode()], eos_token_id=9, logprobs=False)["logprobs"] is None


def test_an_episode_without_turns_is_one_unscored_masked_eos() -> None:
    empty = Episode("x", token_ids=[1, 2], loss_mask=[0, 0], logprobs=[0.0, 0.0])
    fields = episode_fields([empty], eos_token_id=9)
    assert fields["completion_ids"] == [[9]]
    assert fields["env_mask"] == [[0]]
    assert fields["agentgym_reward"] == [None]


def test_reward_functions_read_the_env_outcome() -> None:
    assert env_reward(["c"] * 2, agentgym_reward=[0.5, None]) == [0.5, None]
    assert env_success(["c"] * 3, agentgym_success=[True, False, None]) == [1.0, 0.0, None]


def test_sampling_fields_other_than_max_tokens_belong_to_grpo_config() -> None:
    with pytest.raises(ConfigError, match="GRPOConfig"):
        AgentGymRollout(sampling={"temperature": 0.5})


class FakeTrainer:
    """What TRLEngine uses of a GRPOTrainer: its generation, EOS ids, tokenizer and model."""

    def __init__(self, outputs: list[list[int]], logprobs: list[list[Any]] | None) -> None:
        from agentgym import models

        self.processing_class = models.load_tokenizer()
        self.eos_token_ids = [self.processing_class.eos_token_id]
        self.model = None
        self.outputs, self.logprobs = outputs, logprobs
        self.calls: list[list[list[int]]] = []

    def _generate_single_turn(self, prompt_ids: list[list[int]], *_: Any) -> Any:
        if not prompt_ids[0]:
            raise RuntimeError("generation failed")
        self.calls.append(prompt_ids)
        n = len(prompt_ids)
        return self.outputs[:n], None if self.logprobs is None else self.logprobs[:n]


def test_trl_engine_batches_concurrent_turns_and_reports_what_trl_gave() -> None:
    trainer = FakeTrainer([[5, 6, 7], [8]], [[-0.5, None, -1.0], [-2.0]])
    eos = trainer.eos_token_ids[0]
    trainer.outputs[1].append(eos)
    engine = TRLEngine(trainer)

    async def two() -> Any:
        return await asyncio.gather(
            engine.generate([1, 2], SamplingParams(max_tokens=2)),
            engine.generate([3], SamplingParams()),
        )

    cut, ended = run_sync(two())
    assert trainer.calls == [[[1, 2], [3]]]  # one batch for both
    assert (cut.token_ids, cut.finish_reason, cut.stop) == ([5, 6], "length", None)
    assert cut.logprobs[0] == -0.5
    assert math.isnan(cut.logprobs[1])  # vLLM's None for a logprob it could not compute
    assert (ended.token_ids, ended.finish_reason, ended.stop) == ([8, eos], "stop", eos)
    assert ended.logprob_mode == "raw"
    assert engine.gave_logprobs


def test_trl_engine_without_logprobs_and_with_a_failing_generation() -> None:
    engine = TRLEngine(FakeTrainer([[5]], None))
    done = run_sync(engine.generate([1], SamplingParams()))
    assert (done.logprobs, done.logprob_mode, engine.gave_logprobs) == ([0.0], "none", False)
    with pytest.raises(RuntimeError, match="generation failed"):
        run_sync(engine.generate([], SamplingParams()))


class Recorder:
    """Around one GRPOTrainer: what TRL generated, what each env received, what TRL trained on
    (per rollout call)."""

    def __init__(self, trainer: Any, rollout: AgentGymRollout, monkeypatch: Any) -> None:
        self.calls: list[dict[str, Any]] = []
        generate, score = trainer._generate_single_turn, trainer._generate_and_score_completions
        original_step = FrozenLakeEnv.astep

        def generated(prompt_ids: Any, *args: Any) -> Any:
            ids, logprobs = generate(prompt_ids, *args)
            self.calls[-1]["generated"] += [list(x) for x in ids]
            return ids, logprobs

        async def astep(env: FrozenLakeEnv, action: Any) -> Any:
            text = action if isinstance(action, str) else action["content"]
            self.calls[-1]["received"][id(env)].append(text)
            return await original_step(env, action)

        def scored(inputs: Any) -> Any:
            self.calls.append({"generated": [], "received": defaultdict(list)})
            out = score(inputs)
            self.calls[-1]["batch"] = out
            self.calls[-1]["episodes"] = list(rollout.last_episodes)
            return out

        monkeypatch.setattr(trainer, "_generate_single_turn", generated)
        monkeypatch.setattr(trainer, "_generate_and_score_completions", scored)
        monkeypatch.setattr(FrozenLakeEnv, "astep", astep)


def _trained_tokens(batch: dict[str, Any], row: int) -> list[int]:
    keep = (batch["completion_mask"][row] * batch["tool_mask"][row]).bool()
    return batch["completion_ids"][row][keep].tolist()


def _check_call(call: dict[str, Any], tokenizer: Any) -> None:
    episodes, batch = call["episodes"], call["batch"]
    spans = [[e.token_ids[a:b] for a, b in e.turn_spans] for e in episodes]
    # Each turn's ids are one of TRL's generations, unchanged, and nothing else was generated.
    assert Counter(map(tuple, (s for turns in spans for s in turns))) == Counter(
        map(tuple, call["generated"])
    )
    # Each env received the decoding of its episode's sampled ids, turn by turn.
    decoded = Counter(
        tuple(tokenizer.decode(s, skip_special_tokens=True) for s in turns) for turns in spans
    )
    assert decoded == Counter(tuple(actions) for actions in call["received"].values())
    for row, (episode, turns) in enumerate(zip(episodes, spans, strict=True)):
        # TRL's loss covers exactly the sampled ids; its sequence is the whole episode.
        assert _trained_tokens(batch, row) == [i for s in turns for i in s]
        length = int(batch["completion_mask"][row].sum())
        start = episode.turn_spans[0][0]
        assert batch["completion_ids"][row][:length].tolist() == episode.token_ids[start:]
        prompt = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()].tolist()
        assert prompt == episode.token_ids[:start]
    # The advantages are the env's returns minus their group's mean (scale_rewards="none").
    returns = torch.tensor([e.total_reward for e in episodes]).view(-1, 2)
    expected = (returns - returns.mean(dim=1, keepdim=True)).flatten()
    torch.testing.assert_close(batch["advantages"], expected)


def test_grpo_trainer_trains_on_frozenlake_episodes(
    trl: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentgym import models

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    model, tokenizer = models.load()
    before = [p.detach().clone() for p in model.parameters()]
    rollout = AgentGymRollout(
        max_turns=3, env_kwargs={"tool": False, "hole_reward": -1.0, "edge_reward": -0.5}
    )
    config = trl.GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=8,
        num_generations=2,
        max_completion_length=8,
        max_steps=2,
        beta=0.0,
        learning_rate=1e-3,
        scale_rewards="none",
        reward_weights=[1.0, 0.0],
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[env_reward, env_success],
        args=config,
        train_dataset=task_dataset("agentgym/FrozenLake-v0", 8),
        rollout_func=rollout,
    )
    recorder = Recorder(trainer, rollout, monkeypatch)
    trainer.train()

    assert len(recorder.calls) == 2  # one rollout per step
    for call in recorder.calls:
        _check_call(call, tokenizer)
    episodes = [e for call in recorder.calls for e in call["episodes"]]
    assert any(len(e.turns) > 1 for e in episodes)  # multi-turn: env tokens sat between turns
    assert any(0 in m for m in episode_fields(episodes, tokenizer.eos_token_id)["env_mask"])
    logged = [row for row in trainer.state.log_history if "rewards/env_reward/mean" in row]
    for row, call in zip(logged, recorder.calls, strict=True):
        mean = sum(e.total_reward for e in call["episodes"]) / len(call["episodes"])
        assert row["rewards/env_reward/mean"] == pytest.approx(mean)
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))


@pytest.mark.slow
def test_grpo_trainer_plays_an_env_served_by_serve_env(
    trl: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """agentgym/Remote-v0 through the integration: the env runs in `agentgym serve-env`."""
    try:
        from agentgym.vector.remote import start_server
    except ImportError as e:
        if missing_requirements("dev"):
            pytest.skip(f"Remote-v0 needs the openenv extra: {e}")
        raise
    from agentgym import models

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tokenizer = models.load()
    server = start_server("agentgym/FrozenLake-v0", num_envs=4, env_kwargs={"tool": False})
    rollout = AgentGymRollout(max_turns=2, env_kwargs={"url": server.url})
    try:
        config = trl.GRPOConfig(
            output_dir=str(tmp_path),
            use_cpu=True,
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=8,
            max_steps=1,
            beta=0.0,
            report_to="none",
            save_strategy="no",
            disable_tqdm=True,
        )
        trl.GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=env_reward,
            args=config,
            train_dataset=task_dataset("agentgym/Remote-v0", 2),
            rollout_func=rollout,
        ).train()
    finally:
        server.close()
    episodes = rollout.last_episodes
    assert [e.seed for e in episodes] == [0, 0, 1, 1]
    assert all(e.env_id == "agentgym/Remote-v0" and e.turns and e.trainable for e in episodes)
    # The served FrozenLake answered the first move with what happened and the board.
    answers = [e.turns[0].observation[-1]["content"] for e in episodes]
    assert all(a.startswith(("You moved", "You tried")) for a in answers), answers


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_example_script_trains(trl: Any, tmp_path: Path) -> None:
    """examples/trl_grpo.py as a user runs it (~30 s on one core: mostly imports)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--steps", "2", "--out", "run"],
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=1200,  # catches a hang only: 84 s on a quiet machine, past 240 s under CI's load
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["steps"] == 2
    assert result["weights_changed"]
