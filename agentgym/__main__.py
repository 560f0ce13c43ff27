"""``python -m agentgym``: the ``agentgym`` command."""

from agentgym.cli import main

# Guarded: a forkserver (ProcessEnv's workers) re-imports the main module as ``__mp_main__``.
if __name__ == "__main__":
    raise SystemExit(main())
