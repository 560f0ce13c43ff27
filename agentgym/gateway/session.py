"""One gateway session: the calls an agent program made, and the token-exact episode they form.

Every call records the prompt ids the engine saw, the ids it sampled with their logprobs, the
weight version and the reply the program got. The prompt of a call is built so that a reply the
gateway sampled is never re-tokenized:

- **Chat**: if the call's messages begin with an earlier call's messages followed by the reply
  the gateway gave it (same tools), the prompt is that call's prompt ids, its sampled ids, and
  the chat template's *delta* for the messages added since (``ChatRenderer.delta_ids``: the end
  of the assistant turn, the tool results or the next user turn, the generation prompt).
  Otherwise the messages are rendered afresh.
- **Completions**: a token-id prompt that begins with an earlier call's prompt and sampled ids
  continues it as it is; a text prompt that begins with an earlier call's prompt text and the
  text of its sampled ids continues it with the rest tokenized on its own.

The episode (``Session.episode``) lays the calls out as *contexts*: a call that continues the
latest call of a context extends that context (its new prompt ids with loss mask 0, its sampled
ids with mask 1 and their logprobs); any other call (a first call, an edited or summarised
history, a changed reply, a second continuation of the same call) starts a new context with its
whole prompt. Each context is one sequence the policy saw, token for token.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.types import Episode, Message, Turn
from agentgym.inference.base import Completion
from agentgym.rollout.render import ChatRenderer, TemplateError

__all__ = ["Call", "Session", "normalize_message"]


@dataclass
class Call:
    """One model call of a session, as the engine saw and answered it."""

    kind: str
    """``"chat"`` or ``"completion"``."""
    prompt_ids: list[int]
    completion: Completion
    parent: int | None
    """The index of the earlier call this one continues (its prompt begins with that call's
    prompt and sampled ids); None: rendered afresh."""
    conversation: list[Message] = field(default_factory=list)
    """Chat: the request's messages, normalized (``normalize_message``)."""
    reply: Message | None = None
    """Chat: the assistant message the program got back."""
    tools_key: str = ""
    """Chat: the request's tool schemas as canonical JSON."""
    prompt_text: str | None = None
    """Completions with a text prompt: the prompt text."""

    @property
    def tokens(self) -> list[int]:
        """The prompt ids followed by the sampled ids."""
        return [*self.prompt_ids, *self.completion.token_ids]


def _tool_call_key(call: Any) -> Any:
    if not isinstance(call, Mapping):
        return call
    function = call.get("function") if isinstance(call.get("function"), Mapping) else call
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments) if arguments.strip() else {}
    return {"name": function.get("name"), "arguments": arguments}


def normalize_message(message: Mapping[str, Any]) -> Message:
    """``message`` as compared between calls: ``None`` fields dropped, empty content as none,
    tool calls by name and parsed arguments (ids and the ``type`` field aside: clients rewrite
    them, the template does not show them)."""
    out: dict[str, Any] = {k: v for k, v in message.items() if v is not None}
    if out.get("content") in ("", []):
        out.pop("content")
    calls = out.pop("tool_calls", None)
    if calls:
        out["tool_calls"] = [_tool_call_key(c) for c in calls]
    return out


def tools_key(tools: Sequence[Mapping[str, Any]] | None) -> str:
    return json.dumps(list(tools or ()), sort_keys=True, default=str)


