"""The engine flags shared by ``agentgym eval`` and ``agentgym train``, and ``make_engine``.

::

    agentgym eval --env agentgym/FrozenLake-v0 --model runs/fl            # hf: in-process
    agentgym eval --env agentgym/Math-v0 --engine openai \\
        --engine-url http://127.0.0.1:8000 --model Qwen/Qwen3-0.6B     # vLLM, agentgym serve, ...
    agentgym eval --env agentgym/Math-v0 --engine sglang --engine-url http://127.0.0.1:30000 \\
        --tokenizer /models/qwen3-0.6b

``--engine``: ``hf`` (default) loads ``--model`` (a local directory, a run folder, or the tiny
policy) into an in-process ``HFEngine``; ``openai`` talks to any OpenAI-compatible server at
``--engine-url`` (``--model``: the served model's name); ``sglang`` to an SGLang server's native
API. A served model's prompts are rendered here with ``--tokenizer`` (default: ``--model`` when it
is a local directory or a model in the local Hugging Face cache; the tiny policy's for
``agentgym-tiny``); with none, an OpenAI-compatible server is used through its chat API.

The API key is read from the environment (``OPENAI_API_KEY``, or the variable ``--api-key-env``
names) when the engine is made; ``EngineSpec`` holds only the variable's name, so the key never
reaches a report, a log or a run folder.

A trainer needs token ids and their log-probabilities from its engine: ``await
token_level(engine)`` says whether it gets them (``agentgym train`` refuses an engine without).
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from agentgym.core.errors import ConfigError, InfraError
from agentgym.core.keyvalue import NOT_SHOWN
from agentgym.inference.base import InferenceEngine, SamplingParams

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "ENGINE_KINDS",
    "EngineSpec",
    "add_engine_arguments",
    "engine_spec",
    "engine_tokenizer",
    "make_engine",
    "token_level",
]

ENGINE_KINDS = ("hf", "sglang", "openai")
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
TINY_NAME = "agentgym-tiny"
"""The name ``agentgym serve`` gives the tiny policy; its tokenizer ships with agentgym."""

EngineKind = Literal["hf", "sglang", "openai"]
ApiMode = Literal["auto", "completions", "chat"]


@dataclass(frozen=True)
class EngineSpec:
    """Which engine to make; validated at construction. Holds no secret (see ``api_key``)."""

    kind: EngineKind = "hf"
    """hf (in-process transformers), sglang (an SGLang server) or openai (any
    OpenAI-compatible server: vLLM, SGLang, agentgym serve, hosted APIs)."""
    url: str | None = None
    """The server's root URL (sglang, openai)."""
    model: str | None = None
    """hf: a local model directory or run folder (None: the tiny policy); openai: the served
    model's name; sglang: a model directory to launch a server with when url is None."""
    tokenizer: str | None = None
    """A local directory (or cached Hugging Face name) whose tokenizer and chat template render
    prompts for a served model; default: see ``engine_tokenizer``."""
    api_key_env: str | None = None
    """The environment variable holding the API key (openai); None: OPENAI_API_KEY if set."""
    api: ApiMode = "auto"
    """openai: completions (token ids in and out), chat (the server renders the prompt; enough
    for evaluation, never for training) or auto (completions when the server returns token ids
    and a tokenizer is found, else chat)."""

    def __post_init__(self) -> None:
        if self.kind not in ENGINE_KINDS:
            raise ConfigError("engine", self.kind, f"is not one of {ENGINE_KINDS}", "use hf")
        if self.api not in ("auto", "completions", "chat"):
            raise ConfigError("api", self.api, "is not auto, completions or chat", "use auto")
        if self.kind == "hf" and self.url is not None:
            raise ConfigError(
                "engine_url",
                self.url,
                "is for a served model (--engine openai or sglang)",
                "add --engine openai (or sglang), or drop --engine-url",
            )
        if self.kind == "openai" and (self.url is None or not self.model):
            raise ConfigError(
                "engine_url/model",
                (self.url, self.model),
                "--engine openai needs the server's URL and the served model's name",
                "pass --engine-url http://HOST:PORT --model NAME (GET /v1/models lists names)",
            )
        if self.kind == "sglang" and self.url is None and not self.model:
            raise ConfigError(
                "engine_url",
                None,
                "--engine sglang needs a running server's URL, or a model directory to launch",
                "pass --engine-url http://HOST:PORT, or --model DIR",
            )
        if self.kind != "openai" and self.api != "auto":
            raise ConfigError("api", self.api, "applies to --engine openai only", "drop --api")
        if self.api_key_env is not None and _pasted_key(self.api_key_env):
            raise ConfigError(
                "--api-key-env",
                NOT_SHOWN,
                "takes the NAME of an environment variable; the value given looks like a key "
                "itself (not shown)",
                "put the key in a variable and pass its name: export MY_KEY=...; "
                "--api-key-env MY_KEY",
            )

    @property
    def served(self) -> bool:
        return self.kind != "hf"

    def api_key(self) -> str | None:
        """The key, read from the environment now; ``ConfigError`` if a named variable is
        unset. Never store or print what this returns."""
        name = self.api_key_env or DEFAULT_API_KEY_ENV
        key = os.environ.get(name)
        if not key and self.api_key_env is not None:
            shown = name if _ENV_NAME.fullmatch(name) else NOT_SHOWN  # "my_key" may be a key
            raise ConfigError(
                "--api-key-env",
                shown,
                "names an environment variable that is not set",
                f"export {name if shown is name else 'THE_VARIABLE'}=... before the command",
            )
        return key or None

    def to_dict(self) -> dict[str, Any]:
        """The spec for reports and run folders (the key variable's name, never its value)."""
        return asdict(self)


