"""The agentgym error hierarchy.

A programmer's mistake is an exception from this tree; a model's mistake is never an exception
(it becomes an observation and a reward).

::

    gymnasium.error.Error
    └── Error                       root of everything agentgym raises
        ├── ConfigError             a bad argument or config value (also a ValueError)
        │   ├── ConfigTypeError     a value of the wrong type (also a TypeError)
        │   └── SpaceMismatchError  sub-envs of one vector env with different spaces (also a
        │                           RuntimeError)
        ├── RegistryError           registering or looking up env ids
        │   └── UnknownEnvError     an id that is not registered ("Did you mean ...?"; also
        │                           gymnasium.error.UnregisteredEnv and KeyError)
        ├── ToolDefinitionError     a tool whose signature or docstring cannot become a schema
        ├── UnknownParserError      a tool-call parser name that does not exist
        ├── EnvCheckError           ``agentgym.utils.check_env`` found contract violations
        ├── EnvStateError           an env used out of order (step before reset, after close)
        ├── EnvDefinitionError      an env class that implements neither style (also a TypeError)
        ├── DynamicSamplingExhausted  DAPO dynamic sampling hit its cap on sampling rounds
        ├── NoTrainableEpisodes     training steps in a row dropped every episode (also a
        │                           RuntimeError); the message counts the causes
        ├── SandboxFileError        a sandbox file op failed (missing, outside the work dir)
        └── InfraError              something outside the process failed (sandbox, server)
            ├── DeadlineExceeded    an await ran past its deadline
            └── SandboxError        a sandbox backend failed (daemon gone, container died)
                └── SandboxUnavailable  a backend cannot run here (no daemon, no image, no SDK)

Warnings: ``AgentGymWarning`` and its children ``PluginWarning``, ``SandboxIsolationWarning``,
``NoLearningSignalWarning`` and ``AgentGymDeprecationWarning`` (also a ``DeprecationWarning``).
"""

from __future__ import annotations

from collections.abc import Iterable

import gymnasium

from agentgym.core.suggest import suggestion

__all__ = [
    "AgentGymDeprecationWarning",
    "AgentGymWarning",
    "ConfigError",
    "ConfigTypeError",
    "DeadlineExceeded",
    "DynamicSamplingExhausted",
    "EnvCheckError",
    "EnvDefinitionError",
    "EnvStateError",
    "Error",
    "InfraError",
    "NoLearningSignalWarning",
    "NoTrainableEpisodes",
    "PluginWarning",
    "RegistryError",
    "SandboxError",
    "SandboxFileError",
    "SandboxIsolationWarning",
    "SandboxUnavailable",
    "SpaceMismatchError",
    "ToolDefinitionError",
    "UnknownEnvError",
    "UnknownParserError",
]


class Error(gymnasium.error.Error):
    """Root of every exception agentgym raises."""


class ConfigError(Error, ValueError):
    """A constructor argument or config value breaks a rule; the message names the fix."""

    def __init__(self, name: str, value: object, rule: str, fix: str) -> None:
        self.name, self.value, self.rule, self.fix = name, value, rule, fix
        super().__init__(f"{name}={value!r}: {rule}. Fix: {fix}")


class ConfigTypeError(ConfigError, TypeError):
    """A value of the wrong type, where Gymnasium raises ``TypeError`` (e.g. a list as
    ``reset_mask``)."""


class SpaceMismatchError(ConfigError, RuntimeError):
    """Sub-envs of one vector env whose spaces differ, where Gymnasium raises ``RuntimeError``."""


class RegistryError(Error):
    """Registering an env or resolving an env id failed."""


