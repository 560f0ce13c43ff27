"""The env → trainer contract: the ``info`` keys agentgym gives meaning to, typed, in one place.

An env may put anything in ``info``; these keys mean the same in every env, and every package
reads them through this module (the constants, ``success_of``, ``is_infra_error``), never as loose
strings. ``agentgym.utils.check_env`` validates each of them an env emits with ``problems``.

=====================  ===========  ==========================================================
key                    where        meaning
=====================  ===========  ==========================================================
``tools``              reset        list of OpenAI function-tool schemas the model may call
                                    (``[]`` for none); required on every reset
``task_id``            both         the task played (``str`` or ``int``; ``None``: a task with no
                                    id, e.g. one the caller passed in); ``options={"task_id":
                                    ...}`` on reset pins it; constant within an episode
``state``              both         a ``str`` id of the situation the next turn acts from: equal
                                    ids mean equal futures (GiGPO compares turns by it)
``action_choices``     both         the non-empty list of distinct action texts the env offers
                                    for the next turn (constrained decoding samples among them)
``success``            step         ``bool``: whether the episode's task was accomplished. Only
                                    the step that ends the episode decides; an episode whose last
                                    step lacks it has unknown success (``None``), never guessed
                                    from the reward
``reward_components``  step         ``dict[str, float]`` of finite parts that sum to the step's
                                    reward
``truncation_reason``  step         ``str`` naming why the episode was truncated
                                    (``"max_turns"``, ``"context_length"``, ``"infra_error"``);
                                    only on a truncated step
``infra_error``        both         ``bool``: the call failed outside the model (sandbox, server,
                                    browser, or the env's own code raised: ``error_kind``); the
                                    episode ends and trainers drop the sample
``error``              both         ``str``: what failed, beside ``infra_error=True``
``error_kind``         both         beside ``infra_error=True``: ``"infra"`` (infrastructure: a
                                    server, sandbox or browser, a deadline; may pass) or
                                    ``"env"`` (the env's own code raised: a bug to fix, it will
                                    not pass); absent: ``"infra"``
``error_at``           both         ``str``: the env call that raised (``"MyEnv.step"``), where
                                    the vector env turned an exception into ``infra_error``
``difficulty``         reset        the difficulty level played, one of the env's declared
                                    ``difficulty_levels`` (:mod:`agentgym.core.difficulty`)
``invalid_action``     step         ``bool``: the model's action could not be carried out as
                                    written (a format error, an unknown or malformed tool call)
``timed_out``          step         ``bool``: the model's own action ran into a deadline (code
                                    that loops, a command that sleeps, a page that never
                                    settles). A scored outcome, never an ``infra_error``
``outcome``            step         the episode's class (``OUTCOMES``), on the step that ends
                                    it; ``outcome_of`` derives it when an env does not say
=====================  ===========  ==========================================================

Outcomes. Every episode ends in exactly one class (``outcome_of``), checked in this order:

=============  =====================================================================  ========
outcome        when                                                                   trains
=============  =====================================================================  ========
``infra``      the reset or a step failed outside the model (``infra_error``); its     dropped
               ``error`` is the cause
``timeout``    the last step says ``timed_out``: the model's own action hit a          scored
               deadline (its reward stands: a dropped timeout is an exit the policy
               could learn to take)
``success``    the last step says ``success: true``                                    scored
``truncated``  the last step was truncated (turn or token limit)                       scored
``invalid``    every step says ``invalid_action: true`` (nothing but format or          scored
               tool-call errors: a "void" episode)
``failed``     anything else: attempted, not solved                                   scored
=============  =====================================================================  ========

An env may state the class itself with ``info["outcome"]`` on its last step (it wins over the
derivation, except that only an ``infra_error`` makes ``infra`` and an ``infra_error`` is always
``infra``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypedDict

__all__ = [
    "ACTION_CHOICES",
    "DIFFICULTY",
    "ERROR",
    "ERROR_AT",
    "ERROR_KIND",
    "INFRA_ERROR",
    "INVALID_ACTION",
    "KEYS",
    "OUTCOME",
    "OUTCOMES",
    "REWARD_COMPONENTS",
    "STATE",
    "SUCCESS",
    "TASK_ID",
    "TIMED_OUT",
    "TOOLS",
    "TRUNCATION_REASON",
    "ErrorKind",
    "Outcome",
    "ResetInfo",
    "StepInfo",
    "error_kind",
    "is_infra_error",
    "outcome_of",
    "problems",
    "return_problems",
    "success_of",
]

TOOLS: Final = "tools"
TASK_ID: Final = "task_id"
STATE: Final = "state"
ACTION_CHOICES: Final = "action_choices"
SUCCESS: Final = "success"
REWARD_COMPONENTS: Final = "reward_components"
TRUNCATION_REASON: Final = "truncation_reason"
INFRA_ERROR: Final = "infra_error"
ERROR: Final = "error"
ERROR_KIND: Final = "error_kind"
ERROR_AT: Final = "error_at"
DIFFICULTY: Final = "difficulty"
INVALID_ACTION: Final = "invalid_action"
TIMED_OUT: Final = "timed_out"
OUTCOME: Final = "outcome"

KEYS: Final = (
    TOOLS,
    TASK_ID,
    STATE,
    ACTION_CHOICES,
    SUCCESS,
    REWARD_COMPONENTS,
    TRUNCATION_REASON,
    INFRA_ERROR,
    ERROR,
    ERROR_KIND,
    ERROR_AT,
    DIFFICULTY,
    INVALID_ACTION,
    TIMED_OUT,
    OUTCOME,
)
"""Every key this contract defines."""

Outcome = Literal["success", "failed", "invalid", "timeout", "truncated", "infra"]
OUTCOMES: Final[tuple[Outcome, ...]] = (
    "success",
    "failed",
    "invalid",
    "timeout",
    "truncated",
    "infra",
)
"""Every class an episode can end in (the module docstring says when each applies)."""

ErrorKind = Literal["infra", "env"]
ERROR_KINDS: Final[tuple[ErrorKind, ...]] = ("infra", "env")

_STEP_ONLY = (SUCCESS, REWARD_COMPONENTS, TRUNCATION_REASON, INVALID_ACTION, TIMED_OUT, OUTCOME)
_REWARD_TOLERANCE = 1e-6


class ResetInfo(TypedDict, total=False):
    """The contract's keys in the ``info`` of ``reset`` (``tools`` is required in practice)."""

    tools: list[dict[str, Any]]
    task_id: str | int | None
    state: str
    action_choices: list[str]
    infra_error: bool
    error: str
    error_kind: ErrorKind
    error_at: str
    difficulty: Any


