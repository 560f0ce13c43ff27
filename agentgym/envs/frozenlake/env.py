"""``FrozenLakeEnv``: walk a text grid from the start to the goal without falling into a hole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np

from agentgym.core.difficulty import DIFFICULTY
from agentgym.core.env import AgentEnv, StepResult
from agentgym.core.errors import ConfigError
from agentgym.core.parsing import MalformedCall, ParsedAction, ParsedCall
from agentgym.core.tools import Tool
from agentgym.core.types import (
    Action,
    Message,
    Observation,
    is_turn,
    system,
    tool_message,
    user,
)
from agentgym.envs.frozenlake.maps import (
    NUM_TASKS,
    Map,
    find,
    format_map,
    generate_map,
    parse_map,
    squares_reaching_goal,
)
from agentgym.envs.frozenlake.text import (
    DIRECTIONS,
    INVALID_TOOL_HINT,
    RULES,
    TEXT_MOVE_HINT,
    TEXT_RULES,
    board,
    invalid_text,
    move_report,
    read_text_move,
    too_many_calls,
)
from agentgym.envs.validate import integer, real

__all__ = ["MOVE", "MOVE_CHOICES", "FrozenLakeEnv"]


def move(direction: Literal["left", "right", "up", "down"]) -> str:
    """Move one square on the lake.

    Args:
        direction: the way to step: left, right, up or down.
    """
    return direction  # the env applies the move; the function only declares the schema


MOVE = Tool.from_function(move)

_STEPS = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}
MOVE_CHOICES = tuple(f"```{d}```" for d in DIRECTIONS)
"""The text moves, offered as ``info["action_choices"]``."""


@dataclass
class _Episode:
    rows: Map
    task_id: int | None
    position: tuple[int, int]
    max_turns: int
    turns: int = 0
    bumped: bool = False
    """The last move ran into the edge."""


@dataclass(frozen=True)
class _Reading:
    """A turn read as a move: its direction, or ``None`` with the messages that say why not."""

    direction: str | None
    call: ParsedCall | None = None
    errors: Observation = ()


class FrozenLakeEnv(AgentEnv):
    """Walk a frozen lake from the top-left corner to the goal without falling into a hole.

    Description:
        Gymnasium's FrozenLake as text. Each task id names a procedurally generated square map
        (start top-left, goal bottom-right, holes with probability ``hole_prob``) that is checked
        to be solvable. ``reset(seed=s)`` draws the task id from ``np_random``, so a seed fixes
        the map; ``options={"task_id": k}`` pins map ``k`` and ``options={"map": "SFFF/FHFH/..."}``
        plays a given map (square, one S, one G, only S/F/H/G; it need not be solvable).
        With ``sizes``, the env plays maps of several sizes, its declared difficulty levels
        (``difficulty_levels``, smallest first): ``reset(seed=s)`` draws the size, then the
        task id; ``options={"size": k}`` (or ``{"difficulty": k}``) pins the size, alone or
        with a ``task_id``.

    Observation:
        On reset, a system message with the rules and a user message with the board, e.g.::

            P F F F
            F H F H
            F F F H
            H F F G
            Around you: left edge, down ice, right ice, up edge.
            You are at row 1, column 1.

        Each step adds one message: what the move did and the new board (a tool message answering
        the ``move`` call, or a user message for a text move), or, for an invalid action, what was
        wrong and the expected format.

    Action:
        Text whose last fenced block holds one direction word (```` ```down``` ````), or text that
        is only a direction word (case-insensitive); or one ``move`` tool call, written as text for
        the tool parser (hermes by default) or as an assistant message with ``tool_calls``. When a
        turn holds a tool call, the call is the move and the text is not read for one. No
        direction, two directions, two calls, an unknown tool, bad arguments or a malformed call
        are invalid: the episode goes on.

    Tools:
        ``move(direction: "left" | "right" | "up" | "down")``: step one square. Its schema is in
        ``info["tools"]`` on reset.

    Reward:
        1.0 on reaching the goal; ``hole_reward`` (0.0 by default, as in Gymnasium) for a move
        into a hole; ``edge_reward`` (0.0 by default) for a move into the edge, which stays;
        0.0 for any other move; ``invalid_action_reward`` for an invalid action.
        ``info["reward_components"]`` holds ``{"goal": ..., "hole": ..., "invalid_action": ...,
        "edge": ...}``. An episode's return lies in ``[max_turns * min(invalid_action_reward,
        edge_reward) + hole_reward, 1.0]``.

    Episode end:
        Terminated on the goal (``info["success"]`` is True) or in a hole. Truncated after
        ``max_turns`` steps, valid or not (``info["truncation_reason"] == "max_turns"``). Stepping
        an ended episode raises ``EnvStateError`` (``AgentEnv``'s guard): reset first.

    Arguments:
        size: side of generated maps (>= 2), when ``sizes`` is None.
        sizes: sides of generated maps to draw from (each >= 2, distinct), e.g. ``(3, 4, 5,
            6)``: the env's difficulty levels; None: ``(size,)``, and reset draws no size.
        hole_prob: probability that a cell other than start and goal is a hole (0 <= p < 1).
        slippery: Gymnasium's slippery ice: a move goes the intended way with probability 1/3
            and each perpendicular way with probability 1/3, drawn from ``np_random``.
        max_turns: steps before truncation; ``None`` means ``2 * size * size`` of the map played.
        invalid_action_reward: reward of an invalid action (<= 0).
        hole_reward: reward of falling into a hole (<= 0). A trainer may set it below 0 so that
            groups of episodes that all miss the goal still tell holes from safe moves.
        edge_reward: reward of a move into the edge (<= 0): a wasted turn. A trainer may set it
            below 0 to tell a policy early that running into the edge is pointless.
        random_start: start each episode on a square drawn from ``np_random`` among those from
            which the goal can be reached, instead of the start square (exploring starts: a
            trainer sees the whole board, not only what lies near the corner). The board still
            marks the start square as ice.
        tool: offer the ``move`` tool (its schema in ``info["tools"]``, so a chat template renders
            it into the prompt). False: text moves only, a shorter prompt (no schema) for a model
            that never calls tools; a tool call is then an unknown tool, an invalid action.
        tool_parser: parser for tool calls written as text (see :mod:`agentgym.core.parsing`).
        render_mode: ``"ansi"`` returns the board, ``"human"`` prints it.

    Step info keys: ``success``, ``invalid_action``, ``reward_components``, ``position``
    (0-based row and column), ``turn``, ``task_id``, ``state`` (the map and the square, e.g.
    ``"SFF/FHF/FFG@0,1"``: equal states, equal futures; trainers' step credit groups turns by
    it), ``action_choices`` and ``truncation_reason`` when truncated. Reset info keys:
    ``tools``, ``task_id`` (``None`` for a given map), ``map``, ``size``, ``difficulty`` (the
    size), ``max_turns``, ``state``, ``action_choices``. ``action_choices`` are the four text moves
    (```` ```left``` ```` ...): every valid action, for constrained decoding (the collector's
    ``action_choices``).

    Version history:
        v0: first version; ``sizes`` and the ``size``/``difficulty`` reset options added later
        (maps and observations unchanged without them).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        *,
        size: int = 4,
        sizes: tuple[int, ...] | list[int] | None = None,
        hole_prob: float = 0.2,
        slippery: bool = False,
        max_turns: int | None = None,
        invalid_action_reward: float = -0.1,
        hole_reward: float = 0.0,
        edge_reward: float = 0.0,
        random_start: bool = False,
        tool: bool = True,
        tool_parser: str = "hermes",
        render_mode: str | None = None,
    ) -> None:
        if not isinstance(tool, bool | np.bool_):
            raise ConfigError("tool", tool, "must be a bool", "pass True or False")
        self.tool = bool(tool)
        super().__init__(
            tools=(MOVE,) if self.tool else (), tool_parser=tool_parser, render_mode=render_mode
        )
        self.size = integer("size", size, 2, "pass an int >= 2, e.g. size=4")
        self.sizes = None if sizes is None else _sizes(sizes)
        self.hole_prob = _probability(hole_prob)
        if not isinstance(slippery, bool | np.bool_):
            raise ConfigError("slippery", slippery, "must be a bool", "pass True or False")
        self.slippery = bool(slippery)
        if not isinstance(random_start, bool | np.bool_):
            raise ConfigError("random_start", random_start, "must be a bool", "pass True or False")
        self.random_start = bool(random_start)
        self.max_turns = (
            None
            if max_turns is None
            else integer("max_turns", max_turns, 1, "pass an int >= 1, or None for 2*size*size")
        )
        self.invalid_action_reward = _penalty(invalid_action_reward, "invalid_action_reward")
        self.hole_reward = _penalty(hole_reward, "hole_reward")
        self.edge_reward = _penalty(edge_reward, "edge_reward")
        self._episode: _Episode | None = None

    # --- Gymnasium API ------------------------------------------------------------------------

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        task_id, rows = self._choose_map(options)
        max_turns = self.max_turns or 2 * len(rows) ** 2
        self._episode = episode = _Episode(rows, task_id, self._start(rows), max_turns)
        rules = RULES if self.tool else TEXT_RULES
        observation = (system(rules), user(board(rows, episode.position, around=True)))
        info = {
            "tools": self.tool_schemas(),
            "task_id": task_id,
            "map": format_map(rows),
            "size": len(rows),
            DIFFICULTY: len(rows),
            "max_turns": max_turns,
            "state": _state(episode),
            "action_choices": list(MOVE_CHOICES),
        }
        return observation, info

    async def astep(self, action: Action) -> StepResult:
        episode = self._episode
        assert episode is not None  # AgentEnv refuses a step before a reset
        episode.turns += 1
        reading = await self._read(action)
        if reading.direction is None:
            return self._transition(episode, reading.errors, invalid=True)
        report = self._move(episode, reading.direction)
        content = f"{report}\n{board(episode.rows, episode.position, around=True)}"
        call = reading.call
        message = user(content) if call is None else tool_message(content, call.id, call.name)
        return self._transition(episode, (message,), invalid=False)

    def render(self) -> str | None:  # type: ignore[override]
        if self.render_mode is None:
            gym.logger.warn("render() needs a render_mode; make the env with render_mode='ansi'")
            return None
        episode = self._episode
        text = "" if episode is None else board(episode.rows, episode.position)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    # --- internals --------------------------------------------------------------------------

    def _start(self, rows: Map) -> tuple[int, int]:
        if not self.random_start:
            return find(rows, "S")
        squares = squares_reaching_goal(rows)
        if not squares:  # a given map whose goal cannot be reached: start where it says
            return find(rows, "S")
        return squares[int(self.np_random.integers(len(squares)))]

    @property
    def difficulty_levels(self) -> tuple[int, ...]:
        """The declared difficulty levels, easiest first: the map sizes (``sizes``)."""
        return self.sizes or (self.size,)

    def _choose_map(self, options: dict[str, Any] | None) -> tuple[int | None, Map]:
        options = {k: v for k, v in (options or {}).items() if v is not None}
        unknown = sorted(set(options) - {"task_id", "map", "size", DIFFICULTY})
        if unknown:
            rule, fix = f"has unknown keys {unknown}", "pass only 'task_id', 'size' or 'map'"
            raise ConfigError("options", options, rule, fix)
        if "map" in options and len(options) > 1:
            rule, fix = "sets 'map' with other keys", "pass a map alone"
            raise ConfigError("options", options, rule, fix)
        if "map" in options:
            return None, parse_map(options["map"])
        size = self._choose_size(options)
        if "task_id" in options:
            task_id = integer("options['task_id']", options["task_id"], 0, "pass an int >= 0")
        else:
            task_id = int(self.np_random.integers(NUM_TASKS))
        return task_id, generate_map(task_id, size, self.hole_prob)

    def _choose_size(self, options: dict[str, Any]) -> int:
        """The size the options pin (``size`` or ``difficulty``), else one drawn from
        ``sizes`` (no draw without ``sizes``: seeds pick the maps they always did)."""
        if "size" in options and DIFFICULTY in options and options["size"] != options[DIFFICULTY]:
            rule, fix = "sets 'size' and 'difficulty' apart", "pass one of them"
            raise ConfigError("options", options, rule, fix)
        pinned = options.get("size", options.get(DIFFICULTY))
        if pinned is not None:
            if pinned not in self.difficulty_levels:
                rule = f"is not one of the env's sizes {list(self.difficulty_levels)}"
                fix = "pass one of them, or make the env with sizes=(...) including it"
                raise ConfigError("options['size']", pinned, rule, fix)
            return int(pinned)
        if self.sizes is None:
            return self.size
        return self.sizes[int(self.np_random.integers(len(self.sizes)))]

    async def _read(self, action: Action) -> _Reading:
        if not is_turn(action):
            reason = "the action is not text or an assistant message"
            return _Reading(None, errors=(user(invalid_text(reason)),))
        parsed = self.parse(action)
        if parsed.has_calls:
            return await self._read_tool_call(parsed)
        direction, reason = read_text_move(parsed.content)
        if direction is None:
            return _Reading(None, errors=(user(invalid_text(reason)),))
        return _Reading(direction)

    async def _read_tool_call(self, parsed: ParsedAction) -> _Reading:
        attempts: list[ParsedCall | MalformedCall] = [*parsed.calls, *parsed.malformed]
        if len(attempts) > 1:
            text = too_many_calls(len(attempts))
            errors = tuple(tool_message(text, a.id, a.name[:64] or "invalid") for a in attempts)
            return _Reading(None, errors=errors)
        call = parsed.calls[0] if parsed.calls and self.tool else None
        if call and call.name == MOVE.name and MOVE.validation_error(call.arguments) is None:
            return _Reading(call.arguments["direction"], call=call)
        answers = await self.run_tool_calls(parsed)  # unknown tool, bad arguments or malformed call
        hint = INVALID_TOOL_HINT if self.tool else TEXT_MOVE_HINT
        return _Reading(None, errors=tuple(_with_hint(m, hint) for m in answers))

    def _move(self, episode: _Episode, intended: str) -> str:
        actual = intended
        if self.slippery:
            # -1, 0, +1: a perpendicular way, the intended way, the other perpendicular way
            turn = int(self.np_random.integers(3)) - 1
            actual = DIRECTIONS[(DIRECTIONS.index(intended) + turn) % len(DIRECTIONS)]
        (row, col), (dr, dc) = episode.position, _STEPS[actual]
        size = len(episode.rows)
        blocked = not (0 <= row + dr < size and 0 <= col + dc < size)
        episode.bumped = blocked
        if not blocked:
            episode.position = (row + dr, col + dc)
        cell = episode.rows[episode.position[0]][episode.position[1]]
        return move_report(intended, actual, blocked=blocked, cell=cell)

    def _transition(self, episode: _Episode, messages: Observation, *, invalid: bool) -> StepResult:
        cell = episode.rows[episode.position[0]][episode.position[1]]
        success = not invalid and cell == "G"
        terminated = not invalid and cell in "GH"
        truncated = not terminated and episode.turns >= episode.max_turns
        components = {
            "goal": 1.0 if success else 0.0,
            "hole": self.hole_reward if terminated and not success else 0.0,
            "invalid_action": self.invalid_action_reward if invalid else 0.0,
            "edge": self.edge_reward if episode.bumped and not invalid else 0.0,
        }
        if truncated:
            last: Message = {**messages[-1]}
            last["content"] = f"{last['content']}\nOut of turns."
            messages = (*messages[:-1], last)
        info: dict[str, Any] = {
            "success": success,
            "invalid_action": invalid,
            "reward_components": components,
            "position": episode.position,
            "turn": episode.turns,
            "task_id": episode.task_id,
            "state": _state(episode),
            "action_choices": list(MOVE_CHOICES),
        }
        if truncated:
            info["truncation_reason"] = "max_turns"
        return messages, float(sum(components.values())), terminated, truncated, info


