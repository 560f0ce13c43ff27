"""The tiny default policy: seeded weights, shipped config and tokenizer, local directories."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import agentgym.models as models
from agentgym.error import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny():
    return models.load(seed=0)


def test_same_seed_same_weights_other_seed_other_weights(tiny):
    model, _ = tiny
    again, _ = models.load(seed=0)
    other, _ = models.load(seed=1)
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert not torch.equal(model.model.embed_tokens.weight, other.model.embed_tokens.weight)


def test_load_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    models.load(seed=7)
    assert torch.equal(torch.rand(3), expected)


def test_tiny_policy_is_small_float32_eval_qwen2(tiny):
    model, _ = tiny
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert 1_000_000 <= model.num_parameters() <= 5_000_000
    assert next(model.parameters()).dtype == torch.float32
    assert not model.training


def test_config_agrees_with_tokenizer(tiny):
    model, tok = tiny
    assert model.config.vocab_size == len(tok)
    assert tok.eos_token == "<|im_end|>"
    assert model.config.eos_token_id == tok.eos_token_id
    assert tok.pad_token == "<|endoftext|>"
    assert model.config.pad_token_id == tok.pad_token_id


@pytest.mark.parametrize(
    "marker", ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>"]
)
def test_markers_are_single_tokens(tiny, marker):
    _, tok = tiny
    ids = tok.encode(f"a{marker}b", add_special_tokens=False)
    assert tok.convert_ids_to_tokens(ids)[1] == marker
    assert len(ids) == 3


def test_frozenlake_neighbours_are_single_tokens(tiny):
    from agentgym.envs.frozenlake.text import surroundings

    _, tok = tiny
    line = surroundings(["SFH", "FFF", "FFG"], (0, 1))  # left ice, down ice, right hole, up edge
    pieces = tok.tokenize(line)
    assert [p for p in pieces if p.startswith(" ")] == [
        " left ice",
        " down ice",
        " right hole",
        " up edge",
    ]
    assert tok.decode(tok.encode(line, add_special_tokens=False)) == line
    assert len(tok.tokenize(" right hole")) == 1
    assert len(tok.tokenize("right hole")) > 1  # only as the line writes it, after a space


def test_tokenizer_round_trips_text(tiny):
    _, tok = tiny
    call = '<tool_call>{"name": "move", "arguments": {"direction": "left"}}</tool_call>'
    text = f"SFFH\nFHFG\n{call} é€🙂 x=12"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_dtype_and_config_override():
    model, _ = models.load(dtype="bfloat16", config=models.tiny_config(num_hidden_layers=1))
    assert next(model.parameters()).dtype == torch.bfloat16
    assert model.config.num_hidden_layers == 1


def test_unknown_override_and_bad_dtype_are_config_errors():
    with pytest.raises(ConfigError, match="hidden_sizes"):
        models.tiny_config(hidden_sizes=3)
    with pytest.raises(ConfigError, match="dtype"):
        models.load(dtype="float33")


def test_local_directory_loads_what_was_saved(tiny, tmp_path):
    model, tok = tiny
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, loaded_tok = models.load(tmp_path)
    ids = torch.tensor([tok.encode("hello there", add_special_tokens=False)])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=0)
    messages = [{"role": "user", "content": "hi"}]
    assert loaded_tok.apply_chat_template(messages, tokenize=False) == tok.apply_chat_template(
        messages, tokenize=False
    )


def test_missing_path_names_it_and_the_fix(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ConfigError) as error:
        models.load(missing)
    assert str(missing) in str(error.value)
    assert "Fix:" in str(error.value)
    with pytest.raises(ConfigError, match=r"config\.json"):
        models.load(tmp_path)


def test_shipped_tokenizer_is_what_the_committed_script_builds():
    spec = importlib.util.spec_from_file_location("build", REPO / "scripts/build_tiny_tokenizer.py")
    assert spec is not None
    assert spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    for name, text in build.rendered().items():
        assert (models.TINY_DIR / name).read_text() == text, name
