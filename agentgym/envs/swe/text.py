"""The few fixed texts the SWE env shows the model."""

from __future__ import annotations

from agentgym.core.parsing import call_format
from agentgym.envs.swe.grader import GradeResult

__all__ = ["NO_TOOL_CALL", "SANDBOX_FAILED", "SYSTEM", "system_prompt", "verdict"]

SYSTEM = (
    "You are in a git repository of a Python project, at the commit where the issue below was "
    "reported. Every tool works in the repository root. Fix the issue in the source code, check "
    "your fix, then call submit. Changes to tests and pytest configuration are not graded: the "
    "project's own tests decide."
)


def system_prompt(tool_parser: str) -> str:
    """``SYSTEM`` and how to write a tool call that ``tool_parser`` reads."""
    return f"{SYSTEM} {call_format(tool_parser)}".strip()


NO_TOOL_CALL = "No tool call found. Use the tools to work on the repository; call submit when done."
SANDBOX_FAILED = "The sandbox failed (not your fault); the episode ends."


def verdict(result: GradeResult, submitted: bool) -> str:
    """The last message: what grading found, without the tests' contents. After ``submit``
    (whose own answer already says ``Submitted.``) it is the finding alone."""
    head = "" if submitted else "The turn limit was reached; your changes were graded. "
    return head + _finding(result)


def _finding(result: GradeResult) -> str:
    if result.infra_error is not None:
        return "Grading failed (not your fault)."
    if result.reason == "diff_too_large":
        return "The diff is too large to grade: it scores 0."
    if result.reason in ("no_diff", "patch_failed"):
        return "Your changes could not be read or applied: they score 0."
    if result.reason == "tampering":
        return "Your changes tamper with the interpreter or the test runner: they score 0."
    tests = {**result.fail_to_pass, **result.pass_to_pass}
    passed = sum(outcome == "passed" for outcome in tests.values())
    if result.resolved:
        return f"All {len(tests)} tests that judge the fix pass: the issue is resolved."
    return f"{passed} of the {len(tests)} tests that judge the fix pass: not resolved."
