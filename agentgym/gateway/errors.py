"""The gateway's one error: a request answered with an OpenAI-style error body."""

from __future__ import annotations

from agentgym.core.errors import Error

__all__ = ["GatewayError"]


class GatewayError(Error):
    """A request the gateway answers with an OpenAI-style error body (``status``, ``code``,
    ``param``); ``Gateway.session`` raises it for an unknown or closed session."""

    def __init__(self, message: str, status: int, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.param = status, code, param
