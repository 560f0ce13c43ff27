"""A deprecated API called by agentgym fails the tests (pyproject's ``filterwarnings``), and the
engine and the trainers' prefix sharing call none."""

from __future__ import annotations

import asyncio
import warnings

import pytest
import torch

from agentgym.inference import HFEngine, SamplingParams
from agentgym.models import load, tiny_config

DEPRECATIONS = [DeprecationWarning, PendingDeprecationWarning, FutureWarning]

LIBRARY = """
import warnings
def old_api():
    warnings.warn("old_api is deprecated", CATEGORY, stacklevel=2)  # blames its caller
"""


@pytest.fixture
def configured_filters(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("pythonwarnings"):
        pytest.skip("-W on the command line replaces pyproject's filterwarnings")


def _call_old_api_from(module: str, category: type[Warning]) -> None:
    """``old_api()`` of a library module, called by code whose module is ``module``."""
    library: dict[str, object] = {"__name__": "somelib", "CATEGORY": category}
    exec(compile(LIBRARY, "somelib.py", "exec"), library)
    caller = {"__name__": module, "old_api": library["old_api"]}
    exec(compile("old_api()", f"{module.replace('.', '/')}.py", "exec"), caller)


@pytest.mark.parametrize("category", DEPRECATIONS)
@pytest.mark.usefixtures("configured_filters")
def test_a_deprecated_call_from_agentgym_fails(category):
    with pytest.raises(category, match="old_api is deprecated"):
        _call_old_api_from("agentgym.envs.somewhere", category)


@pytest.mark.parametrize("category", DEPRECATIONS)
@pytest.mark.usefixtures("configured_filters")
def test_a_libraries_own_deprecated_call_only_warns(category):
    # Not ours to fix: recorded, not raised (a dependency's upgrade does not fail the suite).
    with warnings.catch_warnings(record=True) as seen:
        _call_old_api_from("otherlib.module", category)
    assert [w.category for w in seen] == [category]


@pytest.mark.usefixtures("configured_filters")
def test_a_deprecated_forward_argument_fails():
    from transformers.utils.deprecation import deprecate_kwarg

    class Model(torch.nn.Module):
        @deprecate_kwarg("old_cache", version="99.0", new_name="cache")
        def forward(self, x: torch.Tensor, cache: object = None) -> torch.Tensor:
            return x

    # transformers' warning blames the caller of forward: torch's Module.__call__, not us.
    with pytest.raises(FutureWarning, match="old_cache"):
        Model()(torch.zeros(1), old_cache=None)


@pytest.mark.usefixtures("configured_filters")
def test_a_deprecated_base_model_argument_fails():
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) >= Version("5.40"):
        pytest.skip("transformers 5.40 no longer takes past_key_values")
    model, _ = load(config=tiny_config(), seed=0)
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(FutureWarning, match="past_key_values"):
        model.model(input_ids=ids, past_key_values=None, use_cache=True)


def test_the_engine_generates_without_any_deprecation_warning():
    """Prefill, prefill continuing a kept cache, and decode (fused and transformers' forward)."""
    model, tokenizer = load(config=tiny_config(), seed=0)

    async def two_turns(fused: bool) -> None:
        engine = HFEngine(model, tokenizer, seed=0, fused_decode=fused)
        sampling = SamplingParams(max_tokens=4, ignore_eos=True)
        first = await engine.generate([1, 2, 3, 4], sampling)
        await engine.generate([1, 2, 3, 4, *first.token_ids, 5, 6], sampling)
        assert engine.stats.prefix_hits == 1
        await engine.close()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for fused in (True, False):
            asyncio.run(two_turns(fused))
    deprecations = [w for w in seen if issubclass(w.category, tuple(DEPRECATIONS))]
    assert not deprecations, [f"{w.filename}:{w.lineno}: {w.message}" for w in deprecations]
