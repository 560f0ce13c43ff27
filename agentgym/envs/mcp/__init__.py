"""``agentgym/MCP-v0``: train agents on any MCP server's tools.

The env (``MCPEnv``), server configs (``agentgym.envs.mcp.config``), sessions and their pool
(``session``, ``pool``), tasks and verifiers (``tasks``), and the shipped store server with its
seeded tasks (``servers.store``, ``store_tasks``).
"""

from agentgym.envs.mcp.config import ServerConfig, parse_servers
from agentgym.envs.mcp.env import MCPEnv
from agentgym.envs.mcp.tasks import Check, MCPTask, load_tasks

__all__ = ["Check", "MCPEnv", "MCPTask", "ServerConfig", "load_tasks", "parse_servers"]
