"""Train an OpenAI-SDK tool-calling loop: the model may call a calculator before it answers.

    python examples/agent_tool_calling.py --updates 20

The agent is the loop the OpenAI docs show: call the model with the tool schemas, run each tool
call it makes, send the results back as ``tool`` messages, stop when it answers without calling
a tool. The calculator evaluates arithmetic only (numbers and + - * / ** parentheses, parsed with
``ast``: nothing the model writes is executed). Every model call goes through a gateway session
that records it token for token (docs/gateway.md); the reply the SDK returns is appended as it
is, so each call continues the one before in one context. Reward: 1 when the final answer
contains the task's result, else 0. The model is a local transformers directory
(--model-dir), or the tiny default policy; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import ast
import json
import operator
import random
from typing import Any

from agentgym import models
from agentgym.gateway.source import AgentProgramSource
from agentgym.trainers import fit, make
from agentgym.trainers.colocate import colocated_engine

MODEL = "agentgym-tiny"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate an arithmetic expression, e.g. (3 + 4) * 12.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]
OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
}


def calculate(expression: str) -> str:
    """The value of an arithmetic expression, or what is wrong with it (never executes it)."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            if isinstance(node.op, ast.Pow) and abs(value(node.right)) > 64:
                raise ValueError("exponent too large")
            return OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.operand))
        raise ValueError("only numbers and + - * / ** ( ) are allowed")

    try:
        return f"{value(ast.parse(expression, mode='eval').body):g}"
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError) as e:
        return f"error: {e}"


async def agent(client: Any, task: dict[str, Any]) -> float:
    """The tool-calling loop; returns its reward."""
    messages: list[Any] = [
        {"role": "system", "content": "Use the calculator, then give the final number."},
        {"role": "user", "content": f"What is {task['question']}?"},
    ]
    answer = ""
    for _ in range(task.get("max_calls", 3)):
        response = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS, max_tokens=48, temperature=1.0
        )
        message = response.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            answer = message.content or ""
            break
        for call in message.tool_calls:
            try:
                expression = json.loads(call.function.arguments).get("expression", "")
            except (ValueError, AttributeError):
                expression = ""
            result = calculate(str(expression))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return 1.0 if task["answer"] in answer else 0.0


def arithmetic_tasks(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    tasks = []
    for i in range(n):
        a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 9)
        tasks.append(
            {"task_id": str(i), "question": f"({a} + {b}) * {c}", "answer": str((a + b) * c)}
        )
    return tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="default: the tiny policy")
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--groups", type=int, default=4, help="tasks per update")
    parser.add_argument("--group-size", type=int, default=4, help="tries per task")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    trainer = make(
        "grpo",
        policy=models.load(args.model_dir),
        config={
            "group_size": args.group_size,
            "batch_size": args.groups * args.group_size,
            "learning_rate": args.learning_rate,
            "seed": args.seed,
        },
    )
    engine, _ = colocated_engine(trainer, "auto")  # gets the weights after every update
    source = AgentProgramSource(
        engine,
        trainer.tokenizer,
        agent,
        arithmetic_tasks(200, args.seed),
        group_size=args.group_size,
        seed=args.seed,
        model_name=MODEL,
    )
    history = fit(trainer, source, steps=args.updates, engine=engine)
    summary = {
        "updates": trainer.step_count,
        "reward_mean": [round(row.get("reward_mean", 0.0), 4) for row in history],
        "outcomes": dict(source.stats),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
