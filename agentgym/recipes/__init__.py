"""The application behind ``agentgym train`` and ``agentgym eval``: run folders, evaluation
reports, progress, and per-env training recipes.

The training library (``agentgym.trainers``) takes episodes and updates a policy; this package
decides what a run is: which env and model, the recipe's tuned numbers under the user's run file
and flags, where the run folder is, what is evaluated before and after, and what is printed.
"""
