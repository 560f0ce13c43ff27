"""Rows that start with the same prompt run it once, with the plain forward pass's results."""

from __future__ import annotations

import pytest
import torch

from agentgym.models import load, tiny_config
from agentgym.trainers.modules import PolicyModule
from agentgym.trainers.prefix_sharing import find_shared_prefixes, shared_prefix_hidden


def grouped_batch(
    prompt_lengths: list[int], group_size: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``[B, T]`` ids, attention and loss masks: ``group_size`` rows per prompt,
    each row its own completion of 3-8 tokens, some with env tokens between two turns."""
    gen = torch.Generator().manual_seed(seed)
    rows, masks = [], []
    for length in prompt_lengths:
        prompt = torch.randint(3, 1000, (length,), generator=gen).tolist()
        for i in range(group_size):
            turn = torch.randint(3, 1000, (3 + (i * 5 + length) % 6,), generator=gen).tolist()
            env = [7, 8] if i % 2 else []  # a second turn after env tokens
            second = [9, 10, 11] if i % 2 else []
            rows.append(prompt + turn + env + second)
            masks.append([0] * length + [1] * len(turn) + [0] * len(env) + [1] * len(second))
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    attention = torch.zeros_like(ids)
    loss_mask = torch.zeros(len(rows), width)
    for i, (row, mask) in enumerate(zip(rows, masks, strict=True)):
        ids[i, : len(row)] = torch.tensor(row)
        attention[i, : len(row)] = 1
        loss_mask[i, : len(row)] = torch.tensor(mask, dtype=torch.float32)
    return ids, attention, loss_mask


def test_groups_share_their_prompt_and_distinct_prompts_do_not():
    ids, attention, mask = grouped_batch([9, 14, 6], group_size=4)
    shared = find_shared_prefixes(ids, attention, mask)
    assert shared is not None
    assert shared.owner.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert shared.length.tolist() == [8] * 4 + [13] * 4 + [5] * 4  # the prompt but its last token
    assert shared.ids.shape == (3, 13)
    assert shared.mask.sum(-1).tolist() == [8, 13, 5]
    assert shared.mask[2].tolist() == [1] * 5 + [0] * 8  # right-padded
    assert shared.head == 0  # random prompts: nothing in common
    torch.testing.assert_close(shared.ids[1], ids[4, :13])
    # one row per prompt: nothing to share
    alone = grouped_batch([9, 14, 6], group_size=1)
    assert find_shared_prefixes(*alone) is None


def common_head_batch(
    seed: int = 0, group_size: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows with a long common head (a system prompt), then each group its own prompt (a board)
    and each row its own turn."""
    gen = torch.Generator().manual_seed(seed)
    head = torch.randint(3, 1000, (40,), generator=gen).tolist()
    ids, attention, mask = grouped_batch([5, 7, 6, 9, 5, 8], group_size=group_size, seed=seed)
    width = ids.shape[1] + len(head)
    out = torch.zeros(ids.shape[0], width, dtype=torch.long)
    out_attention, out_mask = torch.zeros_like(out), torch.zeros(ids.shape[0], width)
    for i in range(ids.shape[0]):
        n = int(attention[i].sum())
        out[i, : len(head) + n] = torch.tensor(head + ids[i, :n].tolist())
        out_attention[i, : len(head) + n] = 1
        out_mask[i, len(head) : len(head) + n] = mask[i, :n]
    return out, out_attention, out_mask


def test_rows_with_different_prompts_share_the_head_they_have_in_common():
    ids, attention, mask = common_head_batch()
    shared = find_shared_prefixes(ids, attention, mask)
    assert shared is not None
    assert shared.owner.tolist() == list(range(6))  # each its own prompt ...
    assert shared.ids.shape[0] == 6
    common = shared.head  # ... on one head, run once
    assert common >= 40  # the head (and any tokens the prompts happen to share after it)
    assert (ids[:, :common] == ids[:1, :common]).all()
    assert not (ids[:, common] == ids[0, common]).all()


def test_groups_on_a_common_head_run_the_head_once_and_each_prompt_once():
    ids, attention, mask = common_head_batch(group_size=4)
    shared = find_shared_prefixes(ids, attention, mask)
    assert shared is not None
    assert shared.head >= 40
    assert shared.owner.tolist() == [u for u in range(6) for _ in range(4)]
    assert shared.ids.shape[0] == 6
    for u, row in enumerate(range(0, 24, 4)):
        n = int(shared.length[row])
        assert shared.mask[u].sum() == n
        torch.testing.assert_close(shared.ids[u, :n], ids[row, :n])


def test_a_shared_head_gives_the_plain_logprobs_and_gradients():
    model, _ = load(seed=3, config=tiny_config(num_hidden_layers=2))
    model.double()
    ids, attention, mask = common_head_batch(seed=1)
    results = []
    for share in (True, False):
        module = PolicyModule(model, share_prefixes=share)
        model.zero_grad()
        out = module(ids, attention, loss_mask=mask)
        (out.logprobs * mask).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((out.logprobs, grads))
    (shared_lp, shared_grads), (plain_lp, plain_grads) = results
    torch.testing.assert_close(shared_lp, plain_lp, rtol=0, atol=1e-10)
    assert shared_grads.keys() == plain_grads.keys()
    for name, grad in plain_grads.items():
        # RMSNorm and RoPE compute in float32 even in a float64 model: ~1e-8 relative
        assert (shared_grads[name] - grad).norm() <= 1e-6 * grad.norm(), name


@pytest.mark.parametrize("batch", ["groups", "groups_on_a_head", "a_head"])
def test_the_shared_forward_gives_the_plain_hidden_states_and_gradients(batch):
    model, _ = load(seed=1, config=tiny_config(num_hidden_layers=2))
    model.double()
    if batch == "groups":
        ids, attention, mask = grouped_batch([9, 14, 6], group_size=4)
    else:
        ids, attention, mask = common_head_batch(seed=2, group_size=3 if batch != "a_head" else 1)
    positions = mask[:, 1:].bool()
    weights = torch.randn(int(positions.sum()), model.config.hidden_size, dtype=torch.float64)

    def run(shared: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model.zero_grad()
        if shared:
            found = find_shared_prefixes(ids, attention, mask)
            assert found is not None
            hidden = shared_prefix_hidden(model.base_model, ids, attention, found, positions)
            assert hidden is not None
        else:
            out = model.base_model(input_ids=ids, attention_mask=attention, use_cache=False)
            hidden = out.last_hidden_state[:, :-1][positions]
        (hidden * weights).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return hidden.detach(), grads

    plain, plain_grads = run(False)
    shared, shared_grads = run(True)
    torch.testing.assert_close(shared, plain, rtol=0, atol=1e-10)
    assert shared_grads.keys() == plain_grads.keys()
    for name, grad in plain_grads.items():
        # RMSNorm and RoPE compute in float32 even in a float64 model: ~1e-8 relative
        assert (shared_grads[name] - grad).norm() <= 1e-6 * grad.norm(), name


def test_policy_module_shares_prompts_with_the_same_logprobs_and_gradients():
    model, _ = load(seed=2, config=tiny_config(num_hidden_layers=2))
    ids, attention, mask = grouped_batch([20, 11], group_size=6, seed=3)
    on = mask.bool()

    def run(share: bool) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        model.zero_grad()
        out = PolicyModule(model, share_prefixes=share)(
            ids, attention, temperature=0.8, loss_mask=mask
        )
        out.logprobs[on].sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        return out.logprobs.detach(), out.entropy, grads

    plain, plain_entropy, plain_grads = run(False)
    shared, shared_entropy, shared_grads = run(True)
    torch.testing.assert_close(shared, plain, rtol=0, atol=1e-5)
    torch.testing.assert_close(shared_entropy, plain_entropy, rtol=0, atol=1e-5)
    assert torch.all(shared[~on] == 0)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)


def test_a_model_with_sliding_window_layers_falls_back_to_the_plain_forward():
    config = tiny_config(
        num_hidden_layers=2,
        use_sliding_window=True,
        sliding_window=4,
        max_window_layers=1,
        layer_types=["full_attention", "sliding_attention"],
    )
    model, _ = load(seed=4, config=config)
    ids, attention, mask = grouped_batch([12, 9], group_size=4, seed=5)
    module = PolicyModule(model)
    out = module(ids, attention, temperature=1.0, loss_mask=mask)
    assert not module.share_prefixes  # its cache keeps only a window: tried once, then off
    plain = PolicyModule(model, share_prefixes=False)(ids, attention, loss_mask=mask)
    torch.testing.assert_close(out.logprobs, plain.logprobs, rtol=0, atol=0)
