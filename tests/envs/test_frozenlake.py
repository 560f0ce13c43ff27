"""agentgym/FrozenLake-v0: maps, actions, rewards, episode ends, and the Gymnasium contract."""

from __future__ import annotations

import json
import math
import warnings
from collections import deque

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym
from agentgym.envs.frozenlake import FrozenLakeEnv, generate_map, squares_reaching_goal
from agentgym.error import ConfigError, EnvStateError, Error

ENV_ID = "agentgym/FrozenLake-v0"
OPEN = "SFF/FFF/FFG"
STEPS = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}


def bfs_moves(rows: tuple[str, ...] | list[str]) -> list[str] | None:
    """Shortest list of moves from S to G avoiding holes (independent of the env's own BFS)."""
    size = len(rows)
    cells = {(r, c): rows[r][c] for r in range(size) for c in range(size)}
    start = next(p for p, cell in cells.items() if cell == "S")
    came: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        if cells[here] == "G":
            moves: list[str] = []
            while came[here] is not None:
                here, move = came[here]  # type: ignore[misc]
                moves.append(move)
            return moves[::-1]
        for move, (dr, dc) in STEPS.items():
            there = (here[0] + dr, here[1] + dc)
            if cells.get(there, "H") != "H" and there not in came:
                came[there] = (here, move)
                queue.append(there)
    return None


def hermes(direction: str) -> str:
    call = {"name": "move", "arguments": {"direction": direction}}
    return f"<tool_call>{json.dumps(call)}</tool_call>"


@pytest.fixture
def env():
    env = FrozenLakeEnv()
    yield env
    env.close()


def play_map(env: FrozenLakeEnv, map_text: str):
    return env.reset(seed=0, options={"map": map_text})


# --- maps ----------------------------------------------------------------------------------------


def test_same_seed_gives_same_map_and_observation():
    a, b = FrozenLakeEnv(), FrozenLakeEnv()
    obs_a, info_a = a.reset(seed=7)
    obs_b, info_b = b.reset(seed=7)
    assert obs_a == obs_b
    assert (info_a["task_id"], info_a["map"]) == (info_b["task_id"], info_b["map"])
    # unseeded resets continue the seeded stream: new maps, the same in both envs
    maps_a = [a.reset()[1]["map"] for _ in range(10)]
    maps_b = [b.reset()[1]["map"] for _ in range(10)]
    assert maps_a == maps_b
    assert len(set(maps_a)) > 5


def test_different_seeds_give_different_tasks(env):
    task_ids = {env.reset(seed=s)[1]["task_id"] for s in range(20)}
    assert len(task_ids) == 20


def test_task_id_pins_the_map():
    env = FrozenLakeEnv(size=5)
    obs_1, info_1 = env.reset(seed=1, options={"task_id": 42})
    obs_2, info_2 = env.reset(seed=2, options={"task_id": 42})
    assert info_1["task_id"] == info_2["task_id"] == 42
    assert obs_1 == obs_2
    assert info_1["map"] == "/".join(generate_map(42, 5, 0.2))


def test_user_map_is_played():
    env = FrozenLakeEnv(size=4)
    obs, info = env.reset(options={"map": "SFH/FFF/HFG"})
    assert info["task_id"] is None
    assert info["map"] == "SFH/FFF/HFG"
    assert info["size"] == 3
    assert info["max_turns"] == 18
    assert obs[1]["content"].startswith("P F H\nF F F\nH F G\n")


@pytest.mark.parametrize(
    ("map_text", "complaint"),
    [
        ("SFF/FFG", "not square"),
        ("SFF/FXF/FFG", "'X'"),
        ("SFF/FSF/FFG", "2 S cells"),
        ("SFF/FFF/FFF", "0 G cells"),
        (["SF", "FG"], "must be a string"),
    ],
)
def test_bad_user_map_raises_config_error(env, map_text, complaint):
    with pytest.raises(ConfigError, match=complaint):
        env.reset(options={"map": map_text})


