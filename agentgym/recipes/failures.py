"""What an evaluation could not judge: episodes that failed outside the model (``infra_error``:
a server down, a sandbox or browser lost, an exception in the env's own code), grouped by cause
for a summary, and why nothing was judged, with the fix.

::

    failure_of(episode)          # ("infra", "ConnectionRefusedError: ...") or None
    by_cause([("infra", "ConnectionRefusedError: [Errno 111] ..."), ...])
                                 # [("infra", 4, "ConnectionRefusedError: [Errno 111] ...")]
"""

from __future__ import annotations

from collections.abc import Sequence

from agentgym.core.errors import Error
from agentgym.core.types import Episode
from agentgym.trainers.episodes import drop_cause

__all__ = ["NothingJudged", "by_cause", "failure_of", "unjudged_reason"]


class NothingJudged(Error, RuntimeError):
    """An evaluation judged none of its episodes because they failed outside the model; the
    message counts the causes and names the fix."""


def failure_of(episode: Episode) -> tuple[str, str] | None:
    """``(kind, error)`` of an episode that failed outside the model (``info["infra_error"]``):
    kind ``"env"`` where the env's own code raised, else ``"infra"``; error: what failed, and
    the env call that raised it where known (``drop_cause``, as training counts them). None
    for an episode the model played out."""
    return drop_cause(episode) if episode.infra_error else None


def _cause(error: str) -> str:
    """The part of an error text that names its cause (``"ConnectionRefusedError"`` of
    ``"ConnectionRefusedError: [Errno 111] ..."``): errors with the same cause are one group."""
    head = error.split(":", 1)[0].strip()
    return head if head.replace(".", "").replace(" ", "").isidentifier() else error


def by_cause(failures: Sequence[tuple[str, str]]) -> list[tuple[str, int, str]]:
    """``(kind, episodes, example error)`` per cause of ``(kind, error)`` failures, the most
    frequent first."""
    groups: dict[tuple[str, str], list[str]] = {}
    for kind, error in failures:
        groups.setdefault((kind, _cause(error)), []).append(error)
    ranked = sorted(groups.items(), key=lambda item: -len(item[1]))
    return [(kind, len(errors), errors[0]) for (kind, _), errors in ranked]


def unjudged_reason(episodes: int, failed: Sequence[str], unknown: int) -> str:
    """Why none of ``episodes`` was judged, with the fix: ``failed`` holds the kind of each
    failure outside the model, ``unknown`` counts the episodes without ``info["success"]``."""
    if not episodes:
        return "no episode was played. Fix: ask for at least one episode"
    why, fixes = [], []
    if failed:
        why.append(f"{len(failed)} failed outside the model")
    if "infra" in failed:
        fixes.append("make the server, sandbox or browser the env needs reachable (see the causes)")
    if "env" in failed:
        fixes.append("fix the exception in the env's code (its traceback is in the log)")
    if unknown:
        why.append(f"{unknown} ended without info['success']")
        fixes.append("make the env set info['success'] on an episode's last step")
    return (
        f"no episode could be judged: of {episodes}, {' and '.join(why)}. Fix: {'; '.join(fixes)}"
    )
