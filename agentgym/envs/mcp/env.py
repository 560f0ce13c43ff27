"""``MCPEnv``: do a task with the tools of one or more MCP servers."""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentgym.core.aio import run_sync
from agentgym.core.env import AgentEnv, StepResult
from agentgym.core.errors import ConfigError, DeadlineExceeded
from agentgym.core.parsing import call_format
from agentgym.core.tools import Tool, clip
from agentgym.core.types import Action, Observation, system, user
from agentgym.envs.mcp import pool
from agentgym.envs.mcp.config import STORE_SERVER, ServerConfig, parse_servers
from agentgym.envs.mcp.session import (
    EPISODE_META_KEY,
    RemoteTool,
    ServerFailed,
    ServerGroup,
    require_mcp,
)
from agentgym.envs.mcp.tasks import MCPTask, answer_correct, load_tasks, value_matches
from agentgym.envs.tasks import choose_task
from agentgym.envs.validate import choice, integer, seconds

__all__ = ["RULES", "MCPEnv"]

log = logging.getLogger(__name__)

RULES = (
    "Do the task with the tools. Call as many tools as you need, several at once when they do "
    "not depend on each other. When you are done, reply without tool calls and give your final "
    "answer in <answer></answer> tags."
)
SERVER_FAILED = "Error: the tool server failed (not your fault); the episode ends here."
# Tool listings per server set: the 32 envs of a vector env start one server to list, not 32.
_TOOL_CACHE: dict[tuple[ServerConfig, ...], tuple[RemoteTool, ...]] = {}


@dataclass
class _Episode:
    task: MCPTask
    key: str
    turns: int = 0
    tool_calls: int = 0
    infra_error: str | None = None


