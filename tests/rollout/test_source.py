"""The declared interface of an episode source: ``EpisodeSource``'s three methods, and
``SourceBase``'s optional members with their defaults; the old ``agentgym.trainers`` paths."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest

from agentgym.core.errors import AgentGymDeprecationWarning
from agentgym.rollout.sharded_source import ShardedSource
from agentgym.rollout.source import EpisodeSource, SourceBase, as_source


class Plain:
    """A stand-in with the three methods only, and attributes nobody declared."""

    def __init__(self) -> None:
        self.position = 0
        self.engine = "not declared"
        self.stats = {"bogus": 1.0}
        self.seen_tasks = {"bogus"}

    def collect(self, num_groups: int) -> list[Any]:
        self.position += num_groups
        return []

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: Any) -> None:
        self.position = int(state["position"])


class OneRank:
    rank, world_size = 0, 1

    def all_gather_object(self, obj: Any) -> list[Any]:
        return [obj]


def test_a_plain_source_gets_the_defaults_and_keeps_its_three_methods():
    plain = Plain()
    source = as_source(plain)
    assert isinstance(plain, EpisodeSource)
    assert isinstance(source, EpisodeSource)
    assert (source.engine, dict(source.stats), set(source.seen_tasks)) == (None, {}, set())
    source.close()  # nothing to close
    assert source.collect(3) == []
    assert plain.position == 3
    assert source.state_dict() == {"position": 3}
    source.load_state_dict({"position": 7})
    assert plain.position == 7


def test_a_source_base_is_its_own_declaration():
    class Declared(SourceBase):
        engine: Any = "mine"

    declared = Declared()
    assert as_source(declared) is declared
    with pytest.raises(NotImplementedError):
        declared.collect(1)


def test_a_sharded_source_declares_its_local_sources_engine_and_closes_it():
    closed = []

    class Local(Plain, SourceBase):
        def __init__(self) -> None:
            super().__init__()
            self.engine = "local engine"

        def close(self) -> None:
            closed.append(self)

    local = Local()
    sharded = ShardedSource(local, OneRank())
    assert sharded.engine == "local engine"
    sharded.engine = "swapped"  # type: ignore[assignment]
    assert local.engine == "swapped"
    sharded.close()
    assert closed == [local]
    assert ShardedSource(Plain(), OneRank()).engine is None  # undeclared: not read


@pytest.mark.parametrize(
    ("old", "name"),
    [
        ("agentgym.trainers.source", "EpisodeSource"),
        ("agentgym.trainers.collector", "CollectorSource"),
        ("agentgym.trainers.curriculum", "make_curriculum"),
    ],
)
def test_the_old_module_paths_warn_and_still_work(old, name):
    sys.modules.pop(old, None)
    with pytest.warns(AgentGymDeprecationWarning, match=r"agentgym\.rollout\."):
        module = importlib.import_module(old)
    assert getattr(module, name).__module__.startswith("agentgym.rollout.")
