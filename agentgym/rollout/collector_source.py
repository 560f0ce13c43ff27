"""``CollectorSource``: the rollout collector as the ``EpisodeSource`` that ``fit`` trains from.

Group ``j`` of the run (counted from the first collect call) plays the task of reset seed
``seed + j`` and samples with seeds derived from ``(seed, j)``, so the position is one integer:
a checkpoint stores it and a resumed run collects exactly the episodes the killed one would
have. With ``world_size > 1`` each data-parallel rank plays only its share of a batch: of the
``G`` groups a collect call asks for, rank ``r`` plays the ``G / world_size`` groups from
``r * G / world_size`` on, with the reset and sampling seeds one process would give them
(``ShardedSource`` gathers the shares back into the batch). The tasks played are remembered
(``seen_tasks``) so that an evaluation can hold out tasks the policy never trained on.

A ``curriculum`` (``agentgym.rollout.curriculum``) gives each group reset options beside its
seed and hears how the group fared; the default, ``uniform``, gives none, so the seed alone picks
the task. ``records`` (and ``on_records``) describe each group played: its task, difficulty,
tries and successes; the curriculum's state and the records' count are in ``state_dict``.

Over several ranks every rank holds the same curriculum (same seed, same state) and draws the
tasks of the whole batch; each plays its own slice. With ``gather`` (the trainer backend's
``all_gather_object``) the groups' outcomes are all-gathered after each collect and every rank
applies all of them in group order, so the curricula stay equal and ``on_records`` gets every
group of the batch. ``gather`` is a collective: ``collect`` must then run in the main thread
of every rank, the same number of times (not under ``AsyncSource``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentgym.core.difficulty import DIFFICULTY
from agentgym.core.errors import ConfigError
from agentgym.core.info import TASK_ID
from agentgym.core.types import Episode
from agentgym.inference.base import InferenceEngine
from agentgym.rollout import Scaffold, collect
from agentgym.rollout.curriculum import Curriculum, Task, Uniform
from agentgym.rollout.source import SourceBase
from agentgym.vector import AgentVectorEnv

__all__ = ["CollectorSource", "episode_task", "shard_size"]


def episode_task(episode: Episode) -> str | None:
    """The task an episode played (``info["task_id"]`` on reset), when its env reports one."""
    value = episode.reset_info.get(TASK_ID)
    return None if value is None else str(value)


class CollectorSource(SourceBase):
    """Episodes of ``env`` sampled by ``engine``, ``group_size`` per task.

    Args:
        engine: the inference engine the trainer pushes its weights to.
        env: an env id (a vector env is made per collect call) or an ``AgentVectorEnv``.
        group_size: episodes per task (``config.group_size``).
        seed: base of the reset seeds and sampling seeds.
        env_kwargs: the env's constructor arguments (env ids only).
        max_turns: most turns per episode; None: the env's own limit.
        history_turns: the policy's history window; None: the whole conversation.
        scaffold: how observations become the prompt and completions the env's actions
            (``agentgym.rollout.scaffold``); None: ``ChatScaffold(history_turns)``.
        action_choices: constrained decoding among the env's ``info["action_choices"]``.
        rank, world_size: this process's data-parallel rank and the number of ranks: each
            collect plays the rank's share of the groups asked for (see the module docstring).
        curriculum: the task sampler; None: ``uniform`` (the seed alone picks the task).
        on_records: called with each collect call's records and the index of its first one
            (a run folder's ``tasks.jsonl`` writer).
        gather: with several ranks, an all-gather of Python objects over the ranks (e.g.
            ``backend.all_gather_object``): the curriculum hears, and ``on_records`` gets, the
            groups of every rank; None: this rank's groups only.
        sampling: ``SamplingParams`` fields (``temperature``, ``max_tokens``, ...).
    """

    def __init__(
        self,
        engine: InferenceEngine,
        env: str | AgentVectorEnv,
        *,
        group_size: int,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
        max_turns: int | None = None,
        history_turns: int | None = None,
        scaffold: Scaffold | None = None,
        action_choices: bool = False,
        rank: int = 0,
        world_size: int = 1,
        curriculum: Curriculum | None = None,
        on_records: Callable[[list[dict[str, Any]], int], None] | None = None,
        gather: Callable[[Any], list[Any]] | None = None,
        **sampling: Any,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ConfigError(
                "rank", rank, f"is not in [0, world_size={world_size})", "pass the process's rank"
            )
        if world_size > 1 and gather is None and not isinstance(curriculum, Uniform | None):
            raise ConfigError(
                "gather",
                None,
                f"is needed for the {type(curriculum).__name__} curriculum over {world_size} "
                "ranks: each rank would hear only its own groups and the curricula drift apart",
                "pass gather=trainer.backend.all_gather_object",
            )
        self.engine: InferenceEngine = engine
        self.env = env
        self.group_size, self.seed = group_size, seed
        self.env_kwargs = dict(env_kwargs or {})
        self.max_turns = max_turns
        self.history_turns = history_turns
        self.scaffold = scaffold
        self.action_choices = action_choices
        self.sampling = sampling
        self.rank, self.world_size = rank, world_size
        self.position = 0
        """Groups collected so far: the next group plays reset seed ``seed + position``."""
        self.seen_tasks: set[str] = set()
        self.curriculum: Curriculum = curriculum or Uniform([Task("all")], seed=seed)
        self.on_records = on_records
        self.gather = gather
        self.num_records = 0
        """Groups recorded so far (``records`` of every collect call)."""

    def collect(self, num_groups: int) -> list[Episode]:
        """This rank's share of ``num_groups`` groups (all of them with one rank)."""
        share = shard_size(num_groups, self.world_size)
        first = self.rank * share
        is_id = isinstance(self.env, str)
        tasks = self.curriculum.next_tasks(num_groups)[first : first + share]
        options = [t.options for t in tasks]
        episodes = collect(
            self.engine,
            self.env,
            share * self.group_size,
            self.seed + self.position + first,
            group_size=self.group_size,
            max_turns=self.max_turns,
            history_turns=self.history_turns,
            scaffold=self.scaffold,
            action_choices=self.action_choices,
            env_kwargs=self.env_kwargs if is_id else None,
            num_envs=share * self.group_size if is_id else None,
            sampling_seed=self.seed * 1_000_003 + self.position,
            first_group=first,
            task_options=None if not any(options) else options,
            **self.sampling,
        )
        self._record(tasks, episodes)
        self.position += num_groups
        self.seen_tasks.update(t for t in map(episode_task, episodes) if t is not None)
        return episodes

    def _record(self, tasks: list[Task], episodes: list[Episode]) -> None:
        """Tell the curriculum how each group fared (every rank's groups, with ``gather``), and
        record it."""
        played = []
        for j, task in enumerate(tasks):
            group = [e for e in episodes if e.group == j]
            outcomes = [e.success for e in group]
            info = group[0].reset_info if group else {}
            record = {
                "group": self.position + self.rank * len(tasks) + j,
                "task": info.get(TASK_ID),
                "difficulty": info.get(DIFFICULTY, task.difficulty),
                "curriculum_task": task.key,
                "tries": sum(o is not None for o in outcomes),
                "successes": sum(o is True for o in outcomes),
            }
            played.append((task, outcomes, record))
        if self.gather is not None and self.world_size > 1:  # ranks in order: group order
            played = [entry for share in self.gather(played) for entry in share]
        for task, outcomes, _ in played:
            self.curriculum.update(task, outcomes)
        records = [record for _, _, record in played]
        if self.on_records is not None:
            self.on_records(records, self.num_records)
        self.num_records += len(records)

    def state_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "position": self.position,
            "seen_tasks": sorted(self.seen_tasks),
            "curriculum": self.curriculum.state_dict(),
            "num_records": self.num_records,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if "ready" in state:  # batches an AsyncSource collected ahead (trainers.pipeline)
            raise ConfigError(
                "checkpoint",
                f"{sum(len(r) for r in state['ready'])} rank(s)' batches collected ahead",
                "was written with max_staleness >= 1; without it those batches would be lost "
                "and the run would not continue exactly",
                "resume with the run's max_staleness (--set max_staleness=k)",
            )
        self.seed, self.position = int(state["seed"]), int(state["position"])
        self.seen_tasks = set(state.get("seen_tasks", ()))
        if "curriculum" in state:  # checkpoints from before curricula: uniform, no records
            self.curriculum.load_state_dict(state["curriculum"])
        self.num_records = int(state.get("num_records", 0))

    def close(self) -> None:
        """Close the ``AgentVectorEnv`` the source was given (an env id's vector envs are made
        and closed by each collect call)."""
        if isinstance(self.env, AgentVectorEnv):
            self.env.close()


def shard_size(num_groups: int, world_size: int) -> int:
    """Groups per rank when ``world_size`` ranks share ``num_groups`` (groups never straddle
    ranks: a group is played and scored by one rank)."""
    if num_groups % world_size:
        divisors = [n for n in range(1, num_groups + 1) if num_groups % n == 0]
        raise ConfigError(
            "groups_per_batch",
            num_groups,
            f"does not split into whole groups over {world_size} data-parallel ranks",
            f"make batch_size / group_size a multiple of {world_size}, or run {divisors} "
            "processes",
        )
    return num_groups // world_size
