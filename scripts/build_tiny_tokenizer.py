"""Build the tiny policy's tokenizer: agentgym/models/tiny/{tokenizer.json,tokenizer_config.json}.

A byte-level BPE trained with the ``tokenizers`` library on a corpus this script generates from a
fixed seed (FrozenLake-style boards and moves, hermes tool calls and tool schemas, chat role words,
English, arithmetic and Python snippets). Run it from the repository root; the output is committed,
so the package never trains anything at import or run time::

    .venv/bin/python scripts/build_tiny_tokenizer.py            # writes the files
    .venv/bin/python scripts/build_tiny_tokenizer.py --check    # exit 1 if they would change

The pre-tokenizer isolates every "\\n" (and the chat markers are added tokens), so text on either
side of a newline or a marker tokenizes independently. The chat template relies on that for
prefix stability: a generation prompt ends with "\\n", so its tokens are a prefix of the tokens
of the same conversation with the assistant turn appended.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # one thread: deterministic and polite

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

OUT_DIR = Path(__file__).resolve().parent.parent / "agentgym" / "models" / "tiny"
VOCAB_SIZE = 2048
SEED = 0
DOCS = 12_000

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_MARKERS = ["<tool_call>", "</tool_call>"]
AROUND_PAIRS = [
    f" {direction} {cell}"
    for direction in ("left", "down", "right", "up")
    for cell in ("edge", "ice", "hole", "goal")
]
"""FrozenLake's "Around you: left edge, down ice, right hole, up ice." names each neighbour as one
token: what lies one way is then a token of its own, which a policy of this size learns to read
from a reward several times faster than a direction and a cell it has to pair up (RL from random
weights: batch success 0.9 after ~35 updates instead of ~100, or not in 150)."""

DIRECTIONS = ["left", "right", "up", "down"]
WORDS = (  # noqa: SIM905 (a word list reads better as text)
    "the a an and or but if then else when while for to of in on at by with from into over under "
    "is are was were be been has have had do does did can could will would should may might must "
    "you your we our they their it its this that these those there here what which who how why "
    "agent model tool call result answer question task goal step move reach avoid hole ice lake "
    "frozen grid board cell row column position start finish win lose reward episode action "
    "observation state valid invalid error try again please think first next last left right up "
    "down north south east west number sum product difference value list string function code "
    "test file line return print true false none yes no good bad small large fast slow safe path "
    "map player walk slip fall find help user assistant system message reply format json "
).split()
NAMES = ["x", "y", "n", "i", "j", "k", "total", "count", "items", "value", "result", "data", "s"]


def _board(rng: random.Random) -> str:
    size = rng.randint(3, 8)
    cells = [["H" if rng.random() < 0.2 else "F" for _ in range(size)] for _ in range(size)]
    cells[0][0], cells[-1][-1] = "S", "G"
    if rng.random() < 0.5:
        r, c = rng.randrange(size), rng.randrange(size)
        cells[r][c] = rng.choice(["P", "P", "A", "@"])
    sep = " " if rng.random() < 0.7 else ""
    return "\n".join(sep.join(row) for row in cells)


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice([".", ".", "?", "!"])


def _frozenlake(rng: random.Random) -> str:
    d = rng.choice(DIRECTIONS)
    r, c = rng.randint(1, 8), rng.randint(1, 8)
    where = f"You are at row {r}, column {c}."
    return rng.choice(
        [
            f"{_board(rng)}\n{where}",
            f"```{d}```",
            f"```\n{d}\n```",
            f"I will move {d}.\n```{d}```",
            f"You moved {d}.\n{_board(rng)}\n{where}",
            f"You tried {d} but slipped {rng.choice(DIRECTIONS)} into the edge and stayed.",
            f"You moved {d} and fell into a hole. Game over.",
            f"You moved {d} and reached the goal!",
            "You are on a frozen lake. Reach the goal G without stepping into a hole H. P is you, "
            "F is ice. Each turn move one square: left, right, up or down. Write the direction in "
            "a fenced block like ```down```, or call the move tool.",
            "Invalid action: no fenced block with a direction. Reply with one direction (left, "
            "right, up or down) in a fenced block like ```down```, or call move once.",
            "Call move once with direction left, right, up or down. Out of turns.",
        ]
    )


def _tool_call(rng: random.Random) -> str:
    name, args = rng.choice(
        [
            ("move", {"direction": rng.choice(DIRECTIONS)}),
            ("calculator", {"expression": f"{rng.randint(1, 99)} * {rng.randint(1, 99)}"}),
            ("python", {"code": f"print({rng.randint(0, 9)} + {rng.randint(0, 9)})"}),
            ("submit", {"answer": str(rng.randint(0, 999))}),
            ("search", {"query": " ".join(rng.choices(WORDS, k=3))}),
            ("look", {}),
        ]
    )
    call = json.dumps({"name": name, "arguments": args})
    prefix = rng.choice(["", f"I will call {name}.\n", f"{_sentence(rng)}\n"])
    return f"{prefix}<tool_call>{call}</tool_call>"


def _tool_schema(rng: random.Random) -> str:
    name = rng.choice(["move", "calculator", "python", "submit", "search", "look"])
    props = {
        "direction": {
            "enum": DIRECTIONS,
            "description": "the way to step: left, right, up or down.",
        }
    }
    if name != "move":
        props = {rng.choice(["expression", "code", "answer", "query"]): {"type": "string"}}
    schema = {
        "type": "function",
        "function": {
            "name": name,
            "description": _sentence(rng),
            "parameters": {
                "type": "object",
                "properties": props,
                "required": list(props),
                "additionalProperties": False,
            },
        },
    }
    return "# Tools\n<tools>\n" + json.dumps(schema) + "\n</tools>"


def _chat(rng: random.Random) -> str:
    role = rng.choice(["system", "user", "assistant", "tool"])
    return f"<|im_start|>{role}\n{_sentence(rng)}<|im_end|>\n<|im_start|>assistant\n"


def _math(rng: random.Random) -> str:
    a, b = rng.randint(0, 999), rng.randint(0, 99)
    op, val = rng.choice([("+", a + b), ("-", a - b), ("*", a * b)])
    return rng.choice(
        [
            f"What is {a} {op} {b}?\n{a} {op} {b} = {val}. The answer is \\boxed{{{val}}}.",
            f"Solve for x: x {op} {b} = {val}. Answer: x = {a}",
            f"Step 1: {a} {op} {b} = {val}\nFinal answer: {val}",
        ]
    )


def _code(rng: random.Random) -> str:
    f, x, y = (
        rng.choice(["add", "solve", "count", "total", "parse", "check"]),
        *rng.sample(NAMES, 2),
    )
    return rng.choice(
        [
            f"def {f}({x}, {y}):\n    return {x} + {y}\n",
            f"def {f}({x}):\n    {y} = 0\n    for i in range({x}):\n"
            f"        {y} += i\n    return {y}\n",
            f"if {x} > {rng.randint(0, 9)}:\n    print({x})\nelse:\n    print({y})\n",
            f"class {f.title()}:\n    def __init__(self, {x}):\n        self.{x} = {x}\n",
            f"import json\n{x} = json.loads({y})\nassert {x} is not None\n",
        ]
    )


GENERATORS: list[Callable[[random.Random], str]] = [
    _frozenlake,
    _frozenlake,
    _tool_call,
    _tool_schema,
    _chat,
    _sentence,
    _math,
    _code,
]


def corpus(seed: int = SEED, docs: int = DOCS) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(docs):
        yield rng.choice(GENERATORS)(rng)


def build_tokenizer(seed: int = SEED) -> Tokenizer:
    tok = train_bpe(corpus(seed), VOCAB_SIZE)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in AROUND_PAIRS])
    return tok


def train_bpe(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """A byte-level BPE of ``vocab_size`` tokens trained on ``texts``: the chat template's special
    tokens, then the merges, then the tool-call markers (build_real_model.py uses it too)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(TOOL_MARKERS),
        min_frequency=2,
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_MARKERS])
    return tok


def tokenizer_config() -> dict[str, object]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 4096,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "padding_side": "left",
    }


def rendered() -> dict[str, str]:
    tok = build_tokenizer()
    return {
        "tokenizer.json": tok.to_str(pretty=True) + "\n",
        "tokenizer_config.json": json.dumps(tokenizer_config(), indent=2) + "\n",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the files would change")
    args = parser.parse_args(argv)
    files = rendered()
    if args.check:
        stale = [
            n
            for n, t in files.items()
            if not (OUT_DIR / n).is_file() or (OUT_DIR / n).read_text() != t
        ]
        print("stale: " + ", ".join(stale) if stale else "tokenizer files are up to date")
        return 1 if stale else 0
    for name, text in files.items():
        (OUT_DIR / name).write_text(text)
        print(f"wrote {OUT_DIR / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