@pytest.mark.parametrize(
    "options",
    [{"task_id": -1}, {"task_id": 1.5}, {"task_id": 3, "map": OPEN}, {"taskid": 3}],
)
def test_bad_options_raise_config_error(env, options):
    with pytest.raises(ConfigError, match="options"):
        env.reset(options=options)


# --- observations --------------------------------------------------------------------------------


def test_reset_observation_and_info(env):
    obs, info = env.reset(seed=3)
    assert [m["role"] for m in obs] == ["system", "user"]
    assert "```down```" in obs[0]["content"]
    assert "move" in obs[0]["content"]
    assert obs[1]["content"].endswith("You are at row 1, column 1.")
    assert obs[1]["content"].startswith("P ")
    assert sum(len(m["content"]) for m in obs) < 400
    assert [t["function"]["name"] for t in info["tools"]] == ["move"]
    assert info["size"] == 4
    assert info["max_turns"] == 32
    assert info["map"].startswith("S")
    assert info["map"].endswith("G")


def test_returns_are_fresh_objects(env):
    obs_1, info_1 = env.reset(seed=0)
    obs_2, info_2 = env.reset(seed=0)
    assert obs_1 == obs_2
    assert obs_1[0] is not obs_2[0]
    info_1["tools"][0]["function"]["name"] = "changed"
    assert info_2["tools"][0]["function"]["name"] == "move"


# --- actions -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "position"),
    [
        ("```down```", (1, 0)),
        ("```\nRIGHT\n```", (0, 1)),
        ("down", (1, 0)),
        ("  Right.  ", (0, 1)),
        ("Going right is risky.\n```down```", (1, 0)),
        ("First ```right```, no: ```down```", (1, 0)),
        (hermes("down"), (1, 0)),
        ("I will go right. " + hermes("right"), (0, 1)),
        ({"role": "assistant", "content": "```right```"}, (0, 1)),
    ],
)
def test_valid_actions_move_the_agent(env, action, position):
    play_map(env, OPEN)
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["position"] == position
    assert (reward, terminated, truncated, info["invalid_action"]) == (0.0, False, False, False)
    row, col = position
    assert obs[-1]["content"].endswith(f"You are at row {row + 1}, column {col + 1}.")


def test_text_move_is_answered_by_a_user_message(env):
    play_map(env, OPEN)
    obs, *_ = env.step("```right```")
    assert obs == (
        {
            "role": "user",
            "content": "You moved right.\nF P F\nF F F\nF F G\n"
            "Around you: left ice, down ice, right ice, up edge.\n"
            "You are at row 1, column 2.",
        },
    )


def test_hermes_tool_call_is_answered_by_a_tool_message(env):
    play_map(env, OPEN)
    obs, *_ = env.step(hermes("down"))
    assert len(obs) == 1
    assert obs[0]["role"] == "tool"
    assert obs[0]["name"] == "move"
    assert obs[0]["tool_call_id"].startswith("call_")
    assert obs[0]["content"].startswith("You moved down.\nF F F\nP F F")


def test_structured_tool_call_is_answered_with_its_id(env):
    play_map(env, OPEN)
    action = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "abc",
                "type": "function",
                "function": {"name": "move", "arguments": '{"direction": "right"}'},
            }
        ],
    }
    obs, reward, _, _, info = env.step(action)
    assert info["position"] == (0, 1)
    assert reward == 0.0
    assert obs[0]["role"] == "tool"
    assert obs[0]["tool_call_id"] == "abc"


def test_moving_into_the_edge_stays(env):
    play_map(env, OPEN)
    obs, reward, terminated, _, info = env.step("up")
    assert info["position"] == (0, 0)
    assert reward == 0.0
    assert not terminated
    assert not info["invalid_action"]
    assert "edge" in obs[0]["content"]


