"""What Code-v0 says to the model, and how it finds the code in an answer."""

from __future__ import annotations

import re

from agentgym.envs.code.grader import GradeResult
from agentgym.envs.code.tasks import CodeTask

__all__ = ["last_code_block", "result_text", "system_prompt", "task_text"]

# A fence opens a line (```, optionally a language tag) and closes on a line of its own.
_BLOCK_RE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)


def last_code_block(text: str) -> str | None:
    """The body of the last closed fenced code block in ``text``, or ``None`` if there is none."""
    blocks = _BLOCK_RE.findall(text)
    return blocks[-1] if blocks else None


def system_prompt(max_attempts: int) -> str:
    revise = (
        f" If it fails, you are shown the first failing test and may revise it "
        f"({max_attempts} attempts in all)."
        if max_attempts > 1
        else ""
    )
    return (
        "You are an expert Python programmer. Solve the task and answer with your solution in "
        "one fenced code block:\n```python\n# your code\n```\n"
        "Only the last fenced code block of your answer is graded: it runs with Python 3 against "
        f"hidden tests, with no network access.{revise}"
    )


def task_text(task: CodeTask) -> str:
    parts = [task.question.strip()] if task.question.strip() else []
    if task.format == "function":
        if task.prompt.strip():
            parts.append(
                "Complete this Python code. Write the complete function, signature included "
                "(you may rely on the imports and helpers shown):\n"
                f"```python\n{task.prompt.rstrip()}\n```"
            )
        else:
            parts.append("Write the Python code; the tests call the function(s) it defines.")
    else:
        parts.append(
            "Write a complete Python 3 program that reads the input from standard input and "
            "writes the answer to standard output."
        )
    return "\n\n".join(parts)


def result_text(result: GradeResult, attempts_left: int) -> str:
    """The verdict shown to the model after an attempt."""
    if result.all_passed:
        return f"All {result.total} tests passed."
    if result.infra_error is not None:
        return "The sandbox failed before your code could be graded (not your fault)."
    summary = f"{result.passed}/{result.total} tests passed."
    text = f"{summary}\n{result.failure}" if result.failure else summary
    if attempts_left > 0:
        text += f"\n\nRevise your code ({attempts_left} attempt(s) left)."
    return text


NO_CODE = (
    "No fenced code block found. Put your solution in a block that starts with ```python on its "
    "own line and ends with ``` on its own line."
)