_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
"""A variable name as shell users write them; another value is not echoed in a message."""
_KEY_PREFIXES = ("sk-", "sk_", "hf_", "gsk_", "xai-", "ghp_", "github_pat_", "AIza", "Bearer")


def _pasted_key(value: str) -> bool:
    """Whether ``value``, given as a variable's name, looks like a key pasted in its place
    (not a name, or a provider's key prefix and no such variable set)."""
    if not value.isidentifier():
        return True
    return value.startswith(_KEY_PREFIXES) and value not in os.environ


def add_engine_arguments(parser: argparse.ArgumentParser, *, model: bool = True) -> None:
    """Declare ``--engine``, ``--engine-url``, ``--tokenizer``, ``--api-key-env``, ``--api``
    and (``model=True``) ``--model``; every default None; read them with ``engine_spec``."""
    add = parser.add_argument
    add(
        "--engine",
        choices=ENGINE_KINDS,
        default=None,
        help="hf: in-process transformers (default); openai: an OpenAI-compatible server "
        "(vLLM, SGLang, agentgym serve, a hosted API); sglang: SGLang's native API",
    )
    add("--engine-url", metavar="URL", default=None, help="the server's root URL (openai, sglang)")
    if model:
        add(
            "--model",
            metavar="DIR|NAME",
            default=None,
            help="hf: a model directory, a run folder or one of its checkpoints (default: "
            "the tiny policy as shipped); openai: the served model's name; sglang: a model "
            "directory to launch a server with when --engine-url is not given",
        )
    add(
        "--tokenizer",
        metavar="DIR|NAME",
        default=None,
        help="a served model's tokenizer and chat template, to send token ids (a local "
        "directory, or a name in the local Hugging Face cache; default: --model where it is "
        f"one, the tiny policy's for {TINY_NAME})",
    )
    add(
        "--api-key-env",
        metavar="VAR",
        default=None,
        help=f"the environment variable holding the API key (default {DEFAULT_API_KEY_ENV} "
        "when set); the key is never printed or written",
    )
    add(
        "--api",
        choices=("auto", "completions", "chat"),
        default=None,
        help="openai: completions (token ids in and out, needs a tokenizer), chat (the server "
        "renders the prompt; evaluation needs no token exactness) or auto (default: "
        "completions when the server returns token ids and a tokenizer is found, else chat)",
    )


