"""The image builder's declaration of what model-written code may import (no build here: the
image's contents are checked by the Code-v0 tests that import numpy and sympy in it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym.sandbox.image_tag import DEFAULT_IMAGE, RECIPE, SOLUTION_PACKAGES
from agentgym.sandbox.images import DEFAULT_PACKAGES, main


def test_solution_packages_are_declared_once_and_built_into_the_image(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert {"numpy", "sympy"} <= set(SOLUTION_PACKAGES)
    assert set(SOLUTION_PACKAGES.values()) <= set(DEFAULT_PACKAGES)
    assert DEFAULT_IMAGE.endswith(f"-r{RECIPE}")
    assert main(["solution-packages"]) == 0
    printed = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert printed == [[module, package] for module, package in SOLUTION_PACKAGES.items()]
    # the host set-up installs what that command prints, not a list of its own
    setup = (Path(__file__).parents[2] / "scripts" / "docker_setup.sh").read_text()
    assert "agentgym.sandbox.images solution-packages" in setup
    assert not any(package in setup for package in SOLUTION_PACKAGES.values())
