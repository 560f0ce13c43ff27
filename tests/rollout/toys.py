"""Toy envs and engines for the rollout tests (a helper module, not a test module)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.core import AgentEnv, system, tool_message, user
from agentgym.core.env import StepResult
from agentgym.core.types import Action, Message, Observation
from agentgym.inference import Completion, SamplingParams

# Text that stresses block boundaries: newlines and spaces at the edges, JSON, unicode.
ALPHABET = list('abc XYZ \n\t{}":,019é🙂<>|_`')
TOOL = {
    "type": "function",
    "function": {
        "name": "look",
        "description": "Look around.",
        "parameters": {"type": "object", "properties": {"where": {"type": "string"}}},
    },
}


class ChattyEnv(AgentEnv):
    """Answers every turn with 1-3 user or tool messages of random length (0-40 characters).

    Episodes last ``1..max_len`` turns, drawn from the seed. ``reset`` puts the seed in the user
    message (``"task <seed>"``). ``fail_on`` ("reset" or "step") raises on that call
    (``fail_at``-th step), to make infra errors.
    """

    def __init__(
        self, max_len: int = 4, fail_on: str | None = None, fail_at: int = 1, pad: int = 0
    ) -> None:
        super().__init__()
        self.max_len, self.fail_on, self.fail_at, self.pad = max_len, fail_on, fail_at, pad
        self.length = self.turns = 0

    def _text(self, most: int = 40) -> str:
        n = int(self.np_random.integers(0, most + 1))
        return "".join(self.np_random.choice(ALPHABET, size=n))

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        if self.fail_on == "reset":
            raise RuntimeError("reset exploded")
        self.turns = 0
        self.length = int(self.np_random.integers(1, self.max_len + 1))
        obs = (system(self._text()), user(f"task {seed}\n" + "pad " * self.pad + self._text()))
        return obs, {"tools": [TOOL], "length": self.length}

    async def astep(self, action: Action) -> StepResult:
        await asyncio.sleep(0)
        self.turns += 1
        if self.fail_on == "step" and self.turns == self.fail_at:
            raise RuntimeError("step exploded")
        messages: list[Message] = []
        for k in range(int(self.np_random.integers(1, 4))):
            if self.np_random.random() < 0.5:
                messages.append(user(self._text()))
            else:
                messages.append(tool_message(self._text(), f"call_{self.turns}_{k}", "look"))
        done = self.turns >= self.length
        reward = float(self.np_random.random())
        return tuple(messages), reward, done, False, {"success": done and reward > 0.5}


@dataclass
class Call:
    prompt: list[int]
    sampling: SamplingParams
    completion: Completion


@dataclass
class ScriptedEngine:
    """Answers with ``reply(prompt_text, call_number)`` tokenized canonically, ending on EOS
    (``finish="stop"``), or cut at ``max_tokens`` (``"length"``). Logprobs are -0.5.

    ``gate(prompt_text)`` is awaited before answering; ``fail_at`` raises on that call.
    """

    tokenizer: Any
    reply: Callable[[str, int], str] = lambda prompt, n: f"reply {n}"
    gate: Callable[[str], Awaitable[None]] | None = None
    fail_at: int | None = None
    trainable: bool = True
    calls: list[Call] = field(default_factory=list)

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        number = len(self.calls)
        prompt = list(prompt_token_ids)
        text = self.tokenizer.decode(prompt)
        if self.fail_at == number:
            raise RuntimeError("the engine broke")
        if self.gate is not None:
            await self.gate(text)
        await asyncio.sleep(0)
        reply = self.reply(text, number)
        ids = self.tokenizer.encode(reply, add_special_tokens=False)
        finish, stop = "stop", None
        if len(ids) + 1 > sampling.max_tokens:
            ids, finish = ids[: sampling.max_tokens], "length"
            reply = self.tokenizer.decode(ids, skip_special_tokens=True)
        else:
            ids, stop = [*ids, self.tokenizer.eos_token_id], self.tokenizer.eos_token_id
        completion = Completion(
            ids, [-0.5] * len(ids), finish, text=reply, stop=stop, trainable=self.trainable
        )
        self.calls.append(Call(prompt, sampling, completion))
        return completion

    async def update_weights(self, weights: Any) -> None:
        pass

    async def close(self) -> None:
        pass


class Recorder:
    """Wraps an engine: records every call, counts calls in flight, and (``open_at=n``) holds
    each call until ``n`` calls are in flight at once (then never again)."""

    def __init__(self, engine: Any, open_at: int | None = None, timeout: float = 60.0) -> None:
        self.engine, self.open_at, self.timeout = engine, open_at, timeout
        self.calls: list[Call] = []
        self.in_flight = self.most_in_flight = 0
        self._open = asyncio.Event() if open_at else None

    @property
    def tokenizer(self) -> Any:
        return self.engine.tokenizer

    @property
    def model(self) -> Any:
        return self.engine.model

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self._open is not None:
                if self.in_flight >= (self.open_at or 0):
                    self._open.set()
                # A collector that does not issue every env's generation concurrently never
                # opens the gate: fail instead of hanging.
                await asyncio.wait_for(self._open.wait(), self.timeout)
            completion = await self.engine.generate(prompt_token_ids, sampling)
        finally:
            self.in_flight -= 1
        self.calls.append(Call(list(prompt_token_ids), sampling, completion))
        return completion

    async def update_weights(self, weights: Any) -> None:
        await self.engine.update_weights(weights)

    async def close(self) -> None:
        await self.engine.close()
