"""``agentgym/Remote-v0``: envs served by another process or machine over OpenEnv's protocol.

The client env (``RemoteEnv``), the wire format both ends share (``protocol``) and a launcher of
``agentgym serve-env`` in a child process (``launch``). The server is
``agentgym.vector.serve_env``.
"""

from agentgym.envs.remote.env import RemoteEnv, RemoteEnvError
from agentgym.envs.remote.launch import LocalServer, server_status, start_server

__all__ = ["LocalServer", "RemoteEnv", "RemoteEnvError", "server_status", "start_server"]
