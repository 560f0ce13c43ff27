"""Generation over the servers of a ``ServerPolicy``: which server samples a turn, and what
happens when one stops answering.

Each completion runs on the policy's loop: it waits while a push holds new completions
(``_hold``/``_release``: no completion spans a push), goes to the server its episode is pinned
to (``agentgym.inference.routing.Router``), and carries the trainer's version of the weights
that sampled it. A server that does not answer is marked down: the episode of that call ends as
an infrastructure failure (``EpisodeLost``) while the others go on; it is probed every
``probe_s`` and taken back once it answers, after loading the current weights (by disk, from a
single process; else at the next push). With no server left the run stops
(``InferenceServerError`` naming each URL).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agentgym.core.errors import ConfigError, InfraError
from agentgym.inference.base import Completion, SamplingParams
from agentgym.inference.routing import EpisodeLost, EpisodeRoute, current_route
from agentgym.trainers.group_sync import WeightSyncMismatch
from agentgym.trainers.weight_sync.engines import RESUME_FIX, InferenceServerError, answered
from agentgym.trainers.weight_sync.servers import ServerSet

__all__ = ["RoutedServers"]


class RoutedServers(ServerSet):
    """``ServerSet`` with generation: completions routed over the servers that answer, servers
    marked down and taken back, and the hold a push puts on new completions."""

    async def generate(
        self, prompt_token_ids: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        route = current_route()  # read here: the context does not cross to the loop
        return await self._home(self._generate(route, prompt_token_ids, sampling))

    def server_restarted(self, url: str) -> None:
        """The server at ``url`` was restarted (``ServerFleet``, from its thread): it holds the
        weights it starts with, so it is routed to again only once it holds the current ones."""
        index = self.urls.index(url.rstrip("/"))
        if self._loop is None:
            self._mark_down(index, None)
        else:
            self._loop.call_soon_threadsafe(self._mark_down, index, None)

    @property
    def _can_take_back(self) -> bool:
        """Whether a server can be brought to the current weights between pushes: by disk
        (the folder is kept), from a single process (ranks take servers back at a push)."""
        return self.sync is None and self.trainer.backend.world_size == 1

    def _mark_down(self, index: int, error: BaseException | None) -> None:
        """Server ``index`` stopped answering, or restarted (on the loop, or before it runs)."""
        if error is not None:
            self._errors[index] = error
        self.router.down(index)
        sync = self.syncs[index]
        if sync is not None:
            sync.group = None  # its group broke with it: the next push has it join a new one
        if self._can_take_back and self._loop is not None and index not in self._probes:
            self._probes[index] = asyncio.ensure_future(self._probe(index))

    async def _probe(self, index: int) -> None:
        """Every ``probe_s``: take server ``index`` back once it answers."""
        try:
            while not self.router.up[index]:
                await asyncio.sleep(self.probe_s)
                try:
                    await self._take_back(index)
                except Exception as error:  # refused the weights: it stays down, said at the end
                    self._errors[index] = error
        finally:
            self._probes.pop(index, None)

    async def _take_back(self, index: int) -> bool:
        """If server ``index`` answers, load the current weights into it and route to it."""
        async with self._loading:
            if self.router.up[index]:
                return True
            if self._current is None or not await self._answers(index):
                return False
            version, path = self._current
            try:
                served = await self._load(index, version, path, {})
            except (ConfigError, WeightSyncMismatch):
                raise
            except Exception as error:
                self._errors[index] = error
                return False
            if isinstance(served, int):
                self._versions[index][served] = version
            self.router.back(index)
            return True

    async def _route(self, route: EpisodeRoute | None) -> int:
        index = self.router.pick(route)
        if index is None and self._can_take_back:
            for down in range(len(self.engines)):
                if await self._take_back(down):
                    break
            index = self.router.pick(route)
        if index is None:
            raise self._none_left()
        return index

    def _none_left(self) -> InferenceServerError:
        causes = "; ".join(
            f"{url}: {type(e).__name__}: {e}" if e is not None else f"{url}: restarted"
            for url, e in zip(self.urls, self._errors, strict=True)
        )
        if len(self.urls) == 1:
            return InferenceServerError(
                f"the inference server at {self.urls[0]} failed while generating ({causes}). "
                f"Fix: {RESUME_FIX}."
            )
        return InferenceServerError(
            f"every inference server of the run stopped answering ({causes}). Fix: restart "
            "them (or pass the --engine-url of each one that runs) and rerun with --resume "
            "(the last checkpoint is intact)."
        )

    async def _generate(
        self, route: EpisodeRoute | None, prompt: Sequence[int], sampling: SamplingParams
    ) -> Completion:
        while True:
            await self._open.wait()  # held while a push loads new weights
            index = await self._route(route)
            if self._open.is_set():  # no push began while a server was taken back
                break
        self._running += 1
        self._idle.clear()
        try:
            completion = await self.engines[index].generate(prompt, sampling)
        except InfraError as error:
            if answered(error):  # a refusal from a server that runs, not a server gone
                raise InferenceServerError(
                    f"the inference server at {self.urls[index]} failed while generating: "
                    f"{error}. Fix: {RESUME_FIX}."
                ) from error
            self.lost += 1  # no answer: refused, dropped, or past its deadline
            self._mark_down(index, error)
            if self.router.any_up:  # the others go on: this episode ends as an infra failure
                raise EpisodeLost(self.urls[index], error) from error
            raise self._none_left() from error
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()
        served = completion.weight_version
        versions = self._versions[index]
        completion.weight_version = None if served is None else versions.get(served)
        return completion

    async def _hold(self) -> None:
        """Hold new completions and wait for those under way (on the loop)."""
        self._open.clear()
        await self._idle.wait()

    async def _release(self) -> None:
        self._open.set()