@pytest.mark.parametrize(
    "action",
    [
        "",
        "hello",
        "```jump```",
        "```left right```",
        "```down",
        "upward",
        42,
        None,
        {"role": "user", "content": "down"},
    ],
)
def test_invalid_text_actions_are_penalised_and_explained(env, action):
    play_map(env, OPEN)
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == pytest.approx(-0.1)
    assert isinstance(reward, float)
    assert (terminated, truncated) == (False, False)
    assert info["invalid_action"] is True
    assert info["position"] == (0, 0)
    assert info["reward_components"] == {
        "goal": 0.0,
        "hole": 0.0,
        "invalid_action": -0.1,
        "edge": 0.0,
    }
    assert obs[0]["role"] == "user"
    assert "fenced block" in obs[0]["content"]
    _, reward, *_ = env.step("down")  # the episode goes on
    assert reward == 0.0


@pytest.mark.parametrize(
    ("action", "error"),
    [
        ('<tool_call>{"name": "jump", "arguments": {}}</tool_call>', "unknown tool 'jump'"),
        (hermes("diagonal"), "invalid arguments"),
        ('<tool_call>{"name": "move", "arguments": {}}</tool_call>', "invalid arguments"),
        ('<tool_call>{"name": "move", "arguments": {"direction": </tool_call>', "malformed"),
        (hermes("up").removesuffix("</tool_call>"), "malformed"),
    ],
)
def test_invalid_tool_calls_are_penalised_and_answered(env, action, error):
    play_map(env, OPEN)
    obs, reward, terminated, _, info = env.step(action)
    assert reward == pytest.approx(-0.1)
    assert not terminated
    assert info["invalid_action"] is True
    assert info["position"] == (0, 0)
    assert len(obs) == 1
    assert obs[0]["role"] == "tool"
    assert error in obs[0]["content"]
    assert "Call move once" in obs[0]["content"]


def test_two_moves_in_one_turn_are_invalid_and_none_is_run(env):
    play_map(env, OPEN)
    obs, reward, _, _, info = env.step(hermes("down") + hermes("right"))
    assert reward == pytest.approx(-0.1)
    assert info["position"] == (0, 0)
    assert [m["role"] for m in obs] == ["tool", "tool"]
    assert obs[0]["tool_call_id"] != obs[1]["tool_call_id"]
    assert all("exactly one move" in m["content"] for m in obs)


def test_invalid_action_reward_is_configurable():
    env = FrozenLakeEnv(invalid_action_reward=-0.5)
    play_map(env, OPEN)
    assert env.step("nothing")[1] == -0.5
    env = FrozenLakeEnv(invalid_action_reward=0)
    play_map(env, OPEN)
    assert env.step("nothing")[1] == 0.0


# --- rewards and episode ends --------------------------------------------------------------------


def test_reaching_the_goal_gives_one_and_terminates(env):
    play_map(env, "SG/FF")
    obs, reward, terminated, truncated, info = env.step("right")
    assert reward == 1.0
    assert type(reward) is float
    assert terminated is True
    assert truncated is False
    assert info["success"] is True
    assert info["reward_components"] == {
        "goal": 1.0,
        "hole": 0.0,
        "invalid_action": 0.0,
        "edge": 0.0,
    }
    assert "reached the goal" in obs[0]["content"]


def test_falling_into_a_hole_gives_zero_and_terminates(env):
    play_map(env, "SH/FG")
    obs, reward, terminated, truncated, info = env.step("right")
    assert reward == 0.0
    assert terminated is True
    assert truncated is False
    assert info["success"] is False
    assert "hole" in obs[0]["content"]


def test_hole_reward_is_paid_for_a_hole_only():
    env = FrozenLakeEnv(hole_reward=-1.0)
    play_map(env, "SH/FG")
    _, reward, terminated, _, info = env.step("right")
    assert (reward, terminated) == (-1.0, True)
    assert info["reward_components"] == {
        "goal": 0.0,
        "hole": -1.0,
        "invalid_action": 0.0,
        "edge": 0.0,
    }
    play_map(env, "SH/FG")
    _, reward, _, _, _ = env.step("down")
    assert reward == 0.0
    _, reward, _, _, info = env.step("right")
    assert (reward, info["success"]) == (1.0, True)
    with pytest.raises(ConfigError, match=r"hole_reward=0\.5"):
        FrozenLakeEnv(hole_reward=0.5)


