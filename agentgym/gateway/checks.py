"""What the gateway checks of a request before rendering it: messages and tool schemas.

Each problem is a 400 in OpenAI's error shape naming the bad entry and the fix.
"""

from __future__ import annotations

import json
from typing import Any

from agentgym.gateway.errors import GatewayError
from agentgym.inference.openai_routes import BadRequest

__all__ = ["check_messages", "check_tools"]


def check_messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of message objects")
    for k, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{k}] must be an object with a string `role`")
        content = message.get("content")
        if isinstance(content, list):  # text parts, as the SDK may send them
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise BadRequest(f"messages[{k}].content: only text parts are supported")
            message = {**message, "content": "".join(str(p.get("text", "")) for p in content)}
            messages[k] = message
        elif content is not None and not isinstance(content, str):
            raise BadRequest(
                f"messages[{k}].content must be a string, a list of text parts or null"
            )
    return messages


def check_tools(tools: Any) -> list[dict[str, Any]] | None:
    """``tools`` when each is ``{"type": "function", "function": {"name": str, ...}}``; a 400
    naming the first bad one otherwise."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise GatewayError("tools must be a list of tool schemas", 400, "invalid_tools", "tools")
    for k, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        problem = None
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            problem = 'must be an object with "type": "function"'
        elif not isinstance(function, dict) or not isinstance(function.get("name"), str):
            problem = 'must have a "function" object with a string "name"'
        elif not function["name"].strip():
            problem = 'has an empty "function.name"'
        elif not isinstance(function.get("parameters", {}), dict):
            problem = '"function.parameters" must be a JSON Schema object'
        if problem:
            raise GatewayError(
                f"tools[{k}] {problem}, got {json.dumps(tool, default=str)[:200]}. Fix: send "
                'tools as [{"type": "function", "function": {"name": ..., "parameters": {...}}}]',
                400,
                "invalid_tools",
                f"tools[{k}]",
            )
    return tools or None
