"""``python -m agentgym``: the ``agentgym`` command."""

from agentgym.cli import main

raise SystemExit(main())