class UnknownEnvError(RegistryError, gymnasium.error.UnregisteredEnv, KeyError):
    """An env id that is not registered (also Gymnasium's ``UnregisteredEnv``)."""

    def __init__(self, env_id: str, suggestions: Iterable[str] = (), hint: str = "") -> None:
        self.env_id = env_id
        self.suggestions = tuple(suggestions)
        close = f" {suggestion(self.suggestions)}" if self.suggestions else ""
        more = f" {hint}" if hint else ""
        message = f"No env registered with id {env_id!r}.{close} `agentgym list` shows all.{more}"
        super().__init__(message)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ToolDefinitionError(Error):
    """A function cannot be turned into a tool (missing type hint or docstring)."""


class UnknownParserError(Error, KeyError):
    """A tool-call parser name that is not registered."""

    def __str__(self) -> str:
        return str(self.args[0])


class EnvCheckError(Error, AssertionError):
    """``agentgym.utils.check_env`` found one or more contract violations."""

    def __init__(self, env_name: str, failures: list[str]) -> None:
        self.failures = failures
        lines = "\n".join(f"  - {f}" for f in failures)
        super().__init__(f"{env_name} fails {len(failures)} agentgym env check(s):\n{lines}")


class EnvStateError(Error, RuntimeError):
    """An env was used out of order, e.g. stepped before reset or after close."""


class EnvDefinitionError(Error, TypeError):
    """An ``AgentEnv`` subclass breaks the class contract (e.g. implements no step method)."""


class DynamicSamplingExhausted(Error, RuntimeError):
    """DAPO dynamic sampling could not fill a batch with informative groups within its cap."""

    def __init__(self, kept: int, target: int, rounds: int, seen: int) -> None:
        self.kept, self.target, self.rounds, self.seen = kept, target, rounds, seen
        super().__init__(
            f"dynamic sampling kept {kept} of the {target} groups a batch needs after {rounds} "
            f"sampling round(s) ({seen} groups seen; the rest had rewards that were all equal). "
            "Fix: raise max_sampling_rounds, raise group_size, set partial_batches=True to "
            "train on the groups kept, or pick tasks of a difficulty where the policy sometimes "
            "succeeds and sometimes fails"
        )


class NoTrainableEpisodes(Error, RuntimeError):
    """Training steps in a row had no episode to train on: every one was dropped (an
    infrastructure failure, an exception in the env's code, ...). ``causes`` counts the dropped
    episodes by cause; the message names them and the fix."""

    def __init__(self, message: str, *, steps: int, causes: dict[str, int]) -> None:
        self.steps, self.causes = steps, causes
        super().__init__(message)


class InfraError(Error):
    """Something outside the process failed; trainers drop such samples (``infra_error``)."""


class DeadlineExceeded(InfraError, TimeoutError):
    """An await on something outside the process ran past its deadline."""

    def __init__(self, what: str, seconds: float) -> None:
        self.what, self.seconds = what, seconds
        super().__init__(f"{what} did not finish within its {seconds:g} s deadline")


class AgentGymWarning(UserWarning):
    """Base of agentgym's warnings."""


class AgentGymDeprecationWarning(AgentGymWarning, DeprecationWarning):
    """An old spelling that still works (a renamed argument or flag); the message names the new
    one. Raised by ``agentgym.core.deprecation.warn_deprecated``."""


class NoLearningSignalWarning(AgentGymWarning):
    """A training step had nothing to learn from: every group's rewards were equal."""


class PluginWarning(AgentGymWarning):
    """An installed ``agentgym.envs`` plugin failed to load; its envs are unavailable."""


class SandboxIsolationWarning(AgentGymWarning):
    """A sandbox runs code without isolation (no bubblewrap): it can read the host's files."""


class SandboxFileError(Error, OSError):
    """A sandbox file operation failed: the path is missing, a directory, or outside the work dir.

    Carries ``errno``, ``strerror`` and ``filename`` like any ``OSError``. A model that asks for a
    missing file is data to the env, which catches this and reports it as an observation.
    """


class SandboxError(InfraError):
    """A sandbox backend failed (the Docker daemon went away, a container died, bwrap broke)."""


class SandboxUnavailable(SandboxError):
    """A sandbox backend cannot run on this machine; the message names what is missing."""
