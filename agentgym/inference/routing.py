"""Which of several inference servers generates an episode's turns: ``Router``.

Each episode is pinned to one server for all its turns, so the server's prefix cache holds its
conversation; a new episode goes to the server with the fewest episodes in flight. A server
that stopped answering is marked down: it gets no new episode, and an episode pinned to it
moves to another server at its next turn (all servers hold the same weights: every push
reaches each of them). It is taken back (``back``) once it answers again and holds the current
weights; that is the caller's to decide (``agentgym.trainers.weight_sync.ServerPolicy``).

An episode is named by an ``EpisodeRoute`` that the collector sets (``episode_route``) around
each of its engine calls; a call made outside one is routed on its own, pinned to nothing.
``EpisodeRoute.end`` (the collector calls it when the episode ends) frees its place.

``EpisodeLost`` is what an engine raises for a call whose server stopped answering while
others still run: the episode ends as an infrastructure failure naming the server, and the run
goes on.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Sequence

from agentgym.core.errors import InfraError

__all__ = ["EpisodeLost", "EpisodeRoute", "Router", "current_route", "episode_route"]


class EpisodeLost(InfraError):
    """The server generating an episode's turn stopped answering (``url``); others still
    run. The collector ends the episode as an infrastructure failure with this as its cause."""

    def __init__(self, url: str, cause: BaseException) -> None:
        self.url = url
        super().__init__(
            f"the inference server at {url} stopped answering while generating this episode "
            f"({type(cause).__name__}: {cause}); the run goes on with the other servers"
        )


class EpisodeRoute:
    """One episode's place on a server: ``server`` is its index (None before its first
    turn, and after ``end``)."""

    __slots__ = ("_router", "server")

    def __init__(self) -> None:
        self.server: int | None = None
        self._router: Router | None = None

    def end(self) -> None:
        """The episode ended: its server has one episode fewer in flight."""
        if self._router is not None:
            self._router.release(self)


_ROUTE: contextvars.ContextVar[EpisodeRoute | None] = contextvars.ContextVar(
    "agentgym_episode_route", default=None
)


@contextlib.contextmanager
def episode_route(route: EpisodeRoute) -> Iterator[None]:
    """Engine calls made inside belong to the episode of ``route``."""
    token = _ROUTE.set(route)
    try:
        yield
    finally:
        _ROUTE.reset(token)


def current_route() -> EpisodeRoute | None:
    """The episode the engine call now being made belongs to, if the caller said."""
    return _ROUTE.get()


class Router:
    """Episodes over the servers ``urls``: see the module docstring. Thread-safe (the
    collector ends episodes from its own thread)."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self.up = [True] * len(self.urls)
        self.episodes = [0] * len(self.urls)
        """Episodes in flight per server."""
        self.assigned = [0] * len(self.urls)
        """Episodes ever pinned to each server."""
        self._lock = threading.Lock()

    def pick(self, route: EpisodeRoute | None) -> int | None:
        """The server for the next call of ``route``'s episode: the one it is pinned to while
        that one is up, else the up server with the fewest episodes in flight (pinned to it
        now); None when every server is down."""
        with self._lock:
            if route is not None and route.server is not None and self.up[route.server]:
                return route.server
            candidates = [i for i, up in enumerate(self.up) if up]
            if not candidates:
                return None
            index = min(candidates, key=lambda i: (self.episodes[i], self.assigned[i]))
            if route is not None:
                if route.server is not None:
                    self.episodes[route.server] -= 1
                route.server, route._router = index, self
                self.episodes[index] += 1
                self.assigned[index] += 1
            return index

    def release(self, route: EpisodeRoute) -> None:
        with self._lock:
            if route._router is self and route.server is not None:
                self.episodes[route.server] -= 1
            route.server, route._router = None, None

    def down(self, index: int) -> bool:
        """Mark server ``index`` down; returns whether it was up."""
        with self._lock:
            was, self.up[index] = self.up[index], False
            return was

    def back(self, index: int) -> None:
        """Server ``index`` answers and holds the current weights: route to it again."""
        with self._lock:
            self.up[index] = True

    @property
    def any_up(self) -> bool:
        return any(self.up)

    def down_urls(self) -> list[str]:
        return [url for url, up in zip(self.urls, self.up, strict=True) if not up]
