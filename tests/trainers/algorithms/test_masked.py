import math

import pytest
import torch

from agentgym.trainers.algorithms import masked_mean, masked_sum, masked_whiten

F64 = torch.float64


def test_masked_sum_and_mean_ignore_masked_entries() -> None:
    x = torch.tensor([[1.0, 50.0, 3.0], [2.0, 4.0, 50.0]], dtype=F64)  # [2, 3]
    m = torch.tensor([[1, 0, 1], [1, 1, 0]])
    assert masked_sum(x, m).item() == 10.0  # 1 + 3 + 2 + 4
    assert masked_mean(x, m).item() == 2.5  # 10 / 4
    assert masked_mean(x, m, dim=-1).tolist() == [2.0, 3.0]  # (1+3)/2, (2+4)/2
    assert masked_mean(x, torch.zeros_like(m)).item() == 0.0  # not NaN


def test_masked_whiten_uses_population_std_over_masked_entries() -> None:
    x = torch.tensor([[1.0, 99.0, 3.0]], dtype=F64)
    m = torch.tensor([[1, 0, 1]])
    # mean 2, population var ((1-2)² + (3-2)²) / 2 = 1, std 1 → [-1, 0 (masked), 1]
    got = masked_whiten(x, m, eps=0.0)
    assert got.tolist() == [[-1.0, 0.0, 1.0]]
    assert masked_whiten(x, m).tolist()[0][2] == pytest.approx(1 / (1 + 1e-8), abs=1e-15)
    assert math.isfinite(masked_whiten(x, torch.zeros_like(m)).sum().item())
