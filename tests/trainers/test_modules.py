"""The policy module computes logits only where they are needed, with the same results."""

from __future__ import annotations

import torch

from agentgym.models import load, tiny_config
from agentgym.trainers.modules import PolicyModule


def test_logprobs_at_loss_mask_positions_equal_those_of_the_full_forward() -> None:
    torch.manual_seed(0)
    model, _ = load(seed=3, config=tiny_config(num_hidden_layers=2))
    module = PolicyModule(model)
    ids = torch.randint(3, 1000, (3, 17))
    attention = torch.ones_like(ids)
    attention[2, 12:] = 0  # a padded row
    mask = torch.zeros_like(ids)
    mask[0, 5:9] = 1
    mask[1, 2:4] = 1
    mask[1, 10:16] = 1  # two turns with env tokens between them
    mask[2, 8:12] = 1
    full = module(ids, attention, temperature=0.7)
    masked = module(ids, attention, temperature=0.7, loss_mask=mask)
    on = mask.bool()
    torch.testing.assert_close(masked.logprobs[on], full.logprobs[on], rtol=0, atol=1e-6)
    torch.testing.assert_close(masked.entropy[on], full.entropy[on], rtol=0, atol=1e-6)
    assert torch.all(masked.logprobs[~on] == 0)
    # gradients flow to the same parameters through the cheaper path
    masked.logprobs[on].sum().backward()
    assert model.get_output_embeddings().weight.grad is not None


def test_values_at_loss_mask_positions_equal_those_of_the_full_forward() -> None:
    from agentgym.trainers.modules import ValueModel

    torch.manual_seed(0)
    model, _ = load(seed=4, config=tiny_config(num_hidden_layers=2))
    value = ValueModel.from_policy(model)
    torch.nn.init.normal_(value.head.weight)  # a trained head: values are not all 0
    head = torch.randint(3, 1000, (20,))
    ids = torch.cat([head.expand(4, 20), torch.randint(3, 1000, (4, 9))], dim=1)  # one prompt
    attention = torch.ones_like(ids)
    mask = torch.zeros_like(ids)
    mask[:, 22:25] = 1
    mask[1, 26:28] = 1
    full = value(ids, attention)
    masked = value(ids, attention, loss_mask=mask)  # the shared prompt runs once
    on = mask.bool()
    torch.testing.assert_close(masked[on], full[on], rtol=0, atol=1e-5)
    assert torch.all(masked[~on] == 0)
    masked[on].sum().backward()
    assert value.head.weight.grad is not None
    assert value.backbone.embed_tokens.weight.grad.abs().sum() > 0
