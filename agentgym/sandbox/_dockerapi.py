"""The few Docker Engine API calls a run makes, spoken with asyncio over the daemon's socket.

Container lifecycle goes through the docker SDK (in threads). Runs are hot: creating an exec,
streaming its output and reading its exit code here costs no thread and no extra copy, and the
output is capped while it streams (the SDK would buffer it all, or hand back a socket whose
first bytes may sit in its HTTP reader).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any
from urllib.parse import quote, urlparse

from agentgym.core.errors import SandboxError, SandboxUnavailable
from agentgym.sandbox._output import CappedBuffer

__all__ = ["DockerAPI", "ExecStream", "socket_path"]

_STDOUT, _STDERR = 1, 2


def socket_path() -> str:
    """The local daemon's unix socket from ``DOCKER_HOST`` (default /var/run/docker.sock)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    url = urlparse(host)
    if url.scheme != "unix":
        raise SandboxUnavailable(
            f"DOCKER_HOST={host}: the docker sandbox needs a daemon on this machine's unix "
            "socket (it bind-mounts host folders). Fix: unset DOCKER_HOST or point it at unix://"
        )
    return url.path


class DockerAPI:
    """One request per connection: the daemon is local, connecting costs microseconds."""

    def __init__(self, path: str, version: str) -> None:
        self.path, self.prefix = path, f"/v{version}"

    async def _open(self, method: str, url: str, body: Any, headers: dict[str, str]) -> Any:
        try:
            reader, writer = await asyncio.open_unix_connection(self.path)
        except OSError as e:
            raise SandboxError(f"the Docker daemon at {self.path} does not answer: {e}") from e
        data = b"" if body is None else json.dumps(body).encode()
        head = [
            f"{method} {self.prefix}{url} HTTP/1.1",
            "Host: docker",
            f"Content-Length: {len(data)}",
            "Content-Type: application/json",
        ]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as e:
            writer.close()
            raise SandboxError(f"the Docker daemon dropped {method} {url}: {e}") from e
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        pairs = (line.partition(":") for line in lines[1:])
        fields = {k.strip().lower(): v.strip() for k, _, v in pairs}
        return status, fields, reader, writer

    async def request(self, method: str, url: str, body: Any = None) -> Any:
        """Send a request and return its decoded JSON body (None when empty)."""
        status, fields, reader, writer = await self._open(method, url, body, {})
        try:
            if fields.get("transfer-encoding") == "chunked":
                payload = await _read_chunked(reader)
            else:
                payload = await reader.readexactly(int(fields.get("content-length", 0)))
        finally:
            writer.close()
        text = payload.decode(errors="replace")
        try:
            result = json.loads(text) if text.strip() else None
        except ValueError:
            result = None
        if status >= 400:
            message = result.get("message") if isinstance(result, dict) else text[:200]
            raise SandboxError(f"Docker {method} {url} failed ({status}): {message}")
        return result

    async def exec_create(
        self,
        container: str,
        argv: list[str],
        *,
        user: str,
        workdir: str,
        env: dict[str, str],
        stdin: bool,
    ) -> str:
        body = {
            "Cmd": argv,
            "User": user,
            "WorkingDir": workdir,
            "AttachStdin": stdin,
            "AttachStdout": True,
            "AttachStderr": True,
            "Tty": False,
            "Env": [f"{k}={v}" for k, v in env.items()],
        }
        result = await self.request("POST", f"/containers/{quote(container)}/exec", body)
        return str(result["Id"])

    async def exec_start_detached(self, exec_id: str) -> None:
        await self.request("POST", f"/exec/{exec_id}/start", {"Detach": True, "Tty": False})

    async def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", f"/exec/{exec_id}/json")
        return result

    async def exec_stream(
        self, exec_id: str, stdin: bytes | None, out: CappedBuffer, err: CappedBuffer
    ) -> ExecStream:
        """Start an exec attached; the returned stream feeds ``out``/``err`` until it ends."""
        status, _, reader, writer = await self._open(
            "POST",
            f"/exec/{exec_id}/start",
            {"Detach": False, "Tty": False},
            {"Connection": "Upgrade", "Upgrade": "tcp"},
        )
        if status not in (101, 200):
            writer.close()
            raise SandboxError(f"Docker could not start exec {exec_id[:12]} ({status})")
        return ExecStream(reader, writer, out, err, stdin)


class ExecStream:
    """An attached exec: stdin to send, then multiplexed output (8-byte frame headers)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        out: CappedBuffer,
        err: CappedBuffer,
        stdin: bytes | None,
    ) -> None:
        self.reader, self.writer, self.out, self.err = reader, writer, out, err
        self.stdin = stdin

    async def _feed(self, data: bytes) -> None:
        # A command that never reads stdin must not stall the run: this runs beside pump().
        with contextlib.suppress(OSError):
            self.writer.write(data)
            await self.writer.drain()
            self.writer.write_eof()

    async def pump(self) -> None:
        """Send stdin and read frames until the exec's output ends (its processes are gone)."""
        feeder = None
        if self.stdin is not None:
            feeder = asyncio.ensure_future(self._feed(self.stdin))
            self.stdin = None
        try:
            await self._frames()
        finally:
            if feeder is not None:
                feeder.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await feeder

    async def _frames(self) -> None:
        reader = self.reader
        while True:
            try:
                header = await reader.readexactly(8)
            except (asyncio.IncompleteReadError, OSError):
                return
            sink = self.err if header[0] == _STDERR else self.out
            remaining = int.from_bytes(header[4:8], "big")
            while remaining:
                chunk = await reader.read(min(remaining, 1 << 16))
                if not chunk:
                    return
                sink.feed(chunk)
                remaining -= len(chunk)

    def close(self) -> None:
        self.writer.close()


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readline()).strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
