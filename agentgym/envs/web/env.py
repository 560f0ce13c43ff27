"""``WebEnv``: a task on a web site, in a real Chromium, as chat turns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from agentgym.core.env import AgentEnv
from agentgym.envs.web.site import Site

__all__ = ["WebEnv"]


class WebEnv(AgentEnv):
    """Do a task on a web site in a real Chromium (docstring completed below)."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "human", "rgb_array"],
        "render_fps": 4,
    }

    def __init__(
        self,
        *,
        site: Site | None = None,
        start_url: str | None = None,
        tasks: str | Path | Sequence[Mapping[str, Any]] | None = None,
        max_steps: int = 30,
        max_obs_chars: int = 12_000,
        action_choices: int | None = 64,
        invalid_action_penalty: float = 0.0,
        screenshot_in_info: bool = False,
        viewport: tuple[int, int] = (1280, 720),
        recycle_every: int = 200,
        step_timeout: float = 30.0,
        settle_timeout: float = 2.0,
        tool: bool = True,
        tool_parser: str = "hermes",
        render_mode: str | None = None,
    ) -> None:
        raise NotImplementedError("WebEnv is being written; its signature is final")
