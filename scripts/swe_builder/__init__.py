"""Build the SWE-v0 task set from the project sources in scripts/swe_tasks/.

``spec`` reads a project (its newest tree plus its history as edits) and replays the history
backwards into one file snapshot per commit; ``gitrepo`` commits the snapshots into a git
repository with fixed authors and dates; ``verify`` runs each task's tests before and after the
gold patch; ``tasks`` turns the fix commits into SWE-bench-style instances. The command line is
scripts/build_swe_tasks.py.
"""