def _state(episode: _Episode) -> str:
    """The situation's id: the map and the player's square (equal ids, equal futures)."""
    row, col = episode.position
    return f"{format_map(episode.rows)}@{row},{col}"


def _with_hint(message: Message, hint: str) -> Message:
    content = f"{(message['content'] or '').rstrip('.')}. {hint}"
    return tool_message(content, message["tool_call_id"], message.get("name", "move"))


# --- argument validation -------------------------------------------------------------------


def _sizes(value: object) -> tuple[int, ...]:
    fix = "pass distinct ints >= 2, e.g. sizes=(3, 4, 5, 6), or None"
    if isinstance(value, str) or not isinstance(value, tuple | list) or not value:
        raise ConfigError("sizes", value, "must be a non-empty list of sizes", fix)
    sizes = tuple(integer("sizes", v, 2, fix) for v in value)
    if len(set(sizes)) != len(sizes):
        raise ConfigError("sizes", value, "repeats a size", fix)
    return tuple(sorted(sizes))


def _probability(value: object) -> float:
    fix = "pass a float in [0, 1), e.g. hole_prob=0.2"
    number = real("hole_prob", value, fix)
    if not 0.0 <= number < 1.0:
        raise ConfigError("hole_prob", value, "must be in [0, 1)", fix)
    return number


def _penalty(value: object, name: str) -> float:
    fix = f"pass a float <= 0, e.g. {name}=-0.1 (0 for no penalty)"
    number = real(name, value, fix)
    if number > 0:
        raise ConfigError(name, value, "must be <= 0 (a penalty)", fix)
    return number
