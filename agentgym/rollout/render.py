"""Token ids of a conversation, built incrementally without re-tokenizing what the model sampled.

The prompt is rendered with the chat template once. After that, the token sequence grows by the
ids the engine sampled (appended as they are) and by the ids of what the env adds, which are
tokenized on their own: the *env delta*. Its text comes from the chat template itself, by
rendering the conversation with a placeholder in place of the assistant's reply::

    before = render(conversation + [assistant(PLACEHOLDER)])
    after  = render(conversation + [assistant(PLACEHOLDER)] + new_messages, generation prompt)
    close  = before[after PLACEHOLDER:]   # what the template writes after a reply: <|im_end|>\\n
    delta  = close + after[len(before):]  # the close, the new messages, the generation prompt

If the completion ended on the end-of-turn token the close starts with (it stopped on EOS), that
token is already among the sampled ids and is cut from the close; if it stopped by length or on
a stop string, the whole close belongs to the delta (loss mask 0). Because the placeholder stands
in for the reply, the delta never depends on how the sampled ids would decode or re-encode.

This needs a prefix-stable template (rendering more messages only appends text) whose message
blocks start at token boundaries; the tiny policy's template is built that way, as are ChatML
templates such as Qwen2.5's. A template that breaks it raises ``TemplateError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentgym.core.errors import Error
from agentgym.core.types import Message, assistant
from agentgym.inference.base import Completion
from agentgym.inference.chat import render_text

__all__ = ["PLACEHOLDER", "ChatRenderer", "TemplateError"]

PLACEHOLDER = "AGENTGYM-ASSISTANT-REPLY-PLACEHOLDER"
"""Stands in for the assistant's reply when the template's text around it is rendered."""

Tools = Sequence[Mapping[str, Any]] | None


class TemplateError(Error):
    """The tokenizer's chat template cannot be rendered incrementally (not prefix-stable)."""


class ChatRenderer:
    """The chat template of ``tokenizer``, rendered as token ids once and then by deltas."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._end_of_turn: int | None = None

    def reply_ids(self, text: str) -> list[int]:
        """The ids of the assistant reply ``text`` that ends the turn, as constrained decoding
        makes the model sample them: ``text`` tokenized alone (a generation prompt ends at a
        token boundary), then the template's end-of-turn token (the first token of what it
        writes after a reply, ``<|im_end|>``)."""
        if self._end_of_turn is None:
            self._end_of_turn = self._find_end_of_turn()
        return [*self.encode(text), self._end_of_turn]

    def _find_end_of_turn(self) -> int:
        probe = [{"role": "user", "content": "hi"}, assistant(PLACEHOLDER)]
        text = self._render(probe, None, generation_prompt=False)
        at = text.rfind(PLACEHOLDER)
        close = self.encode(text[at + len(PLACEHOLDER) :]) if at >= 0 else []
        if close:
            return close[0]
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if eos is None:
            raise TemplateError(
                "the chat template writes nothing after an assistant reply and the tokenizer "
                "has no eos_token_id, so a constrained reply cannot end its turn. Fix: set the "
                "tokenizer's eos_token_id, or collect without action_choices."
            )
        return int(eos)

    def encode(self, text: str) -> list[int]:
        """Token ids of template text (the template writes every special marker itself)."""
        return [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False)]

    def prompt_ids(self, messages: Sequence[Message], tools: Tools) -> list[int]:
        """The first prompt: ``messages`` (and the ``tools`` schemas) plus the generation prompt."""
        return self.encode(self._render(messages, tools, generation_prompt=True))

    def delta_ids(
        self,
        conversation: Sequence[Message],
        new_messages: Sequence[Message],
        tools: Tools,
        completion: Completion,
    ) -> list[int]:
        """Ids that follow ``completion``'s sampled ids: the end of the assistant turn (unless the
        completion sampled it), ``new_messages``, and the generation prompt.

        ``conversation`` is every message before the assistant turn ``completion`` produced.
        """
        return self.encode(self.delta_text(conversation, new_messages, tools, completion))

    def delta_text(
        self,
        conversation: Sequence[Message],
        new_messages: Sequence[Message],
        tools: Tools,
        completion: Completion,
    ) -> str:
        """The text of ``delta_ids`` (see the module docstring)."""
        probe = [*conversation, assistant(PLACEHOLDER)]
        before = self._render(probe, tools, generation_prompt=False)
        after = self._render([*probe, *new_messages], tools, generation_prompt=True)
        at = before.rfind(PLACEHOLDER)
        if at < 0 or not after.startswith(before):
            raise TemplateError(
                "the tokenizer's chat template is not prefix-stable (rendering more messages "
                "changed the text of earlier ones, or dropped the assistant's reply), so a "
                "conversation cannot be tokenized incrementally. Fix: use a template whose "
                "output for a conversation starts with its output for every prefix of it."
            )
        close = before[at + len(PLACEHOLDER) :]
        return self._unsampled(close, completion) + after[len(before) :]

    def _unsampled(self, close: str, completion: Completion) -> str:
        """``close`` without its first token when ``completion`` stopped by sampling exactly that
        token (EOS: ``<|im_end|>``); whole otherwise (stopped by length or on a stop string)."""
        if completion.finish_reason != "stop" or isinstance(completion.stop, str):
            return close
        last = completion.token_ids[-1:]
        if not last or self.encode(close)[:1] != last:
            return close
        text = str(self.tokenizer.decode(last, skip_special_tokens=False))
        return close.removeprefix(text) if close.startswith(text) else close

    def _render(self, messages: Sequence[Message], tools: Tools, *, generation_prompt: bool) -> str:
        return render_text(
            self.tokenizer, messages, tools=tools, add_generation_prompt=generation_prompt
        )
