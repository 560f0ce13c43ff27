"""Utilities for env authors: ``check_env`` checks an env against agentgym's env contract."""

from agentgym.utils.env_checker import MAX_ECHO_CHARS, CheckReport, check_env

__all__ = ["MAX_ECHO_CHARS", "CheckReport", "check_env"]
