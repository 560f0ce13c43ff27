"""The output layer run a chunk of positions at a time: the plain path's log-probs, entropy and
gradients, without the full ``[tokens × vocab]`` logits."""

from __future__ import annotations

import pytest
import torch

from agentgym.models import load, tiny_config
from agentgym.trainers.chunked_head import chunk_size
from agentgym.trainers.modules import PolicyModule, ValueModel

CHUNK = 5


def batch(vocab: int) -> dict[str, torch.Tensor]:
    """Two groups of three rows, each group sharing a 14-token prompt (prefix sharing runs it
    once), one padded row, two sampled turns per row, and constrained tokens in row 1."""
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(3, vocab, (2, 14), generator=gen)
    ids = torch.cat(
        [prompts.repeat_interleave(3, 0), torch.randint(3, vocab, (6, 12), generator=gen)], 1
    )
    attention = torch.ones_like(ids)
    attention[4, 22:] = 0
    mask = torch.zeros_like(ids)
    mask[:, 14:18] = 1
    mask[:, 20:24] = 1
    mask *= attention
    allowed = torch.full((*ids.shape, 4), -1)
    for t in range(14, 18):  # row 1 chose among 4 ids, its own included
        choices = sorted({int(ids[1, t]), 3, 4, 5})
        allowed[1, t, : len(choices)] = torch.tensor(choices)
    return {"input_ids": ids, "attention_mask": attention, "loss_mask": mask, "allowed": allowed}


@pytest.fixture(scope="module")
def module():
    model, _ = load(seed=5, config=tiny_config(num_hidden_layers=2))
    value = ValueModel.from_policy(model)
    torch.nn.init.normal_(value.head.weight)
    return PolicyModule(model, value)


def run(module, inputs, chunk):
    """The module's outputs with ``chunk`` positions per chunk, and every gradient of a loss
    that uses log-probs, entropy (an entropy bonus) and values."""
    module.zero_grad(set_to_none=True)
    module.logits_chunk = chunk
    out = module(**inputs, temperature=0.7, entropy_grad=True)
    weights = torch.linspace(-1, 1, out.logprobs.numel()).view_as(out.logprobs)
    loss = (out.logprobs * weights).sum() + 0.3 * out.entropy.sum() + out.values.sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    return out, grads


def test_chunked_equals_the_one_pass_path_in_fp32(module):
    inputs = batch(module.policy.config.vocab_size)
    plain, plain_grads = run(module, inputs, 0)
    chunked, chunked_grads = run(module, inputs, CHUNK)
    on = inputs["loss_mask"].bool()
    assert on.sum() > 4 * CHUNK  # several chunks, the last one partial
    gaps = {
        "logprobs": (chunked.logprobs - plain.logprobs).abs().max().item(),
        "entropy": (chunked.entropy - plain.entropy).abs().max().item(),
        "values": (chunked.values - plain.values).abs().max().item(),
    }
    assert chunked_grads.keys() == plain_grads.keys()
    gaps["grad"] = max((chunked_grads[n] - g).abs().max().item() for n, g in plain_grads.items())
    assert max(gaps.values()) < 1e-5, gaps
    # the restriction took effect: row 1's constrained tokens (4 choices) against 1,264
    assert (plain.logprobs[1, 14:18] > -4).all()
    assert (plain.logprobs[0, 14:18] < -4).all()


def test_the_full_logits_are_never_allocated(module):
    inputs = batch(module.policy.config.vocab_size)
    tokens = int(inputs["loss_mask"][:, 1:].sum())
    shapes: list[tuple[int, ...]] = []
    head = module.policy.get_output_embeddings()
    hook = head.register_forward_hook(lambda _m, _i, out: shapes.append(tuple(out.shape)))
    try:
        module.logits_chunk = CHUNK
        out = module(**inputs, temperature=0.7)
        forward_calls = len(shapes)
        out.logprobs.sum().backward()
    finally:
        hook.remove()
        module.zero_grad(set_to_none=True)
    vocab = head.weight.shape[0]
    assert forward_calls == -(-tokens // CHUNK)  # ceil: one output-layer pass per chunk
    assert len(shapes) == 2 * forward_calls  # each chunk recomputed in the backward pass
    assert all(rows <= CHUNK < tokens and v == vocab for rows, v in shapes), shapes


def test_the_automatic_rule_chunks_only_large_vocab_times_tokens():
    assert chunk_size(None, 151_936, 64 * 1024) == 220  # 2^25 logits: 128 MiB in fp32
    assert chunk_size(None, 1264, 4096) is None  # the tiny policy: one pass
    assert chunk_size(0, 151_936, 64 * 1024) is None  # off
    assert chunk_size(16, 1264, 17) == 16
    assert chunk_size(16, 1264, 16) is None