def test_edge_reward_is_paid_for_a_move_into_the_edge_only():
    env = FrozenLakeEnv(edge_reward=-0.5)
    play_map(env, OPEN)
    _, reward, terminated, _, info = env.step("up")
    assert (reward, terminated, info["position"]) == (-0.5, False, (0, 0))
    assert info["reward_components"]["edge"] == -0.5
    _, reward, _, _, info = env.step("right")
    assert (reward, info["position"]) == (0.0, (0, 1))
    env.step("left")
    _, reward, _, _, info = env.step("no move")  # invalid: no edge penalty on top
    assert reward == pytest.approx(-0.1)
    assert info["reward_components"]["edge"] == 0.0
    with pytest.raises(ConfigError, match=r"edge_reward=1"):
        FrozenLakeEnv(edge_reward=1)


def test_following_the_shortest_path_solves_generated_maps():
    env = FrozenLakeEnv(size=5, hole_prob=0.3)
    for seed in range(20):
        _, info = env.reset(seed=seed)
        moves = bfs_moves(info["map"].split("/"))
        for k, move in enumerate(moves):
            _, reward, terminated, truncated, step_info = env.step(f"```{move}```")
            assert terminated is (k == len(moves) - 1)
            assert truncated is False
        assert reward == 1.0
        assert step_info["success"] is True


def test_stepping_before_reset_or_after_the_end_raises():
    env = FrozenLakeEnv()
    with pytest.raises(EnvStateError, match="before reset"):
        env.step("down")
    play_map(env, "SG/FF")
    env.step("right")
    with pytest.raises(EnvStateError, match="after the episode ended"):
        env.step("left")
    env.reset(seed=0)
    env.step("down")  # a reset starts a new episode


def test_truncation_at_max_turns():
    env = FrozenLakeEnv(max_turns=3)
    play_map(env, "SFFF/FFFF/FFFF/FFFG")
    results = [env.step(action) for action in ("up", "nonsense", "left")]
    assert [r[3] for r in results] == [False, False, True]
    assert [r[2] for r in results] == [False, False, False]
    assert results[-1][4]["truncation_reason"] == "max_turns"
    assert "truncation_reason" not in results[0][4]
    assert results[-1][0][-1]["content"].endswith("Out of turns.")
    with pytest.raises(EnvStateError):
        env.step("down")


def test_reaching_the_goal_on_the_last_turn_terminates_without_truncation():
    env = FrozenLakeEnv(max_turns=2)
    play_map(env, "SF/FG")
    env.step("right")
    _, reward, terminated, truncated, info = env.step("down")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert "truncation_reason" not in info


def test_default_max_turns_is_twice_the_cells(env):
    play_map(env, "SF/FG")
    for turn in range(1, 9):
        *_, truncated, _info = env.step("up")
        assert truncated is (turn == 8)


# --- slippery ice --------------------------------------------------------------------------------


def slippery_positions(seed: int, moves: int) -> list[tuple[int, int]]:
    env = FrozenLakeEnv(slippery=True, max_turns=1000)
    open_map = "/".join(["S" + "F" * 8] + ["F" * 9] * 7 + ["F" * 8 + "G"])
    env.reset(seed=seed, options={"map": open_map})
    positions = []
    for k in range(moves):
        direction = "down" if k % 2 else "right"
        positions.append(env.step(f"```{direction}```")[4]["position"])
    return positions


def test_random_start_begins_on_squares_that_reach_the_goal():
    env = FrozenLakeEnv(random_start=True)
    starts = set()
    for seed in range(60):
        _, info = env.reset(seed=seed)
        rows = tuple(info["map"].split("/"))
        position = tuple(int(x) for x in info["state"].rsplit("@", 1)[1].split(","))
        assert position in squares_reaching_goal(rows)
        starts.add(position)
    assert len(starts) > 8  # not only the corner
    first = env.reset(seed=7)
    again = env.reset(seed=7)
    assert first == again  # the seed fixes map and start