class StepInfo(TypedDict, total=False):
    """The contract's keys in the ``info`` of ``step``."""

    task_id: str | int | None
    state: str
    action_choices: list[str]
    success: bool
    reward_components: dict[str, float]
    truncation_reason: str
    infra_error: bool
    error: str
    error_kind: ErrorKind
    error_at: str
    invalid_action: bool
    timed_out: bool
    outcome: Outcome


def success_of(infos: Sequence[Mapping[str, Any]]) -> bool | None:
    """An episode's success: ``info["success"]`` of its last step (``infos`` in step order);
    ``None`` when the last step does not say."""
    if not infos or SUCCESS not in infos[-1]:
        return None
    return bool(infos[-1][SUCCESS])


def is_infra_error(info: Mapping[str, Any]) -> bool:
    """Whether a reset or step failed outside the model (drop the sample)."""
    return bool(info.get(INFRA_ERROR, False))


def outcome_of(
    reset_info: Mapping[str, Any], infos: Sequence[Mapping[str, Any]], *, truncated: bool
) -> Outcome:
    """The class an episode ended in (the table in the module docstring), from its reset's info,
    its steps' infos in order and whether its last step was truncated."""
    if is_infra_error(reset_info) or any(is_infra_error(i) for i in infos):
        return "infra"
    last = infos[-1] if infos else {}
    stated = last.get(OUTCOME)
    if stated in OUTCOMES and stated != "infra":
        return stated
    if last.get(TIMED_OUT) is True:
        return "timeout"
    if success_of(infos):
        return "success"
    if truncated or (not infos and TRUNCATION_REASON in reset_info):  # no turn fitted
        return "truncated"
    if infos and all(i.get(INVALID_ACTION) is True for i in infos):
        return "invalid"
    return "failed"


