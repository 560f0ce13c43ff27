"""MCP servers shipped with agentgym.

Each runs as ``python -m agentgym.envs.mcp.servers.<name>`` (stdio) or with ``--http PORT``.
"""
