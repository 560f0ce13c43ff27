"""Train an OpenAI-SDK tool-calling loop on Code-v0: the model may run Python before it answers.

    python examples/agent_tool_calling.py --updates 20

The agent is the loop the OpenAI docs show: call the model with the tool schemas, run each tool
call it makes, send the results back as ``tool`` messages, stop when it answers without calling
a tool. Its one tool, ``run_python``, runs the code the model wrote in an agentgym sandbox
(``--sandbox``: bubblewrap where it runs, else Docker; it refuses rather than run the model's
code unisolated unless you pass ``unsafe-local`` by name), one sandbox per episode, so a call can
build on the files an earlier one wrote. The task is Code-v0's (HumanEval): the program gets the
env's messages, and Code-v0 grades the answer it returns against the hidden tests, in a sandbox
of its own. Every model call goes through a gateway session that records it token for token
(docs/gateway.md); the reply the SDK returns is appended as it is, so each call continues the one
before in one context. The model is a local transformers directory (--model-dir), or the tiny
default policy; nothing is downloaded.

``agentgym train --agent agent_tool_calling:agent --tasks tasks.jsonl --env agentgym/Code-v0
--agent-reward env`` trains the same program from the command line (its tool runs in the
``auto`` sandbox).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from agentgym import models
from agentgym.gateway.source import AgentProgram, AgentProgramSource
from agentgym.sandbox import Limits, Sandbox, open_sandbox
from agentgym.trainers import fit, make
from agentgym.trainers.colocate import colocated_engine

MODEL = "agentgym-tiny"
RUN_TIMEOUT = 10.0
"""Seconds one ``run_python`` call may take."""
SHOWN = 2000
"""Characters of a run's stdout and of its stderr the model is shown."""
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_python",
            "description": "Run a Python 3 program in a sandbox (no network) and see its exit "
            "code, stdout and stderr. Use it to test your solution before you answer.",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "the program"}},
                "required": ["code"],
            },
        },
    }
]


async def run_python(sandbox: Sandbox, arguments: str) -> str:
    """The tool: run ``arguments``' code in ``sandbox``; what the model sees of the run. A bad
    call (arguments that are not JSON, no code) is answered with what is wrong, as data."""
    try:
        code = json.loads(arguments).get("code")
    except (ValueError, AttributeError):
        code = None
    if not isinstance(code, str) or not code.strip():
        return 'error: call run_python with {"code": "<a Python program>"}'
    await sandbox.write_file("main.py", code)
    result = await sandbox.run(["python3", "main.py"], timeout=RUN_TIMEOUT)
    status = "timed out" if result.timed_out else f"exit code {result.exit_code}"
    if result.oom_killed:
        status += " (out of memory)"
    return f"{status}\nstdout:\n{result.stdout[-SHOWN:]}\nstderr:\n{result.stderr[-SHOWN:]}"


def make_agent(sandbox: str = "auto", *, max_calls: int = 4, max_tokens: int = 256) -> AgentProgram:
    """The agent program, its ``run_python`` calls run in a ``sandbox`` backend
    (``agentgym.sandbox.open_sandbox``)."""

    async def agent(client: Any, task: dict[str, Any]) -> str:
        """``task["messages"]``: Code-v0's task; returns the final answer for Code-v0 to grade."""
        messages: list[Any] = list(task["messages"])
        box: Sandbox | None = None  # opened at the first tool call: most answers make none
        try:
            for _ in range(max_calls):
                response = await client.chat.completions.create(
                    model=MODEL,
                    messages=messages,
                    tools=TOOLS,
                    max_tokens=max_tokens,
                    temperature=1.0,
                )
                message = response.choices[0].message
                messages.append(message)
                if not message.tool_calls:
                    return message.content or ""
                for call in message.tool_calls:
                    if call.function.name != "run_python":
                        result = f"error: no tool `{call.function.name}`; use run_python"
                    else:
                        box = box or await open_sandbox(sandbox, limits=Limits(cpu_seconds=10))
                        result = await run_python(box, call.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            return ""  # out of calls without an answer: graded as no code block
        finally:
            if box is not None:
                await box.close()

    return agent


agent = make_agent()
"""The program as ``agentgym train --agent agent_tool_calling:agent`` loads it."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="default: the tiny policy")
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--groups", type=int, default=4, help="tasks per update")
    parser.add_argument("--group-size", type=int, default=4, help="tries per task")
    parser.add_argument("--max-tokens", type=int, default=256, help="per model call")
    parser.add_argument("--max-calls", type=int, default=4, help="model calls per episode")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--entropy-coef", type=float, default=0.0, help="exploration bonus")
    parser.add_argument("--sandbox", default="auto", help="auto, local, docker or unsafe-local")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    trainer = make(
        "grpo",
        policy=models.load(args.model_dir),
        config={
            "group_size": args.group_size,
            "batch_size": args.groups * args.group_size,
            "learning_rate": args.learning_rate,
            "max_new_tokens": args.max_tokens,
            "entropy_coef": args.entropy_coef,
            "seed": args.seed,
        },
    )
    before = {k: v.clone() for k, v in trainer.policy_state_dict().items()}
    engine, _ = colocated_engine(trainer, "auto")  # gets the weights after every update
    source = AgentProgramSource(
        engine,
        trainer.tokenizer,
        make_agent(args.sandbox, max_calls=args.max_calls, max_tokens=args.max_tokens),
        [{"seed": i} for i in range(164)],  # Code-v0's task of each reset seed
        group_size=args.group_size,
        reward="agentgym/Code-v0",  # grades the returned answer in its own sandbox
        env_kwargs={"sandbox": args.sandbox},
        seed=args.seed,
        model_name=MODEL,
    )
    history = fit(trainer, source, steps=args.updates, engine=engine)
    after = trainer.policy_state_dict()
    moved = sum(float((after[k] - v).abs().sum()) for k, v in before.items())
    summary = {
        "updates": trainer.step_count,
        "reward_mean": [round(row.get("reward_mean", 0.0), 4) for row in history],
        "outcomes": dict(source.stats),
        "weights_moved": math.isfinite(moved) and moved > 0.0,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