def engine_spec(args: argparse.Namespace, *, model: str | None = None) -> EngineSpec:
    """The ``EngineSpec`` the flags describe (``model``: when the parser has no --model)."""
    return EngineSpec(
        kind=getattr(args, "engine", None) or "hf",
        url=getattr(args, "engine_url", None),
        model=getattr(args, "model", model),
        tokenizer=getattr(args, "tokenizer", None),
        api_key_env=getattr(args, "api_key_env", None),
        api=getattr(args, "api", None) or "auto",
    )


def engine_tokenizer(spec: EngineSpec) -> Any:
    """The tokenizer that renders prompts for ``spec``'s model, or None where none is found
    (then only an OpenAI-compatible server's chat API can be used). Nothing is downloaded."""
    from agentgym import models

    name = spec.tokenizer or spec.model
    if name is None or name == TINY_NAME:
        return models.load_tokenizer()
    if Path(name).expanduser().is_dir():
        return models.load_tokenizer(name)
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError):
        if spec.tokenizer is not None:
            raise ConfigError(
                "tokenizer",
                spec.tokenizer,
                "is neither a local directory nor in the local Hugging Face cache",
                "pass the served model's directory (nothing is downloaded)",
            ) from None
        return None


def make_engine(spec: EngineSpec, *, seed: int = 0, tokenizer: Any = None) -> InferenceEngine:
    """The engine ``spec`` names. hf loads its model here (``spec.model``: a directory, a run
    folder, or None for the tiny policy); served engines get ``tokenizer`` (default
    ``engine_tokenizer(spec)``) as their ``.tokenizer``, for re-tokenizing and for rendering."""
    if spec.kind == "hf":
        from agentgym import models
        from agentgym.inference.hf import HFEngine

        lm, tok = models.load(model_dir(spec.model))
        return HFEngine(lm, tok, seed=seed)
    if tokenizer is None:
        tokenizer = engine_tokenizer(spec)
    if spec.kind == "openai":
        from agentgym.inference.openai import OpenAIEngine

        url, name = spec.url or "", spec.model or ""  # both checked by EngineSpec
        return OpenAIEngine(url, name, spec.api_key(), tokenizer=tokenizer)
    from agentgym.inference.sglang import SGLangEngine

    engine = SGLangEngine(spec.url, model_path=None if spec.url else spec.model)
    engine.tokenizer = tokenizer  # type: ignore[attr-defined]
    return engine


def model_dir(path: str | None) -> str | None:
    """A run folder means its newest checkpoint; a checkpoint folder holds the model itself."""
    if path is None:
        return None
    from agentgym.trainers.checkpoint import find_latest

    folder = Path(path)
    if (folder / "checkpoints").is_dir():
        latest = find_latest(folder / "checkpoints")
        if latest is not None:
            return str(latest)
    return path


async def token_level(engine: InferenceEngine) -> bool:
    """Whether ``engine``'s completions carry the sampled token ids and their log-probs (what
    a trainer learns from): always for HFEngine and SGLangEngine; for an OpenAI-compatible
    server, asked with a one-token completion of the prompt ``[0]``. A server that does not
    answer raises ``InfraError``."""
    from agentgym.inference.openai import OpenAIEngine

    if not isinstance(engine, OpenAIEngine):
        return True
    if engine.token_level is False:
        return False
    try:
        probe = await engine.generate([0], SamplingParams(max_tokens=1, temperature=0))
    except InfraError:
        if engine.token_level is False:  # it answered, without token ids or /v1/completions
            return False
        raise  # down or failing: not an answer about token ids
    return probe.trainable
