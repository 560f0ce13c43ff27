"""Serve the shop on a real HTTP server to look at: ``python -m agentgym.envs.web.shop``.

Everyone who connects shares one session (one cart, one order); restart to start over.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agentgym.envs.web.shop.app import ShopApp

__all__ = ["main", "make_server"]

_MAX_BODY = 64 * 1024


def make_server(host: str, port: int, app: ShopApp | None = None) -> ThreadingHTTPServer:
    """An HTTP server (not yet serving) that answers with ``app``, one session for all."""
    shop = app if app is not None else ShopApp()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            length = min(int(self.headers.get("content-length") or 0), _MAX_BODY)
            body = self.rfile.read(length) if method == "POST" else b""
            response = shop.handle_url("http", method, self.path, body)
            self.send_response(response.status)
            for key, value in response.headers.items():
                self.send_header(key, value)
            self.send_header("content-length", str(len(response.body)))
            self.end_headers()
            self.wfile.write(response.body)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

    return ThreadingHTTPServer((host, port), Handler)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m agentgym.envs.web.shop", description="Serve agentgym's shop over HTTP."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port)
    print(f"agentgym shop on http://{args.host}:{server.server_port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
