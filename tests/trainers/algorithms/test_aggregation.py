import pytest
import torch

from agentgym.error import ConfigError
from agentgym.trainers.algorithms import Aggregation, aggregate

F64 = torch.float64
# Two sequences; 9. and 7. sit on env / padding tokens and must not count.
LOSS = torch.tensor([[1.0, 9.0, 2.0, 3.0], [4.0, 6.0, 7.0, 7.0]], dtype=F64)  # [B=2, T=4]
MASK = torch.tensor([[1, 0, 1, 1], [1, 1, 0, 0]])  # [2, 4]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 16 / 5),  # (1 + 2 + 3 + 4 + 6) / 5 tokens = 3.2
        ("seq-mean-token-mean", 3.5),  # ((1+2+3)/3 + (4+6)/2) / 2 = (2 + 5) / 2
        ("seq-mean-token-sum", 8.0),  # (6 + 10) / 2
        ("seq-mean-token-sum-norm", 1.0),  # (6 + 10) / (2 sequences * L=8)
    ],
)
def test_hand_computed(mode: str, expected: float) -> None:
    got = aggregate(LOSS, MASK, mode, max_length=8)
    assert got.item() == pytest.approx(expected, abs=1e-12)


def test_token_mean_and_seq_mean_differ_on_unequal_lengths() -> None:
    token = aggregate(LOSS, MASK, Aggregation.TOKEN_MEAN)
    seq = aggregate(LOSS, MASK, Aggregation.SEQ_MEAN_TOKEN_MEAN)
    assert token.item() != pytest.approx(seq.item())


def test_empty_sequences_are_left_out_of_the_seq_mean() -> None:
    loss = torch.cat([LOSS, torch.full((1, 4), 100.0, dtype=F64)])  # [3, 4]
    mask = torch.cat([MASK, torch.zeros(1, 4, dtype=MASK.dtype)])  # third row: no sampled token
    assert aggregate(loss, mask, "seq-mean-token-mean").item() == pytest.approx(3.5, abs=1e-12)
    assert aggregate(loss, mask, "token-mean").item() == pytest.approx(3.2, abs=1e-12)
    # seq-mean-token-sum keeps the constant 1/B: (6 + 10 + 0) / 3
    assert aggregate(loss, mask, "seq-mean-token-sum").item() == pytest.approx(16 / 3, abs=1e-12)


@pytest.mark.parametrize("mode", [*Aggregation])
def test_all_masked_gives_zero_and_finite_gradients(mode: Aggregation) -> None:
    loss = LOSS.clone().requires_grad_()
    out = aggregate(loss, torch.zeros_like(MASK), mode, max_length=8)
    out.backward()
    assert out.item() == 0.0
    assert torch.isfinite(loss.grad).all()


@pytest.mark.parametrize(
    ("mode", "normalizer"),
    [
        ("token-mean", 5),
        ("seq-mean-token-mean", 2),
        ("seq-mean-token-sum", 2),
        ("seq-mean-token-sum-norm", 2),
    ],
)
def test_micro_batches_add_up_to_the_minibatch_loss(mode: str, normalizer: int) -> None:
    full = aggregate(LOSS, MASK, mode, max_length=8)
    parts = [
        aggregate(LOSS[i : i + 1], MASK[i : i + 1], mode, max_length=8, normalizer=normalizer)
        for i in range(2)
    ]
    assert (parts[0] + parts[1]).item() == pytest.approx(full.item(), abs=1e-12)


def test_errors_name_the_value_and_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"max_length=None.*Fix"):
        aggregate(LOSS, MASK, "seq-mean-token-sum-norm")
    with pytest.raises(ConfigError, match=r"'token_mean'.*token-mean"):
        aggregate(LOSS, MASK, "token_mean")
    with pytest.raises(ConfigError, match=r"mask.shape=\(2, 3\)"):
        aggregate(LOSS, MASK[:, :3])
