"""The suite's collection rule for fast samples (tests/conftest.py): a test marked
``covered_by(<node id>)`` is left out only when that slow test is collected too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _collected(*paths: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


# Three collections of the web modules: ~6 s alone, ~110 s beside CI's other runs; this catches a
# hang only.
@pytest.mark.timeout(900)
def test_a_covered_sample_runs_alone_and_is_left_out_beside_its_slow_test() -> None:
    fast, slow = (
        "tests/envs/web/shop/test_shop_env.py",
        "tests/envs/web/shop/test_shop_oracle_all.py",
    )
    samples = {
        f"{fast}::test_oracle_solves_a_sample_of_tasks",
        f"{fast}::test_random_policy_scores_near_zero",
    }
    alone = set(_collected(fast))
    assert samples <= alone
    both = set(_collected(fast, slow))
    assert not samples & both
    assert alone - samples <= both  # the module's other tests still run
    assert f"{slow}::test_oracle_solves_95_percent_of_the_tasks" in both
    assert f"{slow}::test_random_policy_over_50_episodes_scores_near_zero" in both
    # make test-fast: -m "not slow" leaves the slow tests out, so the samples run
    fast_only = set(_collected(fast, slow, "-m", "not slow"))
    assert samples <= fast_only
    assert not any(node.startswith(slow) for node in fast_only)


def test_test_modules_outside_packages_have_unique_names() -> None:
    """pytest imports a test module in a folder without ``__init__.py`` by its bare name: two
    such modules named alike stop the whole suite's collection ("import file mismatch")."""
    seen: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if (path.parent / "__init__.py").exists():
            continue
        other = seen.setdefault(path.name, path)
        assert other == path, f"{path.relative_to(ROOT)} and {other.relative_to(ROOT)}: rename one"
