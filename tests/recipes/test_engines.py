"""No error message echoes a key pasted where ``--api-key-env`` wants a variable's name (the
key was printed back)."""

from __future__ import annotations

import pytest

from agentgym.cli import main

SERVER = ["--engine", "openai", "--engine-url", "http://127.0.0.1:1", "--model", "m"]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("sk-proj-Sentinel-5f1a9c", "looks like a key itself (not shown)"),  # not a name
        ("sk_live_Sentinel5f1a9c", "looks like a key itself (not shown)"),  # a name's shape
        ("abcSentinel5f1a9cXYZ", "names an environment variable that is not set"),
    ],
)
def test_a_pasted_key_is_refused_and_never_printed(given, says, capsys, monkeypatch):
    monkeypatch.delenv(given, raising=False)
    assert main(["eval", *SERVER, "--api-key-env", given, "--episodes", "1"]) == 2
    printed = capsys.readouterr()
    assert says in printed.err
    assert "--api-key-env=<not shown>" in printed.err
    assert given not in printed.out + printed.err
    assert "Sentinel" not in printed.out + printed.err


def test_an_unset_variable_is_named(capsys, monkeypatch):
    monkeypatch.delenv("AGENTGYM_UNSET_KEY_VARIABLE", raising=False)
    flags = ["--api-key-env", "AGENTGYM_UNSET_KEY_VARIABLE", "--episodes", "1"]
    assert main(["eval", *SERVER, *flags]) == 2
    err = capsys.readouterr().err
    assert "--api-key-env='AGENTGYM_UNSET_KEY_VARIABLE': names an environment variable" in err
    assert "export AGENTGYM_UNSET_KEY_VARIABLE=..." in err
