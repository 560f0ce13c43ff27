"""Grade a ``\\boxed{}`` answer against a reference with ``math-verify``.

The rule: the answer is the content of the **last** ``\\boxed{...}`` of the response. It scores 0
when there is none, when the response boxes two or more *different* answers (a hedge: boxing the
same answer twice is fine), when the box holds more than ``MAX_ANSWER_CHARS`` characters, or when
``math-verify`` finds it unequal to the reference. A box holding several candidates
(``\\boxed{3, 4}``, ``\\boxed{3 \\text{ or } 4}``) parses as a set, which equals no single-value
reference. Equal values in any form score 1 (``1/2``, ``0.5``, ``\\frac{1}{2}``), except for
tasks marked ``exact`` (e.g. "simplify the fraction"), whose written form must match too.

``math-verify``'s own timeouts use ``SIGALRM``, which works only on the main thread; they are
off here, and ``grade`` runs it in a worker thread under an asyncio deadline instead. An answer
that makes sympy run past the deadline scores 0 (its thread is left to finish in the background).
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass

from agentgym.core.aio import deadline
from agentgym.core.errors import DeadlineExceeded

__all__ = ["MAX_ANSWER_CHARS", "Verdict", "all_boxed", "grade", "last_boxed", "verify_answer"]

MAX_ANSWER_CHARS = 300
log = logging.getLogger(__name__)
_BOXED_RE = re.compile(r"\\boxed\s*\{")
_FRAC_RE = re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}")


class _QuietTimeoutWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


def all_boxed(text: str) -> list[str]:
    """The contents of every ``\\boxed{...}`` in ``text`` (braces balanced), in order."""
    found = []
    for match in _BOXED_RE.finditer(text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                found.append(text[start:i])
                break
    return found


def last_boxed(text: str) -> str | None:
    boxes = all_boxed(text)
    return boxes[-1].strip() if boxes else None


@dataclass(frozen=True)
class Verdict:
    correct: bool
    answer: str | None
    """The graded box's content (``None`` when there was no box)."""
    reason: str
    """``correct``, ``wrong``, ``no_boxed_answer``, ``several_boxed_answers``, ``too_long`` or
    ``grader_timeout``."""


def _written_form(text: str) -> str:
    text = _FRAC_RE.sub(r"\1/\2", text.strip().strip("$"))
    return re.sub(r"\s+", "", text)


def require_math_verify() -> None:
    """Raise an ``ImportError`` naming the extra to install when math-verify is missing."""
    import importlib.util

    if importlib.util.find_spec("math_verify") is None:
        raise ImportError("Math-v0 grades with math-verify. Fix: pip install 'agentgym[math]'")


def verify_answer(reference: str, answer: str, *, exact: bool = False) -> bool:
    """Whether ``answer`` equals ``reference`` (blocking; no timeout of its own)."""
    from math_verify import parse, verify

    for name in ("math_verify.parser", "math_verify.grader"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietTimeoutWarning) for f in logger.filters):
            logger.addFilter(_QuietTimeoutWarning())
    try:
        gold = parse(f"${reference}$", parsing_timeout=None)  # type: ignore[arg-type]
        predicted = parse(f"\\boxed{{{answer}}}", parsing_timeout=None)  # type: ignore[arg-type]
        equal = bool(gold and predicted and verify(gold, predicted, timeout_seconds=None))  # type: ignore[arg-type]
    except Exception:  # model text that breaks the parser is a wrong answer, not a crash
        log.debug("math-verify failed on %r", answer, exc_info=True)
        return False
    return equal and (not exact or _written_form(answer) == _written_form(reference))


async def grade(response: str, reference: str, *, exact: bool, timeout: float) -> Verdict:
    """Grade the last boxed answer of ``response`` (the module docstring gives the rule)."""
    boxes = [b.strip() for b in all_boxed(response)]
    if not boxes:
        return Verdict(False, None, "no_boxed_answer")
    answer = boxes[-1]
    if len(set(boxes)) > 1:
        return Verdict(False, answer, "several_boxed_answers")
    if len(answer) > MAX_ANSWER_CHARS:
        return Verdict(False, answer[:MAX_ANSWER_CHARS], "too_long")
    try:
        async with deadline(timeout, "math-verify"):
            correct = await asyncio.to_thread(verify_answer, reference, answer, exact=exact)
    except DeadlineExceeded:
        return Verdict(False, answer, "grader_timeout")
    return Verdict(correct, answer, "correct" if correct else "wrong")
