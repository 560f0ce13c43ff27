"""The curated MiniWoB++ tasks: those the text action grammar can solve, with a difficulty each.

A task is a page of the ``miniwob`` package (``miniwob/html/miniwob/<name>.html``). The ones left
out need coordinates (drag, draw, click on a canvas or a colour), reading pictures, or timing;
the ``-nodelay`` variants are preferred where a delay only slows the page down.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentgym.core.errors import ConfigError
from agentgym.envs.web.site import WebTask

__all__ = ["CURATED", "MIX", "curated_task", "select_tasks"]

MIX = "mix"
"""``task=`` value that serves every curated task (``reset(seed=s)`` picks one)."""

# name -> (difficulty, what the page asks for); the instruction itself is the page's utterance.
_CURATED: dict[str, tuple[int, str]] = {
    "click-button": (0, "click the button named in the instruction"),
    "click-link": (0, "click the link named in the instruction"),
    "click-test": (0, "click the only button"),
    "click-test-2": (0, "click button ONE, not TWO"),
    "focus-text": (0, "focus the only text box"),
    "click-dialog": (0, "close a dialog with its x button"),
    "unicode-test": (0, "click the button with a non-ASCII label"),
    "click-tab": (1, "open the tab named in the instruction"),
    "click-button-sequence": (1, "click button ONE, then button TWO"),
    "focus-text-2": (1, "focus the n-th of three text boxes"),
    "click-widget": (1, "click a widget of the named kind"),
    "click-dialog-2": (1, "click the named button of a dialog"),
    "click-collapsible-nodelay": (1, "expand a section, then submit"),
    "click-option": (1, "select one radio button, then submit"),
    "click-checkboxes": (1, "tick the named checkboxes, then submit"),
    "choose-list": (1, "select an item of a drop-down list, then submit"),
    "enter-text": (1, "type a word into a text field, then submit"),
    "enter-text-dynamic": (1, "type a random string into a text field, then submit"),
    "enter-text-2": (2, "type a word in upper or lower case, then submit"),
    "enter-password": (2, "type a password into two fields, then submit"),
    "login-user": (2, "fill username and password, then log in"),
    "login-user-popup": (2, "log in, dismissing a popup that may appear"),
    "simple-arithmetic": (2, "type the result of a sum shown on the page, then submit"),
    "use-autocomplete-nodelay": (2, "type an item matching a prefix and suffix, then submit"),
}

CURATED: tuple[WebTask, ...] = tuple(
    WebTask(
        task_id=name,
        instruction=f"MiniWoB++ {name}: {summary}.",
        difficulty=difficulty,
        data={"page": f"miniwob/{name}.html"},
    )
    for name, (difficulty, summary) in _CURATED.items()
)
"""Every curated task, easiest first within the declaration order above."""


def curated_task(name: str) -> WebTask:
    """The curated task called ``name``; ``ConfigError`` naming the choices otherwise."""
    for task in CURATED:
        if task.task_id == name:
            return task
    names = ", ".join(t.task_id for t in CURATED)
    fix = f"pass {MIX!r} or one of {names}"
    raise ConfigError("task", name, "is not a curated MiniWoB++ task", fix)


def select_tasks(task: str | Sequence[str]) -> tuple[WebTask, ...]:
    """The tasks ``task=`` asks for: ``"mix"`` (all), one name, or a sequence of names."""
    if isinstance(task, str):
        return CURATED if task == MIX else (curated_task(task),)
    if not task:
        raise ConfigError("task", task, "is an empty list", f"pass {MIX!r} or task names")
    return tuple(curated_task(name) for name in task)
