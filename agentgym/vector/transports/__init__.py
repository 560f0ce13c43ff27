"""The transports of ``agentgym.vector.proxy.ProxyEnv``: where an env runs and how it is reached.

- ``inprocess.InProcessTransport``: the env itself, in this process (the fake for tests);
- ``pipe.PipeTransport``: a worker process, over a multiprocessing pipe (``ProcessEnv``);
- ``ray.RayTransport``: a Ray actor of a ``RayPool`` (``RayEnv``; imports ``ray``);
- ``openenv.OpenEnvTransport``: an OpenEnv server such as ``agentgym serve-env``, over WebSocket
  (``agentgym/Remote-v0``).

Each module is imported on its own, so that ``import agentgym`` never imports Ray or websockets.
"""
