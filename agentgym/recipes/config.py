"""What a training run is: one frozen ``RunConfig``, resolved once from layers of settings.

::

    run = resolve_run(Layer("my.toml", {"steps": 60, "config": {"learning_rate": 1e-3}}))
    run.steps, run.config.learning_rate, run.options.decay_steps, run.history_turns

Each layer is a mapping in the run-file format (``agentgym train --config FILE``): the run
fields below at the top, a ``config`` table of algorithm fields, an ``options`` table of trainer
options, and the ``env_kwargs`` and ``train_env_kwargs`` tables. Lowest first:

1. the recipe of the run's (env, algo), when the package ships one (``find_recipe``);
2. when resuming, the settings the run recorded in its ``run.json``;
3. the user's run file;
4. the flags.

A later layer replaces a value and merges into a table key by key. The merged values are checked
once, by the field rules of ``agentgym.core.config``; a bad value names its field and the layer
that set it. ``docs/recipes.md`` tells how recipes are found; ``docs/configuration.md`` lists
every field.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
import time
import tomllib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from agentgym.core.config import Config, require
from agentgym.core.errors import ConfigError
from agentgym.registry import split_module

if TYPE_CHECKING:
    from agentgym.trainers.config import AlgorithmConfig, TrainOptions

__all__ = ["DEFAULT_ENV", "Layer", "RunConfig", "find_recipe", "history_window", "resolve_run"]

DEFAULT_ENV = "agentgym/FrozenLake-v0"
DEFAULT_ALGO = "grpo"
TABLES = (
    "config",
    "options",
    "env_kwargs",
    "train_env_kwargs",
    "curriculum_kwargs",
    "role_policies",
    "guards",
)
"""The tables of a run file: a layer merges into them key by key."""


def history_window(value: int | str | None) -> int | None:
    """``"all"`` or None -> None (the whole conversation); ``k`` or ``"k"`` (k >= 0) -> k."""
    if value is None or value == "all":
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise ConfigError(
            "history_turns",
            value,
            "must be an int >= 0 or 'all'",
            "pass e.g. --history-turns 0 (the latest observation) or --history-turns all",
        )
    return int(text)


def _preset() -> AlgorithmConfig:
    from agentgym.trainers.config import make_config

    return make_config(DEFAULT_ALGO)


def _default_options() -> TrainOptions:
    from agentgym.trainers.config import TrainOptions

    return TrainOptions()


@dataclass(frozen=True, kw_only=True)
class RunConfig(Config):
    """Everything ``agentgym train`` does, resolved: build it with ``resolve_run``."""

    env: str = DEFAULT_ENV
    """Env id to train on and to evaluate; module:Env-v0 imports module first (an env that
    your own code registers), as gym.make does."""
    imports: tuple[str, ...] = ()
    """Modules to import before the env is looked up (their import registers your envs)."""
    algo: str = DEFAULT_ALGO
    """Algorithm (ppo, grpo, dapo or a registered name): the preset the config table edits."""
    backend: Literal["torch", "deepspeed"] = "torch"
    """Training backend."""
    model: str | None = None
    """A local model directory to start from; None: the tiny default policy."""
    init: Literal["format", "random"] | None = "format"
    """The tiny policy's starting weights: format (shipped, pre-trained on output formats
    only) or random (initialised from seed; with action choices the policy needs no format).
    None with a model, which starts as it is."""
    steps: int = 100
    """Training updates."""
    seed: int = 0
    """Seed of sampling, task order and evaluation; the algorithm config's seed too."""
    out: str | None = None
    """Run folder; None: runs/<env>-<algo>-<time>, fixed when the run is resolved."""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Env arguments for training and evaluation; agentgym eval of the run's model plays the
    env with them."""
    train_env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Env arguments of training episodes only, over env_kwargs; evaluation plays the env
    without them (e.g. a penalty that shapes training)."""
    curriculum: Literal["uniform", "schedule", "adaptive"] = "uniform"
    """Which training tasks are played: uniform (the seed picks them, as without a
    curriculum), schedule (the env's difficulty levels, easiest first) or adaptive (tasks the
    policy sometimes solves first); docs/curriculum.md."""
    curriculum_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """The curriculum's parameters (e.g. threshold, min_tries, floor, decay, tasks_per_level);
    docs/curriculum.md lists them."""
    env_workers: Literal["thread", "process", "ray"] | None = None
    """Where training episodes' envs run: None (where the env asks), thread, process, or ray
    (Ray actors, one pool for the whole run; a local Ray unless RAY_ADDRESS names a cluster)."""
    max_turns: int | None = None
    """Most turns per training episode; None: the env's own limit (evaluation always plays
    it)."""
    history_turns: int | None = None
    """The policy's context, in training and evaluation: k (the system messages, the
    observation k turns back and the turns since; 0: the latest observation only), or all
    (None in run.json): the whole conversation."""
    scaffold: Literal["default", "react", "memory"] = "default"
    """How observations become the prompt, in training and evaluation (docs/scaffolds.md):
    default (the env's messages; the reply is the action), react (Thought/Action/Observation:
    the env gets the reply's Action line) or memory (each turn: a memory of the earlier turns
    and the latest observation; history_turns widens its window, default 0)."""
    action_choices: bool = False
    """Constrained decoding, in training and evaluation: the policy samples only among the
    env's info['action_choices'] (FrozenLake's four moves), so RL learns only which action."""
    train_roles: str | None = None
    """Multi-agent envs (docs/multiagent.md): the roles the policy plays and learns,
    comma-separated (e.g. x); None: the env's first role."""
    role_policies: Mapping[str, Any] = field(default_factory=dict)
    """Multi-agent envs: the other roles' scripted policies by name (e.g. o = "heuristic");
    roles left out get the env's defaults."""
    agent: str | None = None
    """An agent program to train instead of the env's episodes (docs/gateway.md):
    module:function naming async def agent(client, task), whose openai.AsyncOpenAI client
    records every model call token-exact; needs tasks. The evaluations (env episodes) are then
    not run."""
    tasks: str | None = None
    """The agent program's tasks: a JSON-lines file, one object per task (each group plays one
    task group_size times)."""
    agent_reward: Literal["program", "env"] = "program"
    """What rewards an agent program: program (its return value, a number) or env (the env,
    reset on the task's seed and options, grades the final answer it returns)."""
    micro_batch_tokens: int | None = None
    """Token budget of a training micro-batch; None: the backend's default."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """Training precision: fp32; bf16 (autocast with fp32 weights on the torch backend,
    DeepSpeed's bf16 mode with fp32 master weights); auto: bf16 on a GPU that has it, fp32
    otherwise. Log-probs and entropy are computed in fp32 either way."""
    zero_stage: int | None = None
    """DeepSpeed ZeRO stage (deepspeed backend only): 0 (data parallel), 1 (optimizer states
    sharded), 2 (+ gradients), 3 (+ parameters); None: 2."""
    engine_device: str = "auto"
    """Where the inference engine generates: auto (the trainer's device, sharing the policy's
    weights, so a weight push is a version bump), cpu, cuda or cuda:N (a copy of the policy
    there, updated device to device after each update)."""
    engine: Literal["hf", "sglang", "openai"] = "hf"
    """What generates the episodes: hf (in-process, beside the trainer), sglang (a server
    speaking SGLang's native API at engine_url: SGLang, or agentgym serve; it loads the policy
    after every update, from disk or through a process group: weight_sync) or openai (refused
    for training: no weight-update API)."""
    engine_url: str | tuple[str, ...] | None = None
    """The inference server's root URL (sglang, openai), e.g. http://127.0.0.1:30000; for
    several sglang servers a list (--engine-url repeated): each episode stays on one, new
    episodes go to the least loaded, every update reaches each (docs/weight_sync.md)."""
    weights_dir: str | None = None
    """Where the policy is written after every update for a server to load (the newest two
    kept); None: <out>/weights. On another machine: a folder of a shared file system."""
    launch: int = 0
    """Inference servers the run starts and owns (engine sglang; engine_url is then theirs):
    from launch_command on launch_devices; each is waited for, restarted if it crashes, and
    stopped at exit (none outlives the run, SIGKILL included). 0: attach to engine_url."""
    launch_command: str | None = None
    """The launched servers' command line, with {python}, {model}, {host}, {port}, {device},
    {index} filled in; None: SGLang's python -m sglang.launch_server --model-path {model}
    --host {host} --port {port} --base-gpu-id {device}. E.g. "{python} -m agentgym serve
    --model {model} --port {port}" on a CPU."""
    launch_devices: str | None = None
    """Comma-separated {device} of each launched server (round robin); None: 0, 1, ..."""
    weight_sync: Literal["disk", "group"] = "disk"
    """How the policy reaches an sglang engine after every update: disk (safetensors in
    weights_dir, read back by the server; portable) or group (a process group with the
    server: NCCL on GPUs, gloo on CPUs, in buckets, every tensor's checksum compared after
    each sync). docs/weight_sync.md."""
    weight_sync_backend: Literal["auto", "gloo", "nccl"] = "auto"
    """The process group's backend (weight_sync group): auto is nccl when CUDA is available,
    else gloo."""
    weight_sync_bucket_mb: int = 512
    """The most MiB one update call carries through the process group (weight_sync group)."""
    weight_sync_address: str = "127.0.0.1"
    """The address the server reaches the trainer at for the process group (weight_sync
    group): this machine's address on the servers' network when they run elsewhere."""
    eval_episodes: int = 128
    """Episodes of the evaluations before and after training; 0: none."""
    start_eval_episodes: int | None = None
    """Episodes of the evaluation before training, if not eval_episodes; 0: none. An untrained
    policy's episodes often run to the turn limit, so that one can cost several times the other."""
    eval_temperature: float = 1.0
    """Sampling temperature of the evaluations; 0: greedy."""
    checkpoint_every: int = 10
    """Updates between checkpoints."""
    resume: bool = False
    """Continue the run in out from its newest checkpoint, with the settings it recorded."""
    wandb: str | None = None
    """Also log to this Weights & Biases project (needs wandb)."""
    show_bar: bool = True
    """Show a progress bar; --no-progress (show_bar = false) hides it."""
    trace: str = "all"
    """Episode traces in <out>/traces (docs/traces.md): all (every episode of every update),
    sample:N (the first N groups of each update) or off."""
    trace_budget_gb: float = 4.0
    """The trace's size budget: a warning at 80%; past it, one group per update (and another
    warning)."""
    guards: Mapping[str, Any] = field(default_factory=dict)
    """Failure-mode guards (docs/guards.md), the [guards] table: {} the conservative defaults,
    enabled = false (--guards off) none, a [guards.<monitor>] table per monitor (threshold,
    patience, action = warn|stop|rollback|off)."""
    config: AlgorithmConfig = field(default_factory=_preset)
    """The algorithm's config: its preset with the config table's fields (--set) applied."""
    options: TrainOptions = field(default_factory=_default_options)
    """Trainer options beside the algorithm: the options table (--option)."""

    _bounds: ClassVar[dict[str, str]] = {
        "steps": ">= 1",
        "seed": ">= 0",
        "max_turns": ">= 1",
        "micro_batch_tokens": ">= 1",
        "eval_episodes": ">= 0",
        "eval_temperature": ">= 0",
        "checkpoint_every": ">= 1",
        "trace_budget_gb": "> 0",
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "history_turns", history_window(self.history_turns))
        object.__setattr__(self, "engine_url", _engine_url(self.engine_url))
        super().__post_init__()
        require(  # not in _bounds: its None is "as eval_episodes", not "off"
            self.start_eval_episodes is None or self.start_eval_episodes >= 0,
            self,
            "start_eval_episodes",
            "must be >= 0",
            "use a count of episodes, 0 for no evaluation before training, or leave it out to "
            "play eval_episodes",
        )
        require(
            self.config.algo == self.algo,
            self,
            "algo",
            f"differs from its config's algo {self.config.algo!r}",
            "build the run with RunConfig.from_dict or resolve_run",
        )
        require(
            self.config.seed == self.seed,
            self,
            "seed",
            f"differs from its config's seed {self.config.seed}",
            "build the run with RunConfig.from_dict or resolve_run",
        )
        require(
            re.fullmatch(r"auto|cpu|cuda(:\d+)?", str(self.engine_device)) is not None,
            self,
            "engine_device",
            "is not auto, cpu, cuda or cuda:N",
            "pass e.g. --engine-device cuda:0",
        )
        self._check_engine()
        self._check_agent()
        from agentgym.rollout.traces.writer import parse_mode
        from agentgym.trainers.guards import GuardsConfig

        parse_mode(self.trace)  # all, off or sample:N, now
        GuardsConfig.from_dict(self.guards)  # a bad [guards] value names its field now
        require(
            self.zero_stage is None or self.backend == "deepspeed",
            self,
            "zero_stage",
            f"applies to the deepspeed backend, not {self.backend}",
            "pass --backend deepspeed, or drop --zero-stage",
        )
        require(
            self.zero_stage in (None, 0, 1, 2, 3), self, "zero_stage", "is not 0-3", "use e.g. 2"
        )
        if self.model is None:
            require(self.init is not None, self, "init", "is needed without a model", "pass random")
        else:
            require(
                self.init is None, self, "init", "applies to the tiny policy only", "drop --init"
            )

    def _check_agent(self) -> None:
        require(
            (self.agent is None) == (self.tasks is None),
            self,
            "tasks" if self.agent else "agent",
            "is needed: an agent program and its tasks go together",
            "pass both --agent module:function and --tasks tasks.jsonl",
        )
        if self.agent is not None:  # the evaluations play env episodes, not the program
            object.__setattr__(self, "eval_episodes", 0)
            object.__setattr__(self, "start_eval_episodes", 0)

    @property
    def engine_urls(self) -> tuple[str, ...]:
        """``engine_url`` as a tuple of URLs (empty for none)."""
        if self.engine_url is None:
            return ()
        if isinstance(self.engine_url, str):
            return (self.engine_url,)
        return tuple(self.engine_url)

    def _check_engine(self) -> None:
        served = self.engine != "hf"
        require(
            served or self.engine_url is None,
            self,
            "engine_url",
            "is for a server (engine sglang or openai)",
            "pass --engine sglang, or drop --engine-url",
        )
        require(
            self.launch >= 0 and (self.launch == 0 or self.engine == "sglang"),
            self,
            "launch",
            f"starts SGLang-API servers: needs engine sglang and a count >= 0, not {self.launch} "
            f"with engine {self.engine}",
            "pass --engine sglang --launch 1",
        )
        urls = self.engine_urls
        require(
            len(urls) <= 1 or self.engine == "sglang",
            self,
            "engine_url",
            f"lists {len(urls)} servers; several are for engine sglang, not {self.engine}",
            "pass one --engine-url, or --engine sglang",
        )
        require(
            len(set(urls)) == len(urls),
            self,
            "engine_url",
            "names a server twice",
            "pass each server's --engine-url once",
        )
        require(
            not (self.launch and self.engine_url),
            self,
            "engine_url",
            "is the launched server's own with --launch",
            "drop --engine-url, or --launch",
        )
        require(
            not served or bool(self.engine_url) or self.launch > 0,
            self,
            "engine_url",
            f"is needed with engine {self.engine}",
            "pass --engine-url http://HOST:PORT of a running server (agentgym serve --model "
            "DIR, or SGLang's launch_server)",
        )
        require(
            self.weight_sync == "disk" or self.engine == "sglang",
            self,
            "weight_sync",
            f"group needs engine sglang, not {self.engine}",
            "pass --engine sglang, or drop --weight-sync",
        )
        require(
            self.weight_sync_bucket_mb >= 1,
            self,
            "weight_sync_bucket_mb",
            "must be >= 1",
            "use e.g. 512",
        )
        require(
            not (served and self.action_choices),
            self,
            "action_choices",
            f"are applied by the in-process engine only, not engine {self.engine}",
            "pass --no-action-choices (action_choices = false), or --engine hf",
        )
        require(
            not (self.scaffold == "react" and self.action_choices),
            self,
            "action_choices",
            "sample the env's bare action texts, which the react scaffold would read as replies "
            "without an 'Action:' line",
            "pass --no-action-choices (action_choices = false) with --scaffold react",
        )

    @classmethod
    def _field_types(cls) -> dict[str, Any]:
        # The trainer's types load here, not at import: --help reads the docstrings without torch.
        from agentgym.trainers.config import AlgorithmConfig, TrainOptions

        names = {"AlgorithmConfig": AlgorithmConfig, "TrainOptions": TrainOptions}
        hints = typing.get_type_hints(cls, localns=names)
        hints["engine_url"] = object  # one URL or several: checked by _engine_url
        return hints

    @classmethod
    def _unknown_key_rule(cls) -> str:
        return "is not a run setting"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """A run from the run-file format: its ``config`` table edits the preset of ``algo``
        (whose seed is the run's), its ``options`` table the trainer options."""
        from agentgym.trainers.config import TrainOptions, config_class

        cls.check_keys(data)
        values = dict(data)
        algo, seed = values.get("algo", DEFAULT_ALGO), values.get("seed", 0)
        table, options = _table(values, "config"), _table(values, "options")
        if table.get("seed", seed) != seed:
            raise ConfigError(
                "config.seed", table["seed"], f"differs from the run's seed={seed}", "set seed"
            )
        build = config_class(algo).from_dict
        values["config"] = _nested("config", lambda: build({**table, "seed": seed}))
        values["options"] = _nested("options", lambda: TrainOptions.from_dict(options))
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The run-file format (``algo`` and ``seed`` at the top only); ``from_dict`` reads it."""
        data = super().to_dict()
        data["config"] = {k: v for k, v in data["config"].items() if k not in ("algo", "seed")}
        return data


def _engine_url(value: object) -> str | tuple[str, ...] | None:
    """``engine_url`` as one URL (a list of one included) or a tuple of several."""
    if value is None or isinstance(value, str):
        return value
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(url, str) and url for url in value)
    ):
        return value[0] if len(value) == 1 else tuple(value)
    raise ConfigError(
        "engine_url",
        value,
        "is not a URL or a non-empty list of URLs",
        "pass --engine-url http://HOST:PORT (repeated for several servers), or in a run "
        'file engine_url = ["http://h1:30000", "http://h2:30000"]',
    )


def _table(values: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    table = values.get(name, {})
    if not isinstance(table, Mapping):
        raise ConfigError(name, table, "is not a mapping", f"write a [{name}] table of fields")
    return table


def _nested(prefix: str, build: Any) -> Any:
    """``build()``, its ``ConfigError`` naming the field inside its table (``config.gamma``)."""
    try:
        return build()
    except ConfigError as error:
        name = error.name if error.name == "algo" else f"{prefix}.{error.name}"
        raise ConfigError(name, error.value, error.rule, error.fix) from None


@dataclass(frozen=True)
class Layer:
    """One source of run settings, in the run-file format."""

    source: str
    """Where the values come from, for error messages: a file, "--set", "the command line"."""
    values: Mapping[str, Any]


def _merge(layers: Sequence[Layer]) -> tuple[dict[str, Any], dict[str, tuple[int, str]]]:
    """The layers' values, later over earlier, and per key (``config.gamma`` inside a table)
    the index and source of the layer that set it."""
    merged: dict[str, Any] = {}
    setters: dict[str, tuple[int, str]] = {}
    for index, layer in enumerate(layers):
        for raw_key, value in layer.values.items():
            key = raw_key.replace("-", "_")
            if key in TABLES and isinstance(value, Mapping):
                merged[key] = {**merged.get(key, {}), **value}
                setters.update({f"{key}.{k}": (index, layer.source) for k in value})
            else:
                merged[key] = value
            setters[key] = (index, layer.source)
    return merged, setters


def resolve_run(*layers: Layer) -> RunConfig:
    """The run that ``layers`` (lowest first) describe, over the recipe of its (env, algo)."""
    merged, _ = _merge(layers)
    _, env = split_module(str(merged.get("env", DEFAULT_ENV)))
    recipe = find_recipe(env, merged.get("algo", DEFAULT_ALGO))
    stack = [recipe, *layers] if recipe is not None else list(layers)
    merged, setters = _merge(stack)
    module, merged["env"] = split_module(str(merged.get("env", DEFAULT_ENV)))
    imports = merged.get("imports", [])
    if module is not None and isinstance(imports, list | tuple):  # module:Env-v0 imports it
        merged["imports"] = list(dict.fromkeys([*imports, module]))
    if merged.get("model") is not None:
        # a model given over a lower layer's init (a recipe's) starts as it is; an init given
        # with it or after it is a mistake that RunConfig reports
        if "init" not in merged or setters["init"][0] < setters["model"][0]:
            merged["init"] = None
    elif "init" in merged and merged["init"] is None:
        del merged["init"]  # recorded by a run from a model, resumed without it
    if merged.get("out") is None:
        name = str(merged.get("env", DEFAULT_ENV)).split("/")[-1]
        stamp = time.strftime("%Y%m%d-%H%M%S")
        merged["out"] = f"runs/{name}-{merged.get('algo', DEFAULT_ALGO)}-{stamp}"
    try:
        return RunConfig.from_dict(merged)
    except ConfigError as error:
        table = error.name.rsplit(".", 1)[0]  # a key inside a nested table (guards.kl_spike.x)
        _, source = setters.get(error.name, setters.get(table, (0, "the default")))
        rule = f"{error.rule} (set by {source})"
        raise ConfigError(error.name, error.value, rule, error.fix) from None


@functools.cache
def _recipes() -> dict[tuple[str, str], Layer]:
    found: dict[tuple[str, str], Layer] = {}
    root = importlib.resources.files("agentgym.recipes")
    for folder in sorted(root.iterdir(), key=lambda p: p.name):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir(), key=lambda p: p.name):
            if not path.name.endswith(".toml"):
                continue
            name = f"recipe {folder.name}/{path.name}"
            data = tomllib.loads(path.read_text())
            if not isinstance(data.get("env"), str) or not isinstance(data.get("algo"), str):
                raise ConfigError(name, path.name, "names no env and algo", 'add env = "..."')
            key = (data["env"], data["algo"])
            if key in found:
                raise ConfigError(name, key, f"repeats {found[key].source}", "keep one of them")
            found[key] = Layer(name, data)
    return found


def find_recipe(env: str, algo: str) -> Layer | None:
    """The shipped recipe for training ``env`` with ``algo`` (found by the recipe files' own
    ``env`` and ``algo`` keys); None: the algorithm's preset applies as it is."""
    return _recipes().get((env, algo))


def recipe_names() -> list[str]:
    """Every shipped recipe, as ``"<env> <algo>: <source>"``."""
    return [f"{env} {algo}: {layer.source}" for (env, algo), layer in sorted(_recipes().items())]