class MCPEnv(AgentEnv):
    """Do a task with the tools of MCP servers; the answer or the servers' end state is checked.

    Description:
        The env connects to one or more MCP servers with the official ``mcp`` SDK (stdio or
        streamable HTTP), lists their tools and offers them to the model. A task is a prompt
        with an expected answer and/or checks of the servers' end state (calls made after the
        episode: a row exists, a file has content); ``agentgym.envs.mcp.tasks`` documents the
        JSONL fields. By default the server is the shipped store / inventory server
        (``agentgym.envs.mcp.servers.store``) with 140 seeded tasks that need two to four tool
        calls each. ``reset(seed=s)`` draws a task from ``np_random``;
        ``options={"task_id": ...}`` pins one by id or index.

    Observation:
        On reset, a system message (use the tools, how to write a tool call in the
        ``tool_parser`` format, answer in ``<answer></answer>``) and a user message with the
        prompt. A tool step adds one tool message per call, in call order:
        the result's text (structured content as JSON when it has no text; images, audio and
        resources as a short placeholder), ``Error: ...`` for error results, unknown tools,
        arguments that break the tool's schema, malformed calls and calls past their deadline.
        The final step adds one user message: ``Correct.`` or ``Incorrect.``.

    Action:
        Text with tool calls in the ``tool_parser``'s format (hermes ``<tool_call>`` by
        default) or an assistant message with structured ``tool_calls``. A turn with calls runs
        them concurrently; a turn without calls is the final answer.

    Tools:
        The servers' own tools, under their names (with the server's ``prefix``; characters
        outside ``[a-zA-Z0-9_-]`` become ``_``). Their schemas are in ``info["tools"]``.

    Reward:
        1.0 when the final answer matches and every state check passes, else 0.0; 0.0 when
        truncated. ``info["reward_components"]`` is ``{"correct": reward}``.

    Episode end:
        Terminated by the final answer; truncated after ``max_turns`` turns
        (``info["truncation_reason"] == "max_turns"``). A server that crashes, closes the
        connection or stops answering (a call past ``call_timeout`` whose server then fails a
        ``probe_timeout`` health check) ends the episode truncated with ``info["infra_error"]``
        True and ``truncation_reason == "infra_error"``; the next reset starts afresh. A reset
        whose server cannot start raises ``agentgym.error.InfraError`` (a vector env rebuilds
        the env and retries). Stepping an ended episode raises ``EnvStateError``.

    Sessions:
        ``session="episode"`` (default): every reset closes the episode's sessions and opens
        new ones, so a stdio server starts afresh in a clean state (its process group is killed
        on close). ``"pooled"``: envs of one process share sessions (see
        ``agentgym.envs.mcp.pool``), for stateless servers. Every tool call carries the
        ``_meta`` key ``"agentgym/episode"``, a fresh id per episode, that servers may key
        per-episode state on. ``close()`` ends every server process the env started.

    Arguments:
        servers: a server dict, or a list (``{"command", "args", "env", "cwd"}`` for stdio,
            ``{"url", "headers"}`` for HTTP, optional ``"name"`` and ``"prefix"``;
            ``agentgym.envs.mcp.config``). ``None``: the shipped store server.
        tasks: a JSONL path or a list of task dicts; ``None``: the store tasks (only with the
            default server).
        size, data_seed: number and seed of the generated store tasks.
        session: ``"episode"`` or ``"pooled"``.
        max_turns: turns per episode.
        call_timeout: seconds per tool call. probe_timeout: seconds the health check after a
            call's timeout may take. connect_timeout: seconds to start and connect a server.
        max_result_chars: characters of a tool result shown to the model.
        system_prompt: the system message (``None``: ``RULES`` and the ``tool_parser``'s
            ``call_format``).
        server_logs: let stdio servers write to this process's stderr (default: discarded).
        tool_parser: parser for tool calls written as text. render_mode: ``"ansi"``/``"human"``.

    Step info keys: ``task_id``, ``turn``, ``tool_calls``, ``success``, ``reason``
    (``"tool_call"``, ``"answer"``, ``"max_turns"`` or ``"infra_error"``), ``answer_correct``
    (``None`` without an expected answer), ``checks_passed``, ``checks_total``, ``infra_error``,
    ``reward_components``; ``truncation_reason`` when truncated, ``error`` on an infra error.
    Reset info keys: ``tools``, ``task_id``, ``servers``.

    Version history:
        v0: first version. Before the first release, the default system message says how to
        write a tool call in text (``agentgym.core.parsing.call_format``); wording only, no bump.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        *,
        servers: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
        tasks: str | Path | Sequence[Mapping[str, Any]] | None = None,
        size: int = 140,
        data_seed: int = 0,
        session: Literal["episode", "pooled"] = "episode",
        max_turns: int = 12,
        call_timeout: float = 30.0,
        probe_timeout: float = 5.0,
        connect_timeout: float = 30.0,
        max_result_chars: int = 16_000,
        system_prompt: str | None = None,
        server_logs: bool = False,
        tool_parser: str = "hermes",
        render_mode: str | None = None,
    ) -> None:
        require_mcp()
        choice("session", session, ("episode", "pooled"))
        self.configs = parse_servers(STORE_SERVER if servers is None else servers)
        self.call_timeout = seconds("call_timeout", call_timeout)
        self.probe_timeout = seconds("probe_timeout", probe_timeout)
        self.session_mode = session
        self.max_turns = integer("max_turns", max_turns)
        self.max_result_chars = integer("max_result_chars", max_result_chars, 100)
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ConfigError(
                "system_prompt", system_prompt, "must be a string", "pass text or None"
            )
        if system_prompt is None:
            system_prompt = f"{RULES} {call_format(tool_parser)}".strip()
        self.system_prompt = system_prompt
        self._session_options: dict[str, Any] = {
            "connect_timeout": seconds("connect_timeout", connect_timeout),
            "stderr": sys.stderr if server_logs else None,
        }
        self.tasks = self._load_tasks(servers, tasks, size, data_seed)
        self.remote_tools = self._list_tools()
        _check_task_tools(self.tasks, self.remote_tools)
        tools = [self._tool(remote) for remote in self.remote_tools]
        super().__init__(
            tools=tools,
            tool_parser=tool_parser,
            # A backstop only: calls answer within call_timeout + probe_timeout themselves.
            tool_timeout=self.call_timeout + self.probe_timeout + 30,
            render_mode=render_mode,
        )
        self._by_id = {task.task_id: task for task in self.tasks}
        self._group: ServerGroup | None = None
        self._pooled = False
        self._episode: _Episode | None = None

    # --- construction ------------------------------------------------------------------------

    @staticmethod
    def _load_tasks(
        servers: object, tasks: object, size: int, data_seed: int
    ) -> tuple[MCPTask, ...]:
        if tasks is not None:
            return load_tasks(tasks)  # type: ignore[arg-type]
        if servers is not None:
            fix = "pass tasks='tasks.jsonl' (agentgym.envs.mcp.tasks documents the fields)"
            raise ConfigError("tasks", None, "is required with your own servers", fix)
        from agentgym.envs.mcp.store_tasks import generate_store_tasks

        return generate_store_tasks(integer("size", size), integer("data_seed", data_seed, 0))

    def _list_tools(self) -> tuple[RemoteTool, ...]:
        cached = _TOOL_CACHE.get(self.configs)
        if cached is None:
            cached = _TOOL_CACHE[self.configs] = run_sync(self._fetch_tools())
        return cached

    async def _fetch_tools(self) -> tuple[RemoteTool, ...]:
        group = ServerGroup(self.configs, **self._session_options)
        await group.start()
        try:
            return await group.list_tools(self.call_timeout)
        finally:
            await group.close()

    def _tool(self, remote: RemoteTool) -> Tool:
        async def call(**arguments: Any) -> str:
            return await self._call(remote, arguments)

        # Tool.call reads the hints on every call; string hints (PEP 563) would be compiled
        # each time, and arguments are validated against the server's schema anyway.
        call.__annotations__ = {}
        return Tool(remote.name, remote.description, remote.parameters, call)

    # --- the episode -------------------------------------------------------------------------

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        task = choose_task(self.tasks, self._by_id, options, self.np_random)
        self._episode = None
        await self._open_sessions()
        self._episode = _Episode(task, uuid.uuid4().hex)
        observation = (system(self.system_prompt), user(task.prompt))
        info = {
            "tools": self.tool_schemas(),
            "task_id": task.task_id,
            "servers": [c.name for c in self.configs],
        }
        return observation, info

    async def astep(self, action: Action) -> StepResult:
        episode = self._episode
        assert episode is not None  # AgentEnv refuses a step before a reset
        episode.turns += 1
        parsed = self.parse(action)
        if parsed.has_calls:
            messages = await self.run_tool_calls(parsed)
            episode.tool_calls += len(parsed.calls)
            result = self._after_tools(episode, messages, len(parsed.calls))
            if not result[4]["infra_error"]:
                result[4]["invalid_action"] = self.tool_report.invalid_action(parsed)
                result[4]["timed_out"] = bool(self.tool_report.timed_out)
            return result
        answer_ok = None
        if episode.task.answer is not None:
            answer_ok = answer_correct(parsed.content, episode.task.answer, episode.task.match)
        passed = await self._run_checks(episode)
        if episode.infra_error is not None:
            return self._infra_result(episode, (), 0)
        success = answer_ok is not False and passed == len(episode.task.checks)
        reward = 1.0 if success else 0.0
        info = self._info(episode, "answer", 0, reward, answer_ok, passed)
        return (user("Correct." if success else "Incorrect."),), reward, True, False, info

    async def aclose(self) -> None:
        try:
            await self._close_sessions()
        finally:
            await super().aclose()

    # --- sessions ----------------------------------------------------------------------------

    async def _open_sessions(self) -> None:
        if self.session_mode == "pooled":
            self._group = await pool.acquire(self, self.configs, **self._session_options)
            self._pooled = True
            return
        await self._close_sessions()
        group = ServerGroup(self.configs, **self._session_options)
        await group.start()
        self._group = group

    async def _close_sessions(self) -> None:
        group, self._group = self._group, None
        if self._pooled:
            self._pooled = False
            await pool.release(self, self.configs, **self._session_options)
            return
        if group is None:
            return
        if group.loop is asyncio.get_running_loop():
            await group.close()
        else:  # made under another event loop, which must close it; its exit kills the servers
            log.warning("MCP sessions opened on another event loop are left to that loop")

    async def _call(self, remote: RemoteTool, arguments: dict[str, Any]) -> str:
        episode, group = self._episode, self._group
        if episode is None or group is None or episode.infra_error is not None:
            return SERVER_FAILED
        session = group.sessions[remote.server]
        try:
            outcome = await session.call(
                remote.remote_name,
                arguments,
                timeout=self.call_timeout,
                meta={EPISODE_META_KEY: episode.key},
                limit=self.max_result_chars,
            )
        except DeadlineExceeded:
            if await session.responsive(self.probe_timeout):
                self.tool_report.note_timeout()  # the call the model made hung: scored
                return f"Error: tool {remote.name} did not answer within {self.call_timeout:g} s"
            episode.infra_error = f"MCP server {session.config.name!r} stopped answering"
            return SERVER_FAILED
        except ServerFailed as e:
            episode.infra_error = str(e)
            return SERVER_FAILED
        if outcome.error and not outcome.text.lower().startswith("error"):
            return f"Error: {outcome.text}"
        return outcome.text

    async def _run_checks(self, episode: _Episode) -> int:
        """How many of the task's state checks pass (sets ``infra_error`` if a server fails)."""
        group = self._group
        if not episode.task.checks or group is None:
            return 0
        by_name = {tool.name: tool for tool in self.remote_tools}

        async def run(check: Any) -> bool:
            remote = by_name[check.tool]
            try:
                outcome = await group.sessions[remote.server].call(
                    remote.remote_name,
                    check.arguments,
                    timeout=self.call_timeout,
                    meta={EPISODE_META_KEY: episode.key},
                    limit=10**9,
                )
            except (ServerFailed, DeadlineExceeded) as e:
                episode.infra_error = f"state check {check.tool}: {e}"
                return False
            return not outcome.error and value_matches(check, outcome.structured, outcome.text)

        results = await asyncio.gather(*(run(c) for c in episode.task.checks))
        return sum(results)

    # --- results -----------------------------------------------------------------------------

    def _after_tools(self, episode: _Episode, messages: Observation, calls: int) -> StepResult:
        if episode.infra_error is not None:
            return self._infra_result(episode, messages, calls)
        truncated = episode.turns >= self.max_turns
        info = self._info(episode, "max_turns" if truncated else "tool_call", calls, 0.0)
        if truncated:
            info["truncation_reason"] = "max_turns"
        return messages, 0.0, False, truncated, info

    def _infra_result(self, episode: _Episode, messages: Observation, calls: int) -> StepResult:
        info = self._info(episode, "infra_error", calls, 0.0)
        info.update(truncation_reason="infra_error", error=clip(str(episode.infra_error)))
        return messages, 0.0, False, True, info

    def _info(
        self,
        episode: _Episode,
        reason: str,
        calls: int,
        reward: float,
        answer_ok: bool | None = None,
        passed: int = 0,
    ) -> dict[str, Any]:
        return {
            "task_id": episode.task.task_id,
            "turn": episode.turns,
            "tool_calls": calls,
            "success": reward == 1.0,
            "reason": reason,
            "answer_correct": answer_ok,
            "checks_passed": passed,
            "checks_total": len(episode.task.checks),
            "infra_error": episode.infra_error is not None,
            "reward_components": {"correct": reward},
        }


def _check_task_tools(tasks: Sequence[MCPTask], tools: Sequence[RemoteTool]) -> None:
    names = {tool.name for tool in tools}
    for task in tasks:
        for k, check in enumerate(task.checks):
            if check.tool not in names:
                raise ConfigError(
                    f"task {task.task_id!r} checks[{k}]['tool']",
                    check.tool,
                    "names no tool of the servers",
                    f"use one of {sorted(names)}",
                )
