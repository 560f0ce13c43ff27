"""Math-v0 against the test suites of reference graders: the cases (inputs and expected verdicts)
of Math-Verify, MATH's ``is_equiv``, Qwen2.5-Math's ``math_equal``, DeepScaleR's (rLLM's) math
reward and verl's ``is_equiv``, ported as data in ``math_reference_suites/`` (each file names its
repository, commit, paths and licence).

Each case is graded by Math-v0's rule (``grade``: the boxed answer against the reference). A case
where Math-v0 disagrees on purpose carries ``deliberate`` (the reason; ``docs/math_grading.md``
lists them), a known shortfall ``known``; a disagreement with neither fails the test and names
the case, and so does a case marked deliberate that now agrees (the docs would be stale). Cases
that test finding an answer in free text (``scope``) are counted but not graded: Math-v0 grades
only the box."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentgym.core import run_sync
from agentgym.envs.math.grading import grade

SUITES = Path(__file__).parent / "math_reference_suites"
THIS = "tests/envs/test_math_reference_graders.py"
BAR = 0.98
# Raw agreement (deliberate disagreements counted as disagreements) where the reference suite's
# own wrong verdicts alone keep it under the bar; docs/math_grading.md gives the argument.
RAW_FLOOR = {"math_verify": 0.9, "math_is_equiv": 0.875}


def _load(name: str) -> list[dict[str, Any]]:
    suite = json.loads((SUITES / f"{name}.json").read_text())
    assert all(suite[key] for key in ("repository", "commit", "licence")), name
    return [case for case in suite["cases"] if not case.get("scope")]


def _check(name: str, cases: list[dict[str, Any]], *, whole: bool = True) -> None:
    agree, undocumented, stale = 0, [], []
    for case in cases:
        # A generous deadline: the rule is measured here, not the speed of a loaded CI machine.
        verdict = run_sync(grade(case["response"], case["reference"], exact=False, timeout=120))
        excused = case.get("deliberate") or case.get("known")
        if verdict.correct == case["expected"]:
            agree += 1
            if excused:
                stale.append(case["test"])
        elif not excused:
            undocumented.append(
                f"{case['test']}: {case['reference']!r} vs {verdict.answer!r} expected "
                f"{case['expected']}, got {verdict.reason} {verdict.detail}"
            )
    assert not undocumented, "disagreements not in docs/math_grading.md:\n" + "\n".join(
        undocumented
    )
    assert not stale, f"marked as disagreements but now agree: {stale}"
    raw = agree / len(cases)
    assert not whole or raw >= min(BAR, RAW_FLOOR.get(name, BAR)), (
        f"{name}: {agree}/{len(cases)} agree"
    )


@pytest.mark.parametrize("name", ["math_is_equiv", "qwen25_math", "deepscaler", "verl"])
def test_agreement_with_a_reference_suite(name: str) -> None:
    _check(name, _load(name))


@pytest.mark.slow  # about 40 s of CPU on 2 cores: math-verify and sympy on 210 cases
def test_agreement_with_math_verify_tests() -> None:
    _check("math_verify", _load("math_verify"))


@pytest.mark.covered_by(f"{THIS}::test_agreement_with_math_verify_tests")
def test_agreement_with_a_sample_of_math_verify_tests() -> None:
    """Every eighth case, and every deliberate disagreement (so the docs' list is checked)."""
    cases = _load("math_verify")
    sample = [c for i, c in enumerate(cases) if i % 8 == 0 or c.get("deliberate") or c.get("known")]
    _check("math_verify", sample, whole=False)
