import math

import pytest
import torch

from agentgym.error import ConfigError
from agentgym.trainers.algorithms import truncated_importance_weights

F64 = torch.float64


def test_truncated_importance_weights_hand_computed() -> None:
    sampling = torch.tensor([[-1.0, -2.0, -0.7, -3.0]], dtype=F64)
    # old − sampling = log 1.5, log 3, 0, (masked)
    old = sampling + torch.tensor([[math.log(1.5), math.log(3.0), 0.0, 4.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 1, 0]])
    out = truncated_importance_weights(old, sampling, mask, cap=2.0)
    # min(1.5, 2) = 1.5;  min(3, 2) = 2;  min(1, 2) = 1;  masked → 0
    torch.testing.assert_close(
        out.weights, torch.tensor([[1.5, 2.0, 1.0, 0.0]], dtype=F64), atol=1e-12, rtol=0
    )
    assert out.truncated_fraction.item() == pytest.approx(1 / 3, abs=1e-12)


def test_weights_carry_no_gradient() -> None:
    old = torch.zeros(1, 2, dtype=F64, requires_grad=True)
    out = truncated_importance_weights(old, torch.zeros(1, 2, dtype=F64), torch.ones(1, 2))
    assert not out.weights.requires_grad
    assert out.weights.tolist() == [[1.0, 1.0]]


def test_cap_below_one_raises() -> None:
    with pytest.raises(ConfigError, match=r"cap=0\.5"):
        truncated_importance_weights(
            torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), cap=0.5
        )
