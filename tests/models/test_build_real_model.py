"""scripts/build_real_model.py: Qwen2.5-0.5B's shape by default; a small variant builds offline
and loads with transformers' Auto classes, its chat template rendering tools and tool calls."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_real_model.py"
SMALL = [
    "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
    "--intermediate", "128", "--vocab", "1024", "--tokenizer-vocab", "600",
    "--corpus-bytes", "100000", "--dtype", "fp32",
]  # fmt: skip
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _script():
    spec = importlib.util.spec_from_file_location("build_real_model", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_defaults_are_qwen2_5_0_5b():
    args = _script().parse(["--out", "x"])
    assert (args.layers, args.hidden, args.heads, args.kv_heads) == (24, 896, 14, 2)
    assert (args.intermediate, args.vocab, args.rope_theta) == (4864, 151_936, 1e6)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("real") / "model"
    assert _script().main(["--out", str(out), *SMALL]) == 0
    return out


def test_it_loads_with_the_auto_classes(built):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(built)
    tok = AutoTokenizer.from_pretrained(built)
    config = json.loads((built / "config.json").read_text())
    assert config["model_type"] == "qwen2"
    assert config["tie_word_embeddings"] is True
    assert config["rope_parameters"]["rope_theta"] == 1e6
    assert model.config.num_key_value_heads == 2
    assert model.get_output_embeddings().weight.shape == (1024, 64)
    assert len(tok) == 600
    assert model.config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    ids = tok("def add(x, y):\n    return x + y", return_tensors="pt").input_ids
    assert tok.decode(ids[0]) == "def add(x, y):\n    return x + y"
    with torch.no_grad():
        assert model(ids).logits.shape == (1, ids.shape[1], 1024)


def test_the_chat_template_renders_tools_and_hermes_calls(built):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built)
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "Rain.", "name": "get_weather"},
    ]
    text = tok.apply_chat_template(
        messages, tools=[WEATHER], tokenize=False, add_generation_prompt=True
    )
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n<tools>\n")
    assert json.dumps(WEATHER)[:40] in text
    assert '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>' in text
    assert text.endswith("<|im_start|>tool\nRain.<|im_end|>\n<|im_start|>assistant\n")
    marker = tok.convert_tokens_to_ids("<tool_call>")
    assert marker in tok(text).input_ids  # one token, as the parser expects