def test_random_start_shows_the_player_where_it_starts():
    env = FrozenLakeEnv(random_start=True)
    observation, _ = env.reset(seed=0, options={"map": "SFF/FHF/FFG"})
    board_lines = observation[1]["content"].splitlines()[:3]
    row = next(r for r, line in enumerate(board_lines) if "P" in line)
    col = board_lines[row].split().index("P")
    assert (row, col) in squares_reaching_goal(("SFF", "FHF", "FFG"))
    _, info = FrozenLakeEnv().reset(seed=0, options={"map": "SFF/FHF/FFG"})
    assert info["state"].endswith("@0,0")  # off by default: the start square


def test_without_the_tool_moves_are_text_only_and_the_prompt_has_no_schema():
    env = FrozenLakeEnv(tool=False)
    observation, info = env.reset(seed=0)
    assert info["tools"] == []
    assert "tool" not in observation[0]["content"]
    assert "```down```" in observation[0]["content"]
    obs, reward, _, _, info = env.step(hermes("down"))
    assert info["invalid_action"]
    assert info["position"] == (0, 0)
    assert reward == pytest.approx(-0.1)
    assert "fenced block" in obs[0]["content"]
    _, _, _, _, info = env.step("```down```")
    assert not info["invalid_action"]
    assert FrozenLakeEnv().reset(seed=0)[1]["tools"][0]["function"]["name"] == "move"


def test_slippery_is_deterministic_under_a_seed():
    assert slippery_positions(5, 10) == slippery_positions(5, 10)
    assert slippery_positions(5, 10) != slippery_positions(6, 10)


def test_slippery_moves_go_the_intended_way_a_third_of_the_time():
    env = FrozenLakeEnv(slippery=True)
    env.reset(seed=0, options={"map": "FFF/FSF/FFG"})  # seeds the stream the resets below continue
    actual = {"intended": 0, "perpendicular": 0, "opposite": 0}
    for _ in range(600):
        env.reset(options={"map": "FFF/FSF/FFG"})
        _, _, _, _, info = env.step("```up```")
        row, col = info["position"]
        key = {(0, 1): "intended", (1, 0): "perpendicular", (1, 2): "perpendicular"}
        actual[key.get((row, col), "opposite")] += 1
    assert actual["opposite"] == 0
    assert 150 < actual["intended"] < 250  # 1/3 of 600, within ~4 standard deviations


def test_slipping_is_reported():
    env = FrozenLakeEnv(slippery=True)
    reports = set()
    for seed in range(30):
        env.reset(seed=seed, options={"map": "FFF/FSF/FFG"})
        reports.add(env.step("up")[0][0]["content"].splitlines()[0])
    assert reports == {
        "You moved up.",
        "You tried up but slipped left.",
        "You tried up but slipped right.",
    }


# --- arguments -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"size": 1}, "size=1"),
        ({"size": 2.5}, "size=2.5"),
        ({"size": True}, "size=True"),
        ({"hole_prob": 1.0}, "hole_prob=1.0"),
        ({"hole_prob": -0.1}, "hole_prob=-0.1"),
        ({"hole_prob": "0.2"}, "hole_prob='0.2'"),
        ({"hole_prob": math.nan}, "hole_prob=nan"),
        ({"slippery": "yes"}, "slippery='yes'"),
        ({"random_start": 1}, "random_start=1"),
        ({"tool": "no"}, "tool='no'"),
        ({"max_turns": 0}, "max_turns=0"),
        ({"invalid_action_reward": 0.5}, "invalid_action_reward=0.5"),
        ({"render_mode": "rgb_array"}, "render_mode='rgb_array'"),
    ],
)
def test_bad_arguments_raise_config_error_naming_the_value(kwargs, name):
    with pytest.raises(ConfigError, match="Fix:") as caught:
        FrozenLakeEnv(**kwargs)
    assert str(caught.value).startswith(name)


