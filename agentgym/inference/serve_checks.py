"""The checks ``agentgym serve`` makes before it loads a model: the model directory, and that
the address can be listened on, each refused with a ``ConfigError`` naming the value and the fix
(a bad ``--model`` or ``--port`` was a traceback after the model had loaded)."""

from __future__ import annotations

import socket
from pathlib import Path

from agentgym.core.errors import ConfigError

__all__ = ["check_serve_args"]


def check_serve_args(model: str | None, host: str, port: int) -> None:
    """``ConfigError`` for a ``model`` that is no model directory or a ``port`` that cannot
    be listened on at ``host``, before the model loads."""
    if model is not None:
        _check_model_dir(model)
    if not 0 <= port <= 65535:
        raise ConfigError("--port", port, "is not a TCP port (0 to 65535)", "use e.g. --port 8000")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(infos[0][4])
    except OSError as e:
        raise ConfigError(
            "--host/--port",
            f"{host}:{port}",
            f"cannot be listened on ({e.strerror or e})",
            "pick a free port (e.g. --port 8001) or stop what listens there; --host must be "
            "an address of this machine (127.0.0.1, 0.0.0.0)",
        ) from None


def _check_model_dir(model: str) -> None:
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        return
    checkpoints = sorted((path / "checkpoints").glob("step-*")) if path.is_dir() else []
    if checkpoints:  # a run folder: its checkpoints hold the models
        rule, fix = (
            "is a run folder, not a model",
            f"serve one of its checkpoints: --model {checkpoints[-1]}",
        )
    elif path.is_dir():
        rule = "has no config.json, so it is not a transformers model"
        fix = "pass the folder that holds config.json and the weights (save_pretrained's)"
    else:
        rule = "is not a local directory (nothing is downloaded)"
        fix = "pass a model directory (config.json and weights), or no --model: the tiny policy"
    raise ConfigError("--model", model, rule, fix)
