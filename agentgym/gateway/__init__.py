"""The gateway: an OpenAI-compatible endpoint that turns an agent program's model calls into
token-exact episodes (``Gateway``; the context rule in ``agentgym.gateway.session``)."""

from agentgym.gateway.app import SESSION_HEADER, Gateway, GatewayError, gateway_routes
from agentgym.gateway.session import Call, Session

__all__ = ["SESSION_HEADER", "Call", "Gateway", "GatewayError", "Session", "gateway_routes"]