def error_kind(info: Mapping[str, Any]) -> ErrorKind | None:
    """Whose failure a failed reset or step was: ``"infra"`` or ``"env"`` (its own code
    raised); None when the call did not fail."""
    if not is_infra_error(info):
        return None
    return "env" if info.get(ERROR_KIND) == "env" else "infra"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_problems(info: Mapping[str, Any]) -> list[str]:
    out = []
    task_id = info.get(TASK_ID)
    if task_id is not None and (not isinstance(task_id, str | int) or isinstance(task_id, bool)):
        out.append(f"task_id {task_id!r} is not a str, an int or None")
    if STATE in info and not isinstance(info[STATE], str):
        out.append(f"state {info[STATE]!r} is not a str")
    if ACTION_CHOICES in info:
        choices = info[ACTION_CHOICES]
        if not (isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices)):
            out.append(f"action_choices {choices!r} is not a non-empty list of str")
        elif len(set(choices)) != len(choices):
            out.append(f"action_choices {choices!r} repeats a choice")
    if ERROR_KIND in info and info[ERROR_KIND] not in ERROR_KINDS:
        out.append(f"error_kind {info[ERROR_KIND]!r} is not one of {ERROR_KINDS}")
    out += _outcome_problems(info)
    checked = (SUCCESS, INFRA_ERROR, INVALID_ACTION, TIMED_OUT)
    for key, kind in (*((k, bool) for k in checked), (ERROR, str), (ERROR_AT, str)):
        if key in info and not isinstance(info[key], kind):
            out.append(f"{key} {info[key]!r} is a {type(info[key]).__name__}, not {kind.__name__}")
    if TRUNCATION_REASON in info and not (
        isinstance(info[TRUNCATION_REASON], str) and info[TRUNCATION_REASON]
    ):
        out.append(f"truncation_reason {info[TRUNCATION_REASON]!r} is not a non-empty str")
    return out


def _outcome_problems(info: Mapping[str, Any]) -> list[str]:
    if OUTCOME not in info:
        return []
    if info[OUTCOME] not in OUTCOMES:
        return [f"outcome {info[OUTCOME]!r} is not one of {OUTCOMES}"]
    if info[OUTCOME] == "infra" and not is_infra_error(info):
        return [
            "outcome 'infra' without infra_error=True: only a failure outside the model is "
            "infra (say infra_error=True with the error)"
        ]
    return []


def _components_problems(components: Any, reward: float) -> list[str]:
    if not (
        isinstance(components, dict)
        and all(isinstance(k, str) for k in components)
        and all(_number(v) and math.isfinite(v) for v in components.values())
    ):
        return [f"reward_components {components!r} is not a dict of str to finite floats"]
    total = float(sum(components.values()))
    if abs(total - reward) > _REWARD_TOLERANCE * max(1.0, abs(reward)):
        return [f"reward_components {components!r} sum to {total:g}, not the reward {reward:g}"]
    return []


def problems(
    info: Mapping[str, Any],
    where: Literal["reset", "step"],
    *,
    reward: float = 0.0,
    truncated: bool = False,
) -> list[str]:
    """What in ``info`` breaks the contract (empty when nothing does).

    Args:
        info: the ``info`` of one reset or step.
        where: which call returned it.
        reward, truncated: the step's (for a step's info).
    """
    out = _type_problems(info)
    if where == "reset":
        out += [f"{key} belongs to step infos, not reset's" for key in _STEP_ONLY if key in info]
        return out
    if REWARD_COMPONENTS in info:
        out += _components_problems(info[REWARD_COMPONENTS], reward)
    if TRUNCATION_REASON in info and not truncated:
        out.append(f"truncation_reason {info[TRUNCATION_REASON]!r} on a step that is not truncated")
    return out


def return_problems(total: float, reward_range: tuple[float, float]) -> list[str]:
    """An episode's total reward outside the env's registered ``reward_range``."""
    low, high = reward_range
    if low - _REWARD_TOLERANCE <= total <= high + _REWARD_TOLERANCE:
        return []
    return [f"an episode returned {total:g}, outside the registered reward_range {reward_range}"]
