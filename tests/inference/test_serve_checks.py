"""``agentgym serve`` refuses a bad ``--model`` or ``--port`` with one line naming
the value and the fix, exit 2, before any model loads (they were tracebacks)."""

from __future__ import annotations

import socket

import pytest

from agentgym.cli import main


@pytest.fixture(autouse=True)
def no_loading(monkeypatch):
    """A check that lets the command through would load the model and serve forever."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr("agentgym.models.load", refuse)


def _serve(capsys, *flags: str) -> str:
    assert main(["serve", *flags]) == 2
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err
    assert printed.err.startswith("agentgym serve: error: ")
    return printed.err


def test_a_missing_model_directory(capsys):
    err = _serve(capsys, "--model", "/nope")
    assert "--model='/nope': is not a local directory" in err
    assert "Fix:" in err


def test_a_run_folder_names_its_newest_checkpoint(tmp_path, capsys):
    for step in ("step-00000001", "step-00000002"):
        (tmp_path / "checkpoints" / step).mkdir(parents=True)
    err = _serve(capsys, "--model", str(tmp_path))
    assert "is a run folder, not a model" in err
    assert f"--model {tmp_path / 'checkpoints' / 'step-00000002'}" in err


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range(port, capsys):
    err = _serve(capsys, "--port", port)
    assert f"--port={port}: is not a TCP port (0 to 65535)" in err


def test_a_port_in_use(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = _serve(capsys, "--port", str(port))
    assert f"127.0.0.1:{port}" in err
    assert "cannot be listened on" in err
