"""The viewer's HTTP app: JSON APIs over :class:`~agentgym.view.data.RunData` and the static page
(``docs/view.md``). Read-only: no route writes anything.

Routes: ``GET /`` (the page), ``/static/*``, ``/api/run``, ``/api/updates`` (files by mtime, what
a page following a live run polls), ``/api/episodes`` (a page of a search), ``/api/episode``,
``/api/update``, ``/api/task``, ``/api/look``; each takes ``run=1`` for the second run given.
A trace that cannot be read answers 422 with the file and what is wrong (an HTML page at ``/``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentgym.view.data import Filters, RunData, TraceFileError

__all__ = ["make_app"]

STATIC = Path(__file__).parent / "static"
PAGE_LIMIT = 500


class _BadQuery(Exception):
    pass


def _clean(value: Any) -> Any:
    """``value`` with NaN and infinities as null (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _number(request: Request, name: str, kind: type, default: Any = None) -> Any:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError as e:
        raise _BadQuery(
            f"{name}={raw!r} is not a{'n integer' if kind is int else ' number'}"
        ) from e


def _filters(request: Request) -> Filters:
    q = request.query_params
    success = {"true": True, "false": False}.get(q.get("success", ""))
    return Filters(
        outcome=q.get("outcome") or None,
        success=success,
        reward_min=_number(request, "reward_min", float),
        reward_max=_number(request, "reward_max", float),
        task_id=q.get("task_id") or None,
        text=q.get("text") or None,
        update_min=_number(request, "update_min", int),
        update_max=_number(request, "update_max", int),
    )


def error_page(error: TraceFileError | str) -> str:
    """The HTML page shown for a trace that cannot be read."""
    text = html.escape(str(error))
    file = html.escape(error.path) if isinstance(error, TraceFileError) else ""
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>agentgym view: error</title>"
        "<link rel='stylesheet' href='/static/style.css'></head><body><main class='error'>"
        f"<h1>This trace cannot be shown</h1><p id='error-file'><code>{file}</code></p>"
        f"<p id='error-message'>{text}</p></main></body></html>"
    )


class _Routes:
    def __init__(self, runs: Sequence[RunData]) -> None:
        self.runs = list(runs)

    def _run(self, request: Request) -> RunData:
        which = _number(request, "run", int, 0)
        if not 0 <= which < len(self.runs):
            raise _BadQuery(f"run={which} is not one of the {len(self.runs)} runs given")
        return self.runs[which]

    async def index(self, request: Request) -> Response:
        try:
            for run in self.runs:
                run.table()  # every file checked before the page is shown
        except TraceFileError as e:
            return HTMLResponse(error_page(e), status_code=422)
        return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))

    async def run(self, request: Request) -> Any:
        data = self._run(request)
        info = data.run_info()
        info["runs"] = [str(r.given) for r in self.runs]
        info["episodes"] = data.table().num_rows
        return info

    async def updates(self, request: Request) -> Any:
        data = self._run(request)
        return {"updates": data.updates(), "metrics": data.run_info()["metrics"]}

    async def episodes(self, request: Request) -> Any:
        offset = _number(request, "offset", int, 0)
        limit = min(_number(request, "limit", int, 50), PAGE_LIMIT)
        return self._run(request).search(_filters(request), offset, limit)

    async def episode(self, request: Request) -> Any:
        update, index = _number(request, "update", int), _number(request, "index", int)
        if update is None or index is None:
            raise _BadQuery("give update= and index=")
        return self._run(request).episode(update, index)

    async def update(self, request: Request) -> Any:
        update = _number(request, "update", int)
        if update is None:
            raise _BadQuery("give update=")
        return {"update": update, "episodes": self._run(request).group(update)}

    async def task(self, request: Request) -> Any:
        task_id = request.query_params.get("task_id")
        if not task_id:
            raise _BadQuery("give task_id=")
        return {"task_id": task_id, "episodes": self._run(request).task(task_id)}

    async def look(self, request: Request) -> Any:
        return self._run(request).look()


def _json(handler: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Response]]:
    async def wrapped(request: Request) -> Response:
        try:
            return JSONResponse(_clean(await handler(request)))
        except _BadQuery as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        except TraceFileError as e:
            return JSONResponse({"error": str(e), "file": e.path}, status_code=422)

    return wrapped


def make_app(runs: Sequence[RunData]) -> Starlette:
    """The viewer over ``runs`` (the first is the one shown; a second is compared with it)."""
    routes = _Routes(runs)
    api = ["run", "updates", "episodes", "episode", "update", "task", "look"]
    return Starlette(
        routes=[
            Route("/", routes.index, methods=["GET"]),
            *(Route(f"/api/{name}", _json(getattr(routes, name)), methods=["GET"]) for name in api),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
    )
