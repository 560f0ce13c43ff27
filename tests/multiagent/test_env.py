"""MultiAgentEnv (the AEC shape for chat messages) and TicTacToe-v0: the protocol, seeded
determinism, garbage actions from either role, both step styles, the registry hook."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym
from agentgym.core.errors import ConfigError, EnvStateError
from agentgym.core.types import assistant, user
from agentgym.envs.tictactoe import TicTacToeEnv, heuristic_move, random_move
from agentgym.multiagent import MultiAgentEnv, list_multiagent_envs, make
from agentgym.multiagent.policies import ScriptedPolicy, resolve_policies
from agentgym.multiagent.rollout import play_games

TTT = "agentgym/TicTacToe-v0"


def play(env: MultiAgentEnv, actions: dict[str, Any], seed: int) -> list[tuple]:
    """Drive ``env`` through agent_iter; ``actions[role](obs, info, rng)`` answers each turn.
    Returns the transcript: (agent, observation, reward, terminated, truncated, info)."""
    env.reset(seed=seed)
    rngs = {role: np.random.default_rng([seed, i]) for i, role in enumerate(env.possible_agents)}
    transcript = []
    for agent in env.agent_iter(max_iter=200):
        observation, reward, terminated, truncated, info = env.last()
        transcript.append((agent, observation, reward, terminated, truncated, info))
        if terminated or truncated:
            env.step(None)
        else:
            env.step(actions[agent](observation, info, rngs[agent]))
    assert not env.agents, "the game did not end within 200 turns"
    return transcript


def test_made_through_agentgym_make_and_listed_apart_from_single_agent_envs():
    env = agentgym.make(TTT)
    assert isinstance(env, TicTacToeEnv)
    assert env.spec.id == TTT
    assert env.possible_agents == ("x", "o")
    assert TTT in {info.id for info in list_multiagent_envs()}
    assert TTT not in {info.id for info in agentgym.list_envs()}
    assert make(TTT, max_invalid=5).max_invalid == 5


def test_a_game_follows_the_aec_cycle_and_ends_with_a_dead_step_per_role():
    transcript = play(make(TTT), {"x": random_move, "o": random_move}, seed=3)
    agents = [t[0] for t in transcript]
    live = [t for t in transcript if not (t[3] or t[4])]
    assert [t[0] for t in live] == ["x", "o"] * (len(live) // 2) + ["x"] * (len(live) % 2)
    final = transcript[-2:]
    assert sorted(t[0] for t in final) == ["o", "x"]  # each role sees the end once
    assert all(t[3] and not t[4] for t in final)
    outcomes = {t[0]: t[5]["outcome"] for t in final}
    rewards = {t[0]: t[2] for t in final}
    assert sorted(outcomes.values()) in (["draw", "draw"], ["loss", "win"])
    assert sum(rewards.values()) == 0.0
    for role in ("x", "o"):
        assert final[[t[0] for t in final].index(role)][5]["success"] == (outcomes[role] == "win")
    assert agents[0] == "x"
    assert transcript[0][1][0]["role"] == "system"  # the role prompt comes first


def test_same_seeds_same_game_and_other_seeds_other_games():
    players = {"x": random_move, "o": heuristic_move}
    a = play(make(TTT), players, seed=11)
    b = play(make(TTT), players, seed=11)
    assert a == b
    boards = {play(make(TTT), players, seed=s)[-1][5]["board"] for s in range(8)}
    assert len(boards) > 1


GARBAGE = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "```10```", "```0```", "``` 5 ```x", "55", "```5``` ```6```", "\x00"]),
    st.builds(lambda s: assistant(s), st.text(max_size=10)),
    st.builds(lambda s: {"role": "assistant", "content": None}, st.none()),
)


@settings(max_examples=60, deadline=None)
@given(garbage=st.lists(GARBAGE, min_size=1, max_size=12), bad_role=st.sampled_from(["x", "o"]))
def test_garbage_from_either_role_is_answered_with_a_penalty_never_a_crash(garbage, bad_role):
    env = make(TTT)
    queue = list(garbage)

    def bad(observation, info, rng):
        return queue.pop(0) if queue else random_move(observation, info, rng)

    transcript = play(env, {"x": random_move, "o": random_move, bad_role: bad}, seed=0)
    invalid = [
        t for t in transcript if t[0] == bad_role and t[5].get("invalid_action") and not t[3]
    ]
    for _, observation, reward, *_ in invalid:
        assert reward == pytest.approx(-0.1)
        assert observation[-1]["role"] == "user"
        assert "Invalid move" in observation[-1]["content"]
    final = {t[0]: t[5] for t in transcript[-2:]}
    if final[bad_role]["forfeit"]:
        assert final[bad_role]["outcome"] == "loss"
        assert sum(1 for t in transcript if t[0] == bad_role and not (t[3] or t[4])) >= 3


def test_a_taken_cell_is_invalid_and_the_same_role_moves_again():
    env = make(TTT)
    env.reset(seed=0)
    env.step("```5```")
    env.step("I take ```5```")
    observation, reward, terminated, _, info = env.last()
    assert env.agent_selection == "o"
    assert reward == pytest.approx(-0.1)
    assert not terminated
    assert "cell 5 is taken" in observation[-1]["content"]
    assert info["invalid_action"] is True
    assert "```5```" not in info["action_choices"]
    env.step("9")  # a bare digit is a move
    assert env.agent_selection == "x"
    assert env.last()[0][-1]["content"].startswith("O played 9.")


def test_a_line_wins_and_a_done_agent_must_be_stepped_with_none():
    env = make(TTT)
    env.reset(seed=0, options={"board": "XX.OO...."})
    assert env.agent_selection == "x"
    env.step("```3```")
    assert env.terminations == {"x": True, "o": True}
    assert env.agent_selection == "x"
    _, reward, terminated, _, info = env.last()
    assert (reward, terminated, info["outcome"], info["winner"]) == (1.0, True, "win", "x")
    with pytest.raises(EnvStateError, match="takes None"):
        env.step("```4```")
    env.step(None)
    assert env.agent_selection == "o"
    assert env.last()[1] == -1.0
    env.step(None)
    assert env.agents == []
    with pytest.raises(EnvStateError, match="reset"):
        env.step(None)


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"win_reward": 0}, "e.g. 1.0"),
        ({"invalid_action_reward": 0.5}, "e.g. -0.1"),
        ({"max_invalid": 0}, "int >= 1"),
    ],
)
def test_bad_arguments_name_the_value_and_the_fix(kwargs, fix):
    with pytest.raises(ConfigError, match=fix):
        make(TTT, **kwargs)


def test_an_unplayable_start_board_is_refused():
    with pytest.raises(ConfigError, match="playable"):
        make(TTT).reset(seed=0, options={"board": "XXX......"})


class Countdown(MultiAgentEnv):
    """A Gymnasium-style (synchronous) two-role env: the roles say numbers until 3 were said."""

    possible_agents = ("a", "b")

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.said = 0
        self.tell("a", user("start"))

    def step(self, action):
        if self.dead_step(action):
            return
        agent = self.begin_turn()
        other = "b" if agent == "a" else "a"
        self.said += 1
        self.reward(other, 0.5)
        self.tell(other, user(f"{agent} said {action}"))
        if self.said == 3:
            self.end_game({a: {"success": a == agent} for a in self.agents})
        else:
            self.end_turn(other)


def test_a_synchronous_subclass_gets_the_async_api():
    env = Countdown()
    env.reset(seed=0)
    env.step("1")
    assert env.last() == ((user("a said 1"),), 0.5, False, False, {})

    async def drive() -> list[str]:
        await env.areset(seed=1)
        order = []
        for agent in env.agent_iter():
            order.append(agent)
            await env.astep(None if env.done(agent) else "n")
        return order

    from agentgym.core.aio import run_sync

    assert run_sync(drive()) == ["a", "b", "a", "a", "b"]


def test_scripted_policies_resolve_by_name_and_unknown_ones_name_the_fix():
    policies = resolve_policies(TicTacToeEnv, {"o": "heuristic"})
    assert isinstance(policies["o"], ScriptedPolicy)
    assert policies["o"].player is heuristic_move
    assert policies["x"].player is random_move  # the env's default
    with pytest.raises(ConfigError, match="heuristic"):
        resolve_policies(TicTacToeEnv, {"o": "minimax"})
    with pytest.raises(ConfigError, match="roles"):
        resolve_policies(TicTacToeEnv, {"z": "random"})


def test_scripted_games_are_a_function_of_their_seeds():
    kwargs: dict[str, Any] = {"group_size": 2, "sampling_seed": 5}
    a = play_games(TTT, {"o": "heuristic"}, 4, 7, **kwargs)
    b = play_games(TTT, {"o": "heuristic"}, 4, 7, **kwargs)
    assert [{r: e.messages for r, e in g.items()} for g in a] == [
        {r: e.messages for r, e in g.items()} for g in b
    ]
    assert [g["x"].group for g in a] == [0, 0, 1, 1]
    assert [g["x"].seed for g in a] == [7, 7, 8, 8]
    for game in a:
        assert game["x"].reset_info["role"] == "x"
        assert not game["x"].trainable  # scripted: nothing to train
        assert game["x"].total_reward + game["o"].total_reward == pytest.approx(0.0)
