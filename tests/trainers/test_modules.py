"""The policy module computes logits only where they are needed, with the same results."""

from __future__ import annotations

import pytest
import torch

from agentgym.models import load, tiny_config
from agentgym.trainers.modules import PolicyModule, restrict_logits, token_logprobs


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


def composed_logprobs(scaled, targets, allowed):
    """The textbook ops ``token_logprobs`` fuses: log-softmax, gather, Σ −p·log p."""
    if allowed is not None:
        scaled = restrict_logits(scaled, allowed)
    logp = torch.log_softmax(scaled, dim=-1)
    entropy = -(logp.exp() * logp.masked_fill(logp.isinf(), 0.0)).sum(-1)
    return logp.gather(-1, targets[:, None])[:, 0], entropy


@pytest.mark.parametrize("restricted", [False, True])
@pytest.mark.parametrize("entropy_grad", [False, True])
def test_fused_logprobs_entropy_and_gradients_equal_the_composed_ops(restricted, entropy_grad):
    torch.manual_seed(1)
    batch, length, vocab, temperature = 3, 9, 300, 0.7
    ids = torch.randint(0, vocab, (batch, length))
    positions = torch.rand(batch, length - 1) > 0.3
    targets = ids[:, 1:][positions]
    allowed = None
    if restricted:  # every other token chose among itself and two more ids; the rest among all
        allowed = torch.full((batch, length, 3), -1)
        for b, t in positions.nonzero().tolist()[::2]:
            token = int(ids[b, t + 1])
            allowed[b, t + 1] = torch.tensor([*sorted({token, (token + 5) % vocab, 7}), -1])[:3]
    logits = (torch.randn(len(targets), vocab) * 4).requires_grad_()
    twin = logits.detach().clone().requires_grad_()
    logprobs, entropy = token_logprobs(
        logits,
        ids,
        temperature,
        positions=positions,
        allowed=allowed,
        entropy_grad=entropy_grad,
    )
    restriction = None if allowed is None else allowed[:, 1:][positions]
    want_logprobs, want_entropy = composed_logprobs(twin / temperature, targets, restriction)
    got_logprobs, got_entropy = logprobs[:, 1:][positions], entropy[:, 1:][positions]
    torch.testing.assert_close(got_logprobs, want_logprobs, rtol=0, atol=1e-5)
    torch.testing.assert_close(got_entropy, want_entropy, rtol=0, atol=1e-5)
    assert entropy.requires_grad == entropy_grad
    if restricted:  # a restricted token's distribution has at most three ids: entropy ≤ log 3
        assert float(got_entropy.detach().min()) < 1.0986 + 1e-6
    weights = torch.randn(2, len(targets))
    loss = (got_logprobs * weights[0]).sum()
    want = (want_logprobs * weights[0]).sum()
    if entropy_grad:
        loss = loss + (got_entropy * weights[1]).sum()
        want = want + (want_entropy * weights[1]).sum()
    loss.backward()
    want.backward()
    assert torch.isfinite(logits.grad).all()
    torch.testing.assert_close(logits.grad, twin.grad, rtol=0, atol=1e-5)
