"""Bug reports written from a bug's failing behaviour, as a user would file them.

``problem_statement`` sees only what running the tests shows: the failing tests' ids, pytest's
one-line reasons (assertion messages, exception types) and a command that reproduces them. It
never sees the edit, so the report cannot point at the changed line. One of ``TEMPLATES`` is
chosen per task by a seeded draw.
"""

from __future__ import annotations

import random
import re

__all__ = ["TEMPLATES", "problem_statement"]

MAX_TESTS = 6
MAX_REASONS = 3
MAX_REASON_CHARS = 300


def _subject(tests: list[str]) -> str:
    """The code the failing tests are about, from their names (``test_parse_dates`` ->
    ``parse dates``)."""
    names = [t.rsplit("::", 1)[-1].split("[", 1)[0] for t in tests]
    words = [re.sub(r"^test_?", "", name).replace("_", " ").strip() for name in names]
    words = [w for w in words if w]
    return words[0] if words else "the tests"


def _module(tests: list[str]) -> str:
    path = tests[0].split("::", 1)[0]
    stem = path.rsplit("/", 1)[-1].removesuffix(".py")
    return stem.removeprefix("test_").removesuffix("_test") or stem


def _reasons(tests: list[str], messages: dict[str, str]) -> str:
    seen: list[str] = []
    for test in tests:
        reason = messages.get(test, "").strip()
        if reason and reason not in seen:
            seen.append(reason[:MAX_REASON_CHARS])
        if len(seen) == MAX_REASONS:
            break
    return "\n".join(seen)


def _listing(tests: list[str]) -> str:
    shown = "\n".join(f"- `{t}`" for t in tests[:MAX_TESTS])
    more = len(tests) - MAX_TESTS
    return shown + (f"\n- ... and {more} more" if more > 0 else "")


def _command(tests: list[str]) -> str:
    return "python -m pytest " + " ".join(_quote(t) for t in tests[:MAX_TESTS])


def _quote(test: str) -> str:
    return f"'{test}'" if re.search(r"[\s\[\]()*?]", test) else test


def _bug_report(c: dict[str, str]) -> str:
    return (
        f"{c['module']}: {c['subject']} is broken\n\n"
        f"Some of the tests of `{c['module']}` fail on a clean checkout:\n\n{c['listing']}\n\n"
        f"To reproduce:\n\n```\n{c['command']}\n```\n\n"
        + (f"What I get:\n\n```\n{c['reasons']}\n```\n\n" if c["reasons"] else "")
        + "The tests describe the behaviour I expect; the code should satisfy them without "
        "changing the tests.\n"
    )


def _ci_failure(c: dict[str, str]) -> str:
    return (
        f"CI is red: {c['count']} failing in {c['where']}\n\n"
        f"Running the test suite gives failures in {c['where']}:\n\n```\n{c['command']}\n```\n\n"
        + (f"```\n{c['reasons']}\n```\n\n" if c["reasons"] else "")
        + f"Failing tests:\n\n{c['listing']}\n\nEverything else passes. Please fix the library "
        "code so that these tests pass again.\n"
    )


def _user_question(c: dict[str, str]) -> str:
    return (
        f"Wrong result from {c['subject']}?\n\n"
        f"I was relying on the behaviour checked by `{c['first']}`, and it no longer holds. "
        + (f"The test stops with:\n\n```\n{c['reasons']}\n```\n\n" if c["reasons"] else "\n\n")
        + f"Reproduce with:\n\n```\n{c['command']}\n```\n\n"
        + (f"Other tests that fail the same way:\n\n{c['others']}\n\n" if c["others"] else "")
        + "Could you take a look?\n"
    )


def _terse(c: dict[str, str]) -> str:
    return (
        f"Regression in {c['module']} ({c['subject']})\n\n"
        f"`{c['command']}` fails"
        + (f": `{c['reasons'].splitlines()[0]}`" if c["reasons"] else "")
        + f".\n\nAffected tests:\n\n{c['listing']}\n"
    )


TEMPLATES = {
    "bug_report": _bug_report,
    "ci_failure": _ci_failure,
    "user_question": _user_question,
    "terse": _terse,
}


def problem_statement(
    fail_to_pass: list[str], messages: dict[str, str], seed: int | str
) -> tuple[str, str]:
    """A bug report for ``fail_to_pass`` and its template's name; ``messages`` maps a test id
    to pytest's one-line reason it failed."""
    tests = sorted(fail_to_pass)
    files = sorted({test.split("::", 1)[0] for test in tests})
    context = {
        "module": _module(tests),
        "subject": _subject(tests),
        "where": f"`{files[0]}`" if len(files) == 1 else f"{len(files)} test files",
        "first": tests[0],
        "count": f"{len(tests)} test{'s' if len(tests) != 1 else ''}",
        "listing": _listing(tests),
        "others": _listing(tests[1:]) if len(tests) > 1 else "",
        "command": _command(tests),
        "reasons": _reasons(tests, messages),
    }
    name = random.Random(str(seed)).choice(sorted(TEMPLATES))
    return TEMPLATES[name](context), name
