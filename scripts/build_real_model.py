"""Build, offline, a random-weight model directory with a real architecture (Qwen2.5-0.5B's).

For GPU benchmarks and checks on something users recognise, without downloading a model: the
directory loads with ``AutoModelForCausalLM.from_pretrained(path)`` and
``AutoTokenizer.from_pretrained(path)``, and ``agentgym train --model path`` trains it::

    .venv/bin/python scripts/build_real_model.py --out models/qwen2.5-0.5b-shape   # ~1 GB, bf16
    .venv/bin/python scripts/build_real_model.py --out /tmp/small --layers 2 --hidden 64 \\
        --heads 4 --kv-heads 2 --intermediate 128 --vocab 2048 --tokenizer-vocab 600

The model: Qwen2.5-0.5B's config by default (24 layers, hidden 896, 14 query / 2 key-value
heads of 64, MLP 4864, SiLU, RMSNorm eps 1e-6, rope theta 1,000,000, 32,768 positions, tied
embeddings, vocabulary 151,936), random weights from ``--seed`` (transformers' initialisation:
normal, std 0.02), saved as safetensors in ``--dtype``.

The tokenizer: a byte-level BPE trained here with ``tokenizers`` (one thread: deterministic for
a given Python) on text found locally: the tiny policy's generated corpus
(``build_tiny_tokenizer.corpus``: boards, tool calls and schemas, chat, arithmetic, code) and the
Python standard library's own sources, up to ``--corpus-bytes``. Its vocabulary is
``--tokenizer-vocab`` (default 32,768), smaller than the model's 151,936 rows, as Qwen's own
151,665-token tokenizer is too: ids past the tokenizer's are rows no text maps to. (BPE stops
early when the corpus has no pair left to merge; the script prints the size it reached.) Special
tokens ``<|endoftext|>`` (pad), ``<|im_start|>``, ``<|im_end|>`` (eos) come first, then
``<tool_call>`` and ``</tool_call>``. The chat template is the tiny policy's: ChatML with tools in
the system turn and hermes ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` calls,
prefix-stable in tokens.
"""

from __future__ import annotations

import argparse
import os
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # one thread: deterministic and polite

from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_tiny_tokenizer import corpus as tiny_corpus
from build_tiny_tokenizer import train_bpe

TEMPLATE = Path(__file__).resolve().parent.parent / "agentgym/models/tiny/chat_template.jinja"

QWEN25_05B = {
    "layers": 24,
    "hidden": 896,
    "heads": 14,
    "kv_heads": 2,
    "intermediate": 4864,
    "vocab": 151_936,
    "rope_theta": 1_000_000.0,
    "positions": 32_768,
}
"""Qwen/Qwen2.5-0.5B's config.json, the fields that shape the model."""


def local_text(budget: int) -> Iterator[str]:
    """The tiny corpus, then standard-library sources (sorted paths), up to ``budget`` bytes."""
    used = 0
    for doc in tiny_corpus():
        if used >= budget:
            return
        used += len(doc)
        yield doc
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        if used >= budget:
            return
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        used += len(text)
        yield text


def build_tokenizer(vocab: int, corpus_bytes: int) -> Tokenizer:
    return train_bpe(local_text(corpus_bytes), vocab)


def save_tokenizer(tok: Tokenizer, out: Path) -> object:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=32_768,
    )
    fast.chat_template = TEMPLATE.read_text()
    fast.save_pretrained(out)
    return fast


def build_model(args: argparse.Namespace, eos_id: int, pad_id: int) -> object:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        hidden_act="silu",
        max_position_embeddings=args.positions,
        rope_parameters={"rope_type": "default", "rope_theta": args.rope_theta},
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        use_sliding_window=False,
        attention_dropout=0.0,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(args.seed)
    model = Qwen2ForCausalLM(config)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}[args.dtype]
    return model.to(dtype)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the model directory to write")
    q = QWEN25_05B
    parser.add_argument("--layers", type=int, default=q["layers"])
    parser.add_argument("--hidden", type=int, default=q["hidden"])
    parser.add_argument("--heads", type=int, default=q["heads"])
    parser.add_argument("--kv-heads", type=int, default=q["kv_heads"])
    parser.add_argument("--intermediate", type=int, default=q["intermediate"])
    parser.add_argument("--vocab", type=int, default=q["vocab"], help="the model's rows")
    parser.add_argument("--positions", type=int, default=q["positions"])
    parser.add_argument("--rope-theta", type=float, default=q["rope_theta"])
    parser.add_argument(
        "--tokenizer-vocab", type=int, default=32_768, help="BPE size (<= --vocab)"
    )
    parser.add_argument("--corpus-bytes", type=int, default=16_000_000)
    parser.add_argument("--dtype", choices=["bf16", "fp32", "fp16"], default="bf16")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.tokenizer_vocab > args.vocab:
        parser.error(f"--tokenizer-vocab {args.tokenizer_vocab} exceeds --vocab {args.vocab}")
    if args.hidden % args.heads or args.heads % args.kv_heads:
        parser.error("--hidden must divide by --heads, and --heads by --kv-heads")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tok = build_tokenizer(args.tokenizer_vocab, args.corpus_bytes)
    fast = save_tokenizer(tok, out)
    print(f"tokenizer: {tok.get_vocab_size()} tokens ({time.perf_counter() - started:.0f} s)")
    eos, pad = tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")
    model = build_model(args, eos, pad)
    model.save_pretrained(out)  # type: ignore[attr-defined]
    params = sum(p.numel() for p in model.parameters())  # type: ignore[attr-defined]
    print(f"model: {params / 1e6:.1f}M parameters, {args.dtype}, written to {out}")
    del fast
    return 0


if __name__ == "__main__":
    sys.exit(main())