class Session:
    """The calls of one agent program's episode; ``closed`` once its episode was taken."""

    def __init__(self, session_id: str, renderer: ChatRenderer, task: Any = None) -> None:
        self.id, self.renderer, self.task = session_id, renderer, task
        self.calls: list[Call] = []
        self.closed = False
        self.failures: list[str] = []
        """Calls the engine failed (their cause): the episode is then not trainable."""

    # --- prompts -------------------------------------------------------------------------------

    def chat_prompt(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None
    ) -> tuple[list[int], int | None]:
        """The prompt ids of a chat call and the call it continues (None: rendered afresh)."""
        wanted = [normalize_message(m) for m in messages]
        key = tools_key(tools)
        best: int | None = None
        for index, call in enumerate(self.calls):
            if call.kind != "chat" or call.tools_key != key or call.reply is None:
                continue
            n = len(call.conversation)
            if len(wanted) <= n or wanted[:n] != call.conversation:
                continue
            if wanted[n] != normalize_message(call.reply):
                continue
            if best is None or n >= len(self.calls[best].conversation):
                best = index  # the longest (and latest) conversation it continues
        if best is not None:
            parent = self.calls[best]
            n = len(parent.conversation)
            try:
                delta = self.renderer.delta_ids(
                    list(messages[:n]), list(messages[n + 1 :]), tools, parent.completion
                )
            except TemplateError:
                delta = None
            if delta is not None:
                return parent.tokens + delta, best
        try:
            return self.renderer.prompt_ids(list(messages), tools), None
        except Exception as e:  # the template's own error (jinja's): the request's to fix
            raise ValueError(f"the chat template cannot render these messages: {e}") from e

    def completion_prompt(self, prompt: str | list[int]) -> tuple[list[int], int | None]:
        """The prompt ids of a completions call and the call it continues."""
        best: int | None = None
        for index, call in enumerate(self.calls):
            if call.kind != "completion":
                continue
            if isinstance(prompt, str):
                if call.prompt_text is None or not prompt.startswith(self._text_of(call)):
                    continue
            elif prompt[: len(call.tokens)] != call.tokens:
                continue
            if best is None or len(call.tokens) >= len(self.calls[best].tokens):
                best = index
        if isinstance(prompt, list):
            return list(prompt), best
        if best is None:
            return self.renderer.encode(prompt), None
        parent = self.calls[best]
        return parent.tokens + self.renderer.encode(prompt[len(self._text_of(parent)) :]), best

    def _text_of(self, call: Call) -> str:
        sampled = self.renderer.tokenizer.decode(
            call.completion.token_ids, skip_special_tokens=False
        )
        return f"{call.prompt_text}{sampled}"

    # --- the episode ---------------------------------------------------------------------------

    def contexts(self) -> list[list[int]]:
        """The calls (indices) of each context, in the order their first calls came: a call
        extends the context whose latest call it continues, else starts one."""
        chains: list[list[int]] = []
        chain_of: dict[int, int] = {}
        for index, call in enumerate(self.calls):
            parent = call.parent
            if parent is not None and chains[chain_of[parent]][-1] == parent:
                chain_of[index] = chain_of[parent]
                chains[chain_of[parent]].append(index)
            else:
                chain_of[index] = len(chains)
                chains.append([index])
        return chains

    def episode(self, reward: float = 0.0, info: Mapping[str, Any] | None = None) -> Episode:
        """The session's calls as one ``Episode`` (contexts as in the module docstring); one
        turn per call, ``reward`` and ``info`` on the last."""
        chains = self.contexts()
        episode = Episode(None)
        spans: list[tuple[int, int, int]] = []  # (start, end, call)
        for chain in chains:
            if len(chains) > 1:
                episode.context_starts.append(len(episode.token_ids))
            spans += self._lay_out(episode, chain)
        spans.sort()
        for number, (first, end, index) in enumerate(spans):
            call = self.calls[index]
            episode.turn_spans.append((first, end))
            episode.weight_versions.append(call.completion.weight_version)
            last = number == len(spans) - 1
            action = call.reply or {"role": "assistant", "content": call.completion.text or ""}
            episode.turns.append(
                Turn(
                    action=action,
                    observation=(),
                    reward=float(reward) if last else 0.0,
                    terminated=last,
                    truncated=False,
                    info=dict(info or {}) if last else {},
                )
            )
            if not call.completion.trainable or call.completion.logprob_mode == "none":
                episode.trainable = False
        if self.failures:
            episode.trainable = False
        latest = self.calls[-1] if self.calls else None
        if latest is not None and latest.reply is not None:
            episode.messages = [*latest.conversation, latest.reply]
        sampled = float(sum(episode.loss_mask))
        episode.metrics = {
            "turns": float(len(episode.turns)),
            "contexts": float(len(chains)),
            "prompt_tokens": len(episode.token_ids) - sampled,
            "sampled_tokens": sampled,
            "total_tokens": float(len(episode.token_ids)),
            "return": episode.total_reward,
        }
        return episode

    def _lay_out(self, episode: Episode, chain: list[int]) -> list[tuple[int, int, int]]:
        """Append one context to ``episode``: each call's new prompt ids (mask 0), then its
        sampled ids (mask 1, their logprobs); returns each call's sampled span."""
        start, spans = len(episode.token_ids), []
        for index in chain:
            call = self.calls[index]
            new = call.prompt_ids[len(episode.token_ids) - start :]
            episode.token_ids.extend(new)
            episode.loss_mask.extend([0] * len(new))
            episode.logprobs.extend([0.0] * len(new))
            first = len(episode.token_ids)
            episode.token_ids.extend(int(t) for t in call.completion.token_ids)
            episode.loss_mask.extend([1] * len(call.completion.token_ids))
            episode.logprobs.extend(float(x) for x in call.completion.logprobs)
            spans.append((first, len(episode.token_ids), index))
        return spans
