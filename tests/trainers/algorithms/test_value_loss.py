import pytest
import torch

from agentgym.error import ConfigError
from agentgym.trainers.algorithms import clipped_value_loss

F64 = torch.float64
OLD = torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=F64)  # [1, 4]
RETURNS = torch.tensor([[2.0, 0.0, -1.0, 5.0]], dtype=F64)
MASK = torch.tensor([[1, 1, 1, 0]])


def values() -> torch.Tensor:
    return torch.tensor([[1.5, 1.1, 0.0, 9.0]], dtype=F64, requires_grad=True)


def test_clipped_value_loss_hand_computed() -> None:
    v = values()
    out = clipped_value_loss(v, OLD, RETURNS, MASK, clip_range=0.2)
    # tok 1: (1.5−2)² = 0.25; V_clip = 1.2 → (1.2−2)² = 0.64; ½·max = 0.32   (clipped)
    # tok 2: (1.1−0)² = 1.21; V_clip = 1.1 → 1.21;            ½·max = 0.605  (not clipped)
    # tok 3: (0+1)² = 1;      V_clip = 0.8 → (0.8+1)² = 3.24; ½·max = 1.62   (clipped)
    # token-mean: (0.32 + 0.605 + 1.62) / 3 = 2.545 / 3
    assert out.loss.item() == pytest.approx(2.545 / 3, abs=1e-12)
    torch.testing.assert_close(
        out.per_token, torch.tensor([[0.32, 0.605, 1.62, 0.0]], dtype=F64), atol=1e-12, rtol=0
    )
    assert out.clip_fraction.item() == pytest.approx(2 / 3, abs=1e-12)
    out.loss.backward()
    # Clipped tokens pass no gradient (V − V_old is outside ±0.2); tok 2: (V − R)/3 = 1.1/3
    expected = torch.tensor([[0.0, 1.1 / 3, 0.0, 0.0]], dtype=F64)
    torch.testing.assert_close(v.grad, expected, atol=1e-12, rtol=0)


def test_unclipped_value_loss() -> None:
    out = clipped_value_loss(values(), OLD, RETURNS, MASK, clip_range=None)
    # ½ · (0.25 + 1.21 + 1) / 3 = 1.23 / 3
    assert out.loss.item() == pytest.approx(1.23 / 3, abs=1e-12)
    assert out.clip_fraction.item() == 0.0


def test_clipping_is_inactive_when_values_equal_old_values() -> None:
    v = OLD.clone()
    clipped = clipped_value_loss(v, OLD, RETURNS, MASK, clip_range=0.2)
    plain = clipped_value_loss(v, OLD, RETURNS, MASK, clip_range=None)
    assert clipped.loss.item() == plain.loss.item()


def test_bad_clip_range_raises() -> None:
    with pytest.raises(ConfigError, match="clip_range=0"):
        clipped_value_loss(values(), OLD, RETURNS, MASK, clip_range=0)
