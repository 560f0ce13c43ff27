"""The suite's collection rule for fast samples (tests/conftest.py): a test marked
``covered_by(<node id>)`` is left out only when that slow test is collected too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = "tests/envs/web/shop/test_shop_env.py::test_oracle_solves_a_sample_of_tasks"


def _collected(*paths: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_a_covered_sample_runs_alone_and_is_left_out_beside_its_slow_test() -> None:
    alone = _collected("tests/envs/web/shop/test_shop_env.py")
    assert SAMPLE in alone
    both = _collected(
        "tests/envs/web/shop/test_shop_env.py", "tests/envs/web/shop/test_shop_oracle_all.py"
    )
    assert SAMPLE not in both
    assert (
        "tests/envs/web/shop/test_shop_oracle_all.py::test_oracle_solves_95_percent_of_the_tasks"
        in both
    )
    assert len(both) == len(alone) - 2 + 2  # both samples out, both slow tests in