def test_unknown_tool_parser_is_rejected_at_construction():
    with pytest.raises(Error, match="hermes"):
        FrozenLakeEnv(tool_parser="hermez")


def test_gym_make_passes_kwargs():
    env = gym.make(ENV_ID, size=6, hole_prob=0.0)
    _, info = env.reset(seed=0)
    assert info["map"] == "/".join(["SFFFFF"] + ["FFFFFF"] * 4 + ["FFFFFG"])


def test_other_tool_parsers_are_used():
    env = FrozenLakeEnv(tool_parser="pythonic")
    play_map(env, OPEN)
    obs, _, _, _, info = env.step('[move(direction="down")]')
    assert info["position"] == (1, 0)
    assert obs[0]["role"] == "tool"


# --- rendering and the Gymnasium contract --------------------------------------------------------


def test_render_modes(capsys):
    env = FrozenLakeEnv(render_mode="ansi")
    play_map(env, OPEN)
    assert env.render() == "P F F\nF F F\nF F G\nYou are at row 1, column 1."
    env = FrozenLakeEnv(render_mode="human")
    play_map(env, OPEN)
    env.step("down")
    assert env.render() is None
    assert capsys.readouterr().out == "F F F\nP F F\nF F G\nYou are at row 2, column 1.\n"


def test_gymnasium_checker_passes_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make(ENV_ID)
        check_env(env.unwrapped)
        env.reset(seed=0)
        for action in ("down", hermes("right"), "???", "```up```"):
            env.step(action)
        env.close()
        for mode in ("ansi", "human"):
            env = gym.make(ENV_ID, render_mode=mode)
            env.reset(seed=1)
            env.render()
            env.close()


@pytest.mark.parametrize(
    "make_vector",
    [
        lambda fns: gym.vector.SyncVectorEnv(fns),
        lambda fns: gym.vector.AsyncVectorEnv(fns, shared_memory=False),
    ],
    ids=["sync", "async"],
)
def test_vector_envs(make_vector):
    fns = [lambda: gym.make(ENV_ID, size=3, hole_prob=0.0) for _ in range(2)]
    venv = make_vector(fns)
    try:
        obs, _ = venv.reset(seed=[1, 2])
        assert len(obs) == 2
        assert all(o[1]["content"].startswith("P F F") for o in obs)
        rewards = []
        for actions in (("down", "```right```"), ("down", "nope"), ("right", "right")):
            obs, reward, terminated, _truncated, _info = venv.step(actions)
            rewards.append(reward.tolist())
        assert rewards == [[0.0, 0.0], [0.0, -0.1], [0.0, 0.0]]
        assert obs[0][0]["content"].endswith("You are at row 3, column 2.")
        assert obs[1][0]["content"].endswith("You are at row 1, column 3.")
        _, reward, terminated, _, _ = venv.step(("right", "```down```"))
        assert reward.tolist() == [1.0, 0.0]
        assert terminated.tolist() == [True, False]
    finally:
        venv.close()


def test_registered_reward_range_matches_the_extreme_returns():
    low, high = agentgym.env_info(ENV_ID).reward_range
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    total, truncated = 0.0, False
    while not truncated:
        _, reward, _, truncated, _ = env.step("no move at all")
        total += float(reward)
    assert total == pytest.approx(low)
    _, info = env.reset(seed=0)
    for move in bfs_moves(info["map"].split("/")):
        _, reward, *_ = env.step(move)
    assert reward == high


def test_observation_says_what_lies_around_the_player():
    from agentgym.envs.frozenlake.text import surroundings

    rows = ("SFH", "HFF", "FFG")
    assert surroundings(rows, (0, 0)) == "Around you: left edge, down hole, right ice, up edge."
    assert surroundings(rows, (1, 2)) == "Around you: left ice, down goal, right edge, up hole."
