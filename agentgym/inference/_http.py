"""The HTTP seam shared by the server-backed engines: one ``httpx.AsyncClient``, errors mapped
into agentgym's hierarchy (a server failure is an ``InfraError``, a timeout ``DeadlineExceeded``).

Tests swap the transport for ``httpx.MockTransport`` (an in-process fake server).
"""

from __future__ import annotations

from typing import Any

import httpx

from agentgym.core.errors import DeadlineExceeded, InfraError

__all__ = ["HTTPStatusError", "JSONClient"]


class HTTPStatusError(InfraError):
    """The server answered with an error status."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        self.status = status
        self.body = body
        super().__init__(f"{method} {url} answered HTTP {status}: {body[:500]}")


class JSONClient:
    """POST/GET JSON to one base URL with a timeout; raises ``InfraError`` subclasses."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 512,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            transport=transport,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=64),
        )

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = f"{self.base_url}{path}"
        try:
            response = await self._client.request(method, path, json=body)
        except httpx.TimeoutException as e:
            raise DeadlineExceeded(f"{method} {url}", self.timeout) from e
        except httpx.HTTPError as e:
            raise InfraError(f"{method} {url} failed: {type(e).__name__}: {e}") from e
        if response.status_code >= 400:
            raise HTTPStatusError(method, url, response.status_code, response.text)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            return response.text

    async def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return await self.request("POST", path, body)

    async def get(self, path: str) -> Any:
        return await self.request("GET", path)

    async def aclose(self) -> None:
        await self._client.aclose()
