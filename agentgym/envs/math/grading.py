"""Grade a ``\\boxed{}`` answer against a reference with ``math-verify``.

The rule: the answer is the content of the **last** ``\\boxed{...}`` of the response. It scores 0
when there is none, when the response boxes two or more *different* answers (a hedge: boxing the
same answer twice is fine; against a reference with several values, the boxes together are the
answer, so ``\\boxed{1}`` and ``\\boxed{2}`` answer ``1, 2``), when the box holds more than
``MAX_ANSWER_CHARS`` characters, when it hedges inside one box, or when ``math-verify`` finds it
unequal to the reference. Equal values
in any form score 1 (``1/2``, ``0.5``, ``\\frac{1}{2}``, ``\\dfrac12``, ``x = 0.5``), except for
tasks marked ``exact`` (e.g. "simplify the fraction"), whose written form must match too.

A hedge is a box that states several values where the reference has fewer, by any notation:
``3 \\lor 4``, ``\\{3\\} \\cup \\{4\\}``, ``3 \\text{ or } 4``, ``3, 4``, ``\\pm 3``,
``x = 3 \\lor x = 4``, ``3 \\le x \\le 4``, ``4 = 3``, ``3 \\; 4``. ``answers.stated`` lists the
values a box states; each must equal a value of the reference, and a reference with several
values (``1, 2``, ``\\{1, 2\\}``, ``\\pm 3``) must get exactly its values, in any order and
notation. math-verify alone would not do: around a command it does not know it keeps the last
expression (``3 \\star 4`` reads as 4), so notation outside what ``answers`` knows to be part
of one value scores 0 unless the reference uses it too. Tuples and intervals (``(1, 2)``,
``[2, 4]``) are single values, compared whole (so an interval never equals a number in it).

What is one value (``answers.canonical`` writes each plainly before anything is compared): a
number with thousands separators in any spelling (``1,000``, ``1{,}000``, ``1,\\!000``,
``1\\,000``, ``1~000``; a comma inside the brackets of an interval, tuple or set separates
values instead, so ``(2,12) \\cup (12,102)`` is two intervals); a percent (``35.0\\%`` is
``35\\%``); a number in a base (``204_5`` is 54); a set in plain braces (``{2, 3}``, its
elements the values); ``name = value`` (the name is the subject, ``(x, y) = (5, 8)`` included);
an inequality, when the reference is one, compared whole (``x < 1`` equals ``-x > -1``, and
``-2 \\le x \\le 7`` equals ``x \\in [-2, 7]``); sums, integrals and limits, whose bound
variable may have any name; units and text around one number. ``docs/math_grading.md`` lists
them, and how the rule agrees with reference graders' test suites.

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
from agentgym.envs.math.answers import MAX_VALUES, canonical, numerals, perturbations, stated
from agentgym.extras import pip_install

__all__ = [
    "MAX_ANSWER_CHARS",
    "Verdict",
    "all_boxed",
    "check_answer",
    "grade",
    "last_boxed",
    "verify_answer",
]

MAX_ANSWER_CHARS = 300
log = logging.getLogger(__name__)
_BOXED_RE = re.compile(r"\\boxed\s*\{")
_INEQUALITY = re.compile(
    r"[<>]|\\(?:le|ge|leq|geq|lt|gt|leqslant|geqslant|neq|ne)(?![A-Za-z])"
    r"|\\in\s*(?:\\left)?\s*[(\[]"
)
_MEMBER = re.compile(r"\s*[A-Za-z](?:_\{?\w+\}?)?\s*\\in(?![A-Za-z])")
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
    detail: str = ""
    """Why a box that hedges is wrong (the values it states, or its unclear notation)."""


def _written_form(text: str) -> str:
    text = _FRAC_RE.sub(r"\1/\2", text.strip().strip("$"))
    return re.sub(r"\s+", "", text)


def require_math_verify() -> None:
    """Raise an ``ImportError`` naming the extra to install when math-verify is missing."""
    import importlib.util

    if importlib.util.find_spec("math_verify") is None:
        raise ImportError(f"Math-v0 grades with math-verify. Fix: {pip_install('math')}")


def verify_answer(reference: str, answer: str, *, exact: bool = False) -> bool:
    """Whether ``answer`` equals ``reference`` (blocking; no timeout of its own)."""
    sets = _inequality(reference)  # ``-2 \\le x \\le 7`` is ``x \\in [-2, 7]``, both ways
    equal = _same(f"${reference}$", f"\\boxed{{{answer}}}", sets=sets)
    return equal and (not exact or _written_form(answer) == _written_form(reference))


def _inequality(text: str) -> bool:
    """Whether ``text`` is an inequality, or a membership in an interval (``x \\in [1, 2)``)."""
    return bool(_INEQUALITY.search(text))


def _same(gold_text: str, predicted_text: str, *, sets: bool = False) -> bool:
    """Whether math-verify reads the two texts as equal (a parser failure: not equal)."""
    from math_verify import parse, verify

    for name in ("math_verify.parser", "math_verify.grader"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietTimeoutWarning) for f in logger.filters):
            logger.addFilter(_QuietTimeoutWarning())
    try:
        gold = parse(gold_text, parsing_timeout=None)  # type: ignore[arg-type]
        predicted = parse(predicted_text, parsing_timeout=None)  # type: ignore[arg-type]
        return bool(
            gold
            and predicted
            and verify(gold, predicted, timeout_seconds=None, allow_set_relation_comp=sets)
        )  # type: ignore[arg-type]
    except Exception:  # model text that breaks the parser is a wrong answer, not a crash
        log.debug("math-verify failed on %r", predicted_text, exc_info=True)
        return False


def check_answer(reference: str, answer: str, *, exact: bool = False) -> tuple[bool, str]:
    """Whether ``answer`` states exactly the values of ``reference`` (blocking), and if it
    hedges, how: the module docstring gives the rule."""
    if numerals(reference) != numerals(answer):
        bases = sorted({base for _, base in numerals(reference)}) or [10]
        return False, f"the reference writes its numbers in base {', '.join(map(str, bases))}"
    reference, answer = canonical(reference), canonical(answer)
    gold = stated(reference)
    # An equation or an inequality is one value: compare it whole (``x < 1`` is ``-x > -1``).
    equation = gold.relation or _inequality(reference)
    if equation:
        gold = stated(reference, relations=False)
    said = stated(answer, allowed=gold.vocabulary, relations=not equation)
    gold.values = list(dict.fromkeys(gold.values))  # the same value written twice is one
    said.values = list(dict.fromkeys(said.values))
    if equation and _MEMBER.match(answer) and len(said.values) == answer.count(r"\cup") + 1:
        said.values = [answer]  # x \in (a, b) \cup (c, d): one set, against an inequality
    if said.unclear:
        return False, f"notation that could hide another value: {' '.join(said.unclear[:5])}"
    if len(said.values) > MAX_VALUES:
        return False, f"the box states {len(said.values)} values"
    if len(gold.values) <= 1:
        # Each value as answers read it, and the box as math-verify reads it, must be right.
        target = gold.values[0] if gold.values else reference
        if not all(verify_answer(target, v) for v in said.values):
            several = len(said.values) > 1
            return False, f"the box states several values: {'; '.join(said.values)}" * several
        if not verify_answer(reference, answer, exact=exact):
            return False, ""
    elif len(said.values) != len(gold.values) or not _same_values(gold.values, said.values):
        return False, f"the box states {'; '.join(said.values)}"
    return _read_whole(said.values)


def _read_whole(values: list[str]) -> tuple[bool, str]:
    """Whether math-verify read every part of each value: change one part, the value changes."""
    for value in values:
        for variant, part in perturbations(value):
            if _same(f"\\boxed{{{value}}}", f"\\boxed{{{variant}}}"):
                return False, f"math-verify ignores {part!r} in {value!r}: unclear notation"
    return True, ""


def _several_valued(reference: str) -> bool:
    """Whether ``reference`` states several values (``1, 2``, ``\\{1, 2\\}``, ``\\pm 3``)."""
    text = canonical(reference)
    relations = not (stated(text).relation or _inequality(text))
    return len(set(stated(text, relations=relations).values)) > 1


def _same_values(gold: list[str], said: list[str]) -> bool:
    """Whether each value said equals a different value of ``gold`` (equal lengths)."""
    left = list(gold)
    for value in said:
        match = next((g for g in left if verify_answer(g, value)), None)
        if match is None:
            return False
        left.remove(match)
    return True


async def grade(response: str, reference: str, *, exact: bool, timeout: float) -> Verdict:
    """Grade the last boxed answer of ``response`` (the module docstring gives the rule)."""
    boxes = [b.strip() for b in all_boxed(response)]
    if not boxes:
        return Verdict(False, None, "no_boxed_answer")
    answer = boxes[-1]
    if len(set(boxes)) > 1:
        if not _several_valued(reference):
            return Verdict(False, answer, "several_boxed_answers")
        answer = ", ".join(dict.fromkeys(boxes))  # one box per value of the reference: all of them
    if len(answer) > MAX_ANSWER_CHARS:
        return Verdict(False, answer[:MAX_ANSWER_CHARS], "too_long")
    try:
        async with deadline(timeout, "math-verify"):
            correct, detail = await asyncio.to_thread(check_answer, reference, answer, exact=exact)
    except DeadlineExceeded:
        return Verdict(False, answer, "grader_timeout")
    return Verdict(correct, answer, "correct" if correct else "wrong", detail)
