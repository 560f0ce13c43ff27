"""examples/agent_tool_calling.py's agent on Code-v0, driven by a scripted engine: its tool calls
run in the sandbox, Code-v0 grades its final answer, and the episode is one token-exact context.
(tests/examples/test_examples.py trains it with the tiny policy.)"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentgym import models
from agentgym.gateway.source import AgentProgramSource
from agentgym.inference.base import Completion
from agentgym.sandbox import bwrap_usable

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_tool_calling.py"
HAS_CLOSE = """def has_close_elements(numbers, threshold):
    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1 :])
"""
WRONG = "def has_close_elements(numbers, threshold):\n    return False\n"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("agent_tool_calling", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ScriptedEngine:
    """Answers like a model that tests its code first: a prompt without a tool result gets
    ``run_python`` calls, one with a result gets ``answer``. An answer's ids are its text's,
    logprob -1 each."""

    def __init__(self, tokenizer: Any, probe: str, answer: str) -> None:
        self.tokenizer, self.answer = tokenizer, answer
        calls = [{"code": probe}, {"source": "print(1)"}]  # the second is malformed
        self.call_text = "".join(
            f"<tool_call>{json.dumps({'name': 'run_python', 'arguments': a})}</tool_call>"
            for a in calls
        )
        self.prompts: list[str] = []

    async def generate(self, prompt: list[int], sampling: Any) -> Completion:
        seen = self.tokenizer.decode(prompt)
        self.prompts.append(seen)
        text = self.answer if "exit code 0" in seen else self.call_text
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return Completion(ids, [-1.0] * len(ids), "stop", text=text)


@pytest.mark.parametrize(
    ("answer", "reward"), [(HAS_CLOSE, 1.0), (WRONG, 0.0)], ids=["right", "wrong"]
)
def test_tool_calls_run_in_the_sandbox_and_code_v0_grades_the_answer(
    answer: str, reward: float, tmp_path: Path
) -> None:
    if not bwrap_usable():  # skipped where bubblewrap cannot run, failed in CI (as tests/sandbox)
        reason = "bubblewrap (bwrap) is not installed or cannot create namespaces here"
        if os.environ.get("AGENTGYM_REQUIRE_DOCKER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    tok = models.load_tokenizer()  # the tiny policy's: no model runs here
    host_file = tmp_path / "host-secret.txt"
    host_file.write_text("on the host")
    probe = f"import os\nprint(6 * 7)\nprint(os.path.exists({str(host_file)!r}))"
    engine = ScriptedEngine(tok, probe, f"Tested.\n```python\n{answer}```")
    agent = load_example().make_agent("local")
    task = {"task_id": "HumanEval/0", "options": {"task_id": "HumanEval/0"}}
    source = AgentProgramSource(
        engine,
        tok,
        agent,
        [task],
        group_size=1,
        reward="agentgym/Code-v0",
        env_kwargs={"sandbox": "local"},
    )
    [episode] = source.collect(1)

    tools = [m["content"] for m in episode.messages if m["role"] == "tool"]
    assert tools[0].startswith("exit code 0\nstdout:\n42\nFalse\n")  # ran, host files unseen
    assert tools[1].startswith("error: call run_python with")  # a bad call is data
    assert "has_close_elements" in engine.prompts[0]  # the model saw Code-v0's task ...
    assert "run_python" in engine.prompts[0]  # ... and the tool's schema
    assert episode.env_id == "agentgym/Code-v0"
    assert episode.total_reward == reward
    assert episode.turns[-1].info["reward_components"] == {"tests": reward}
    assert episode.outcome == ("success" if reward else "failed")
    # Two calls, the second continuing the first: one context, sampled ids as sampled.
    assert len(episode.turns) == 2
    assert episode.context_starts == []
    for start, end in episode.turn_spans:
        assert episode.loss_mask[start:end] == [1] * (end - start)
        assert episode.logprobs[start:end] == [-1.0] * (end - start)
    assert sum(episode.loss_mask) == sum(e - s for s, e in episode.turn_spans)
