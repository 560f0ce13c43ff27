"""agentgym inside other frameworks' trainers.

- :mod:`agentgym.integrations.trl`: TRL's ``GRPOTrainer`` plays agentgym episodes through its
  ``rollout_func`` (``pip install 'agentgymnasium[trl]'``).

Each integration imports its framework lazily: importing this package needs none of them.
"""
