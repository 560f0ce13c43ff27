"""Several servers behind one ``ServerPolicy``: each episode's turns on one server, new
episodes on the least loaded, every push to every server; a server that stops answering turns
its episodes into counted infra failures and is taken back at the current weights once it
answers; with none left the run stops naming every URL. In-process fake servers (fast); the
same with ``agentgym serve`` processes: ``tests/recipes/test_train_servers.py``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch

from agentgym import models
from agentgym.core.aio import run_sync
from agentgym.core.errors import InfraError
from agentgym.inference.base import SamplingParams
from agentgym.inference.routing import EpisodeLost, EpisodeRoute, Router, episode_route
from agentgym.trainers import fit
from agentgym.trainers.weight_sync import InferenceServerError, ServerPolicy, attach_server

from .test_weight_sync import FakeServer, _source, _trainer


class Server(FakeServer):
    """A fake server with its own URL that answers ``/health`` unless it is failing."""

    def __init__(self, url: str, model: torch.nn.Module, tokenizer: Any) -> None:
        super().__init__(model, tokenizer)
        self.base_url = url

    async def health(self) -> bool:
        return self.fail is None


def _spy_routes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[EpisodeRoute | None, int | None]]:
    picks: list[tuple[EpisodeRoute | None, int | None]] = []
    pick = Router.pick

    def spy(router: Router, route: EpisodeRoute | None) -> int | None:
        index = pick(router, route)
        picks.append((route, index))
        return index

    monkeypatch.setattr(Router, "pick", spy)
    return picks


def test_two_servers_share_the_episodes_and_one_that_fails_is_taken_back(tmp_path, monkeypatch):
    trainer = _trainer()
    a = Server("http://server-a:1", trainer.module.policy, trainer.tokenizer)
    b = Server("http://server-b:1", models.load(seed=1)[0], trainer.tokenizer)  # other weights
    picks = _spy_routes(monkeypatch)
    batches: list[list[Any]] = []
    step = trainer.step

    def recording_step(episodes, **kwargs):
        batches.append(list(episodes))
        policy = trainer.engine
        if len(batches) == 2:  # b failed while batch 2 was collected; now it answers again,
            b.inner.model.load_state_dict(models.load(seed=1)[0].state_dict())  # restarted
            b.fail = None
            deadline = time.monotonic() + 30
            while not policy.router.up[1] and time.monotonic() < deadline:
                time.sleep(0.02)  # the probe takes it back
            assert policy.router.up[1]
            assert Path(b.paths[-1]).name == "step-00000001"  # loaded the current weights first
            served = b.inner.model.state_dict()
            for name, tensor in trainer.policy_state_dict().items():
                torch.testing.assert_close(served[name], tensor, rtol=0, atol=0, msg=name)
        metrics = step(episodes, **kwargs)
        if len(batches) == 1:  # after push 1 reached both: b stops answering
            b.fail = InfraError("POST http://server-b:1/generate failed: ConnectError")
        return metrics

    trainer.step = recording_step  # type: ignore[method-assign]
    source = _source(a)
    monkeypatch.setattr(ServerPolicy, "__init__", _fast_probe(ServerPolicy.__init__))
    try:
        fit(trainer, source, steps=3, out=tmp_path, engine=[a, b])
        policy = trainer.engine
        assert isinstance(policy, ServerPolicy)
    finally:
        run_sync(trainer.engine.close())

    # every push reached both (b missed push 1 while down, then got it when taken back)
    names = [[Path(p).name for p in s.paths] for s in (a, b)]
    assert names[0] == [f"step-{n:08d}" for n in range(4)]
    assert names[1] == [f"step-{n:08d}" for n in (0, 1, 1, 2, 3)]
    # each episode stayed on one server while that one answered; both got episodes
    pinned: dict[int, set[int]] = {}
    for route, index in picks:
        if route is not None and index is not None:
            pinned.setdefault(id(route), set()).add(index)
    assert all(len(servers) == 1 for servers in pinned.values())
    assert {next(iter(s)) for s in pinned.values()} == {0, 1}
    # batch 2: b's episodes ended as infra failures naming it; the others were played on a
    lost = [e for e in batches[1] if e.outcome == "infra"]
    assert lost
    assert all("http://server-b:1" in (e.cause or "") for e in lost)
    assert any(e.outcome != "infra" for e in batches[1])
    assert policy.lost >= len(lost)
    # the last batch: both servers again, every turn of the current version
    assert {v for e in batches[-1] for v in e.weight_versions} == {trainer.step_count - 1}


def _fast_probe(init: Any) -> Any:
    def patched(self: ServerPolicy, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{**kwargs, "probe_s": 0.05})

    return patched


def test_with_every_server_down_the_run_stops_naming_each_url(tmp_path):
    trainer = _trainer()
    a = Server("http://server-a:1", trainer.module.policy, trainer.tokenizer)
    b = Server("http://server-b:1", trainer.module.policy, trainer.tokenizer)
    policy = attach_server(trainer, [a, b], tmp_path)
    sampling = SamplingParams(max_tokens=2)
    try:
        assert [len(s.paths) for s in (a, b)] == [1, 1]  # attach pushed to each
        a.fail = InfraError("POST http://server-a:1/generate failed: ConnectError")
        b.fail = InfraError("POST http://server-b:1/generate failed: ConnectError")
        with pytest.raises(EpisodeLost, match="server-a:1"):  # b still counts as up
            run_sync(policy.generate([1, 2, 3], sampling))
        with pytest.raises(InferenceServerError) as caught:
            run_sync(policy.generate([1, 2, 3], sampling))
        message = str(caught.value)
        assert "http://server-a:1" in message
        assert "http://server-b:1" in message
        assert "rerun with --resume" in message
    finally:
        run_sync(policy.close())


def test_the_router_pins_episodes_and_prefers_the_least_loaded():
    router = Router(["a", "b"])
    first, second, third = EpisodeRoute(), EpisodeRoute(), EpisodeRoute()
    assert [router.pick(first), router.pick(second), router.pick(first)] == [0, 1, 0]
    first.end()
    assert router.episodes == [0, 1]
    assert router.pick(third) == 0  # the least loaded
    router.down(0)
    assert router.pick(third) == 1  # moved off a server that is down, counted there
    assert router.episodes == [0, 2]
    assert router.pick(None) == 1  # a call of no episode: routed, counted nowhere
    router.down(1)
    assert router.pick(EpisodeRoute()) is None


def test_a_restarted_server_gets_no_episode_until_it_holds_the_current_weights(tmp_path):
    trainer = _trainer()
    a = Server("http://server-a:1", trainer.module.policy, trainer.tokenizer)
    b = Server("http://server-b:1", trainer.module.policy, trainer.tokenizer)
    policy = attach_server(trainer, [a, b], tmp_path)
    policy.probe_s = 0.05
    sampling = SamplingParams(max_tokens=2)
    try:
        b.inner.model.load_state_dict(models.load(seed=1)[0].state_dict())  # its start weights
        b.fail = InfraError("starting")  # answers no /health yet
        policy.server_restarted("http://server-b:1/")  # ServerFleet's callback, from its thread
        time.sleep(0.2)
        for _ in range(3):  # new episodes while b is down: all on a
            with episode_route(EpisodeRoute()):
                run_sync(policy.generate([1, 2, 3], sampling))
        assert policy.router.assigned == [3, 0]
        b.fail = None  # up: the probe loads the current weights, then routes to it
        deadline = time.monotonic() + 30
        while not policy.router.up[1] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [Path(p).name for p in b.paths] == ["step-00000000"] * 2
        served = b.inner.model.state_dict()
        for name, tensor in trainer.policy_state_dict().items():
            torch.testing.assert_close(served[name], tensor, rtol=0, atol=0, msg=name)
        with episode_route(EpisodeRoute()):
            completion = run_sync(policy.generate([1, 2, 3], sampling))
        assert policy.router.assigned == [3, 1]  # the least loaded now
        assert completion.weight_version == 0
    finally:
        run_sync(policy.close())


def test_a_server_that_answers_with_an_error_status_is_not_taken_for_gone(tmp_path):
    from agentgym.inference._http import HTTPStatusError

    trainer = _trainer()
    a = Server("http://server-a:1", trainer.module.policy, trainer.tokenizer)
    b = Server("http://server-b:1", trainer.module.policy, trainer.tokenizer)
    policy = attach_server(trainer, [a, b], tmp_path)
    try:
        a.fail = HTTPStatusError("POST", "http://server-a:1/generate", 400, "prompt too long")
        with pytest.raises(InferenceServerError, match=r"server-a:1 failed while generating.*400"):
            run_sync(policy.generate([1, 2, 3], SamplingParams(max_tokens=2)))
        assert policy.router.up == [True, True]  # it answered: a refusal, not a server gone
        assert policy.lost == 0
    finally:
        run_sync(policy.close())
