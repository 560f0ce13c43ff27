"""Helpers of the web tests: the local test site (a real HTTP server), its tasks, and process
checks (Linux ``/proc``)."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from pathlib import Path
from typing import Any

SITE = Path(__file__).parent / "site"

TASKS: list[dict[str, Any]] = [
    {
        "task_id": "form",
        "instruction": "Send the form with the name Ada and size M.",
        "start_path": "/form.html",
        "checks": [{"url": "/done.html.*"}, {"text": "Hello, Ada (M)"}],
    },
    {
        "task_id": "press",
        "instruction": "Press the button twice.",
        "checks": [{"js": "() => document.getElementById('out').textContent === 'clicked 2'"}],
    },
    {
        "task_id": "answer",
        "instruction": "What is six times seven? Answer with stop.",
        "checks": [{"answer": "42"}, {"http": "/grade"}],
    },
]


def long_page(paragraphs: int = 400) -> str:
    rows = "\n".join(
        f'<p>Paragraph {i} with filler text to make the page long.</p><a href="/#{i}">link {i}</a>'
        for i in range(paragraphs)
    )
    return f"<!doctype html><html><head><title>Long</title></head><body>{rows}</body></html>"


class Handler(http.server.SimpleHTTPRequestHandler):
    """The test site: static pages from ``site/``, a generated long page, a grading callback;
    every path it served is recorded in ``server.hits``."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        if self.path.startswith("/long.html"):
            self._send(long_page().encode(), "text/html")
            return
        super().do_GET()

    def do_POST(self) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ok = (body.get("answer") or "").strip() == "42"
        self._send(json.dumps({"reward": 1.0 if ok else 0.0, "success": ok}).encode(), "text/json")

    def _send(self, data: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve() -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(SITE))
    )
    server.hits = []  # type: ignore[attr-defined]
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def live_processes(pgid: int) -> list[int]:
    """Pids of process group ``pgid`` that still run (zombies excluded; Linux ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def browser_group(env: Any) -> int:
    """The process group of the browser running ``env``'s episode."""
    episode = env.unwrapped._episode
    pgid = episode.lease.launched.pgid
    assert pgid is not None
    return int(pgid)
