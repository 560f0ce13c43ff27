"""The DeepSpeed backend: ZeRO stages 0-3, optional CPU offload, multi-GPU and multi-node.

Launch several processes with DeepSpeed's launcher or torchrun; each process builds the same
trainer and calls ``step`` with the same global batch (the trainer deals the rows to ranks)::

    deepspeed --num_gpus 8 train.py                        # one node, 8 GPUs
    deepspeed --hostfile hosts --num_nodes 2 train.py      # two nodes
    torchrun --nproc_per_node 2 train.py                   # CPU: two processes over gloo

A plain ``python train.py`` runs it as a single process (rank 0 of 1). Without CUDA the process
group uses gloo, and DeepSpeed's shared-memory all-reduce kernel, which it would compile on first
use, is left off (``shm_comm=True`` turns it on).

The gradient-accumulation boundary belongs to the trainer (``managed_gradient_accumulation:
false``): any number of ``backward`` calls, then one ``step``. DeepSpeed averages gradients over
data-parallel ranks; ``backward`` scales each rank's loss by the world size so that gradients
are summed, as the backend contract asks.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from agentgym.core.errors import ConfigError
from agentgym.trainers.backends.base import (
    M,
    OptimizerFactory,
    R,
    SchedulerFactory,
    check_micro_batch_tokens,
    clip_grad_norm,
    resolve_precision,
)

__all__ = ["DeepSpeedBackend", "deepspeed_config"]

_TAG = "engine"


def deepspeed_config(
    *,
    zero_stage: int,
    precision: str,
    max_grad_norm: float | None,
    offload_optimizer: bool = False,
    offload_params: bool = False,
    on_gpu: bool = False,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The DeepSpeed config dict for our settings; ``overrides`` are merged in last (nested)."""
    zero: dict[str, Any] = {"stage": zero_stage}
    if not on_gpu:
        zero["overlap_comm"] = False  # gloo on CPU: nothing to overlap, and fewer code paths
    if offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": on_gpu}
    if offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": on_gpu}
    # Stage 0 in fp32 has no DeepSpeed optimizer wrapper that reports the norm: the backend clips
    # with torch itself (see DeepSpeedBackend._clip_hook).
    ds_clips = zero_stage > 0 or precision == "bf16"
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "managed_gradient_accumulation": False,
        "gradient_clipping": float(max_grad_norm or 0.0) if ds_clips else 0.0,
        "zero_optimization": zero,
        "bf16": {"enabled": precision == "bf16"},
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,  # the trainer's own torch optimizer, offloaded too
        "steps_per_print": 2**62,
        "wall_clock_breakdown": False,
    }
    return _merge(config, overrides or {})


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _import_deepspeed() -> Any:
    try:
        import deepspeed
    except ImportError:
        raise ConfigError(
            "backend",
            "deepspeed",
            "needs the deepspeed package",
            'pip install deepspeed "torch==<the torch you have>" (pinning keeps pip off torch)',
        ) from None
    return deepspeed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _init_distributed(deepspeed: Any, dist_backend: str | None, shm_comm: bool) -> None:
    # Idempotent; also adopts a process group the caller set up with torch.distributed.
    if not torch.distributed.is_initialized() and "RANK" not in os.environ:  # a single process
        for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}.items():
            os.environ.setdefault(key, value)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    cuda = torch.cuda.is_available()
    if not cuda and not shm_comm:
        # DeepSpeed would JIT-compile a shared-memory all-reduce (into ~/.cache/torch_extensions)
        # the first time: 30-50 s on a fresh machine, in every rank at once. gloo is enough here.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    backend = dist_backend or ("nccl" if cuda else "gloo")
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False, verbose=False)


class DeepSpeedBackend:
    """ZeRO data parallelism through DeepSpeed; see the module docstring.

    Args:
        zero_stage: 0 (plain data parallel), 1 (optimizer states sharded), 2 (+ gradients),
            3 (+ parameters).
        offload_optimizer: Keep optimizer states (and the step) on the CPU (ZeRO-Offload).
        offload_params: Keep parameters on the CPU between uses (ZeRO-3 only).
        precision: ``auto`` (bf16 on a GPU that has it), ``fp32`` or ``bf16``.
        micro_batch_tokens: Most padded tokens per forward pass; None: a rank's rows at once.
        dist_backend: The process-group backend; default nccl with CUDA, gloo without.
        shm_comm: Use DeepSpeed's shared-memory all-reduce on CPU (compiled on first use).
        config_overrides: Merged into the generated DeepSpeed config (``deepspeed_config``).
    """

    name = "deepspeed"

    def __init__(
        self,
        *,
        zero_stage: int = 2,
        offload_optimizer: bool = False,
        offload_params: bool = False,
        precision: str = "auto",
        micro_batch_tokens: int | None = None,
        dist_backend: str | None = None,
        shm_comm: bool = False,
        config_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        if zero_stage not in (0, 1, 2, 3):
            raise ConfigError("zero_stage", zero_stage, "must be 0, 1, 2 or 3", "use e.g. 2")
        if offload_params and zero_stage != 3:
            raise ConfigError(
                "offload_params", True, f"needs ZeRO-3, not stage {zero_stage}", "set zero_stage=3"
            )
        if offload_optimizer and zero_stage == 0:
            raise ConfigError(
                "offload_optimizer", True, "needs ZeRO stage 1-3", "set zero_stage to 1, 2 or 3"
            )
        self._ds = _import_deepspeed()
        _init_distributed(self._ds, dist_backend, shm_comm)
        self.zero_stage = zero_stage
        self.micro_batch_tokens = check_micro_batch_tokens(micro_batch_tokens)
        self._device = self._pick_device()
        self.precision = resolve_precision(precision, self._device)
        self.offload_optimizer, self.offload_params = offload_optimizer, offload_params
        self.config_overrides = config_overrides
        self._engine: Any = None
        self._last_norm: float | None = None

    @staticmethod
    def _pick_device() -> torch.device:
        if torch.cuda.is_available():
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local_rank)
            return torch.device("cuda", local_rank)
        return torch.device("cpu")

    @property
    def rank(self) -> int:
        return int(torch.distributed.get_rank())

    @property
    def world_size(self) -> int:
        return int(torch.distributed.get_world_size())

    @property
    def device(self) -> torch.device:
        return self._device

    def config(self, max_grad_norm: float | None) -> dict[str, Any]:
        """The DeepSpeed config ``prepare`` uses."""
        return deepspeed_config(
            zero_stage=self.zero_stage,
            precision=self.precision,
            max_grad_norm=max_grad_norm,
            offload_optimizer=self.offload_optimizer,
            offload_params=self.offload_params,
            on_gpu=self._device.type == "cuda",
            overrides=self.config_overrides,
        )

    def prepare(
        self,
        module: nn.Module,
        make_optimizer: OptimizerFactory,
        make_scheduler: SchedulerFactory,
        *,
        max_grad_norm: float | None,
    ) -> None:
        module = module.to(self._device)
        optimizer = make_optimizer(module)
        config = self.config(max_grad_norm)
        if config["gradient_clipping"] == 0.0 and self.zero_stage == 0:
            optimizer.register_step_pre_hook(self._clip_hook(module, max_grad_norm))
        engine, _, _, _ = self._ds.initialize(
            model=module,
            optimizer=optimizer,
            lr_scheduler=make_scheduler,
            config=config,
            dist_init_required=False,
        )
        if not hasattr(engine, "managed_gradient_accumulation"):
            raise ConfigError(
                "deepspeed",
                self._ds.__version__,
                "has no unmanaged gradient accumulation (managed_gradient_accumulation=false)",
                "upgrade: pip install -U deepspeed (0.19.8 is tested)",
            )
        self._engine = engine

    def _clip_hook(self, module: nn.Module, max_grad_norm: float | None) -> Any:
        """Stage 0 in fp32: clip the all-reduced gradients with torch and keep the norm."""

        def hook(*_: Any) -> None:
            self._last_norm = clip_grad_norm(module, max_grad_norm)

        return hook

    def prepare_frozen(self, module: nn.Module) -> nn.Module:
        # Replicated on every rank, in the training precision; fine for reference models that fit
        # one device. TODO: shard it with ZeRO-3 inference for models that do not.
        dtype = torch.bfloat16 if self.precision == "bf16" else None
        return module.to(device=self._device, dtype=dtype).eval().requires_grad_(False)

    def autocast(self) -> AbstractContextManager[Any]:
        return contextlib.nullcontext()  # DeepSpeed's bf16 mode casts the weights themselves

    @property
    def concurrency(self) -> int:
        return 1

    def map_micro_batches(self, fn: Callable[[M], R], micro_batches: Sequence[M]) -> list[R]:
        return [fn(m) for m in micro_batches]

    def forward(self, **inputs: Any) -> Any:
        return self._require()(**inputs)

    def backward(self, loss: Tensor) -> None:
        self._require().backward(loss * self.world_size, scale_wrt_gas=False)

    def step(self) -> float:
        engine = self._require()
        self._last_norm = None
        engine.step()
        norm = self._last_norm if self._last_norm is not None else engine.get_global_grad_norm()
        if norm is None:
            raise ConfigError(
                "deepspeed config",
                self.config(None),
                "reported no gradient norm",
                "leave zero_optimization.compute_grad_norm at its default",
            )
        return float(norm)

    def learning_rate(self) -> float:
        return float(self._require().get_lr()[0])

    def all_reduce(self, tensor: Tensor) -> Tensor:
        on_device = tensor.to(self._device)
        torch.distributed.all_reduce(on_device)
        if on_device is not tensor:
            tensor.copy_(on_device)
        return tensor

    def broadcast_object(self, obj: Any) -> Any:
        box = [obj]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather_object(self, obj: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(gathered, obj)
        return gathered

    def barrier(self) -> None:
        torch.distributed.barrier()

    def gathered_state_dict(self, module: nn.Module) -> dict[str, Tensor]:
        if self.zero_stage != 3:
            return {name: t.detach() for name, t in module.state_dict().items()}
        gathered: dict[int, Tensor] = {}
        out: dict[str, Tensor] = {}
        for name, tensor in module.state_dict(keep_vars=True).items():
            if id(tensor) not in gathered:  # tied weights are gathered once
                if hasattr(tensor, "ds_id"):  # a ZeRO-3 partitioned parameter
                    with self._ds.zero.GatheredParameters([tensor]):
                        gathered[id(tensor)] = tensor.detach().clone()
                else:
                    gathered[id(tensor)] = tensor.detach()
            out[name] = gathered[id(tensor)]
        return out

    def save_checkpoint(self, directory: Path) -> None:
        self._require().save_checkpoint(str(directory), tag=_TAG, save_latest=False)

    def load_checkpoint(self, directory: Path) -> None:
        path, _ = self._require().load_checkpoint(
            str(directory),
            tag=_TAG,
            load_module_strict=True,
            load_optimizer_states=True,
            load_lr_scheduler_states=True,
        )
        if path is None:
            raise ConfigError(
                "checkpoint",
                str(directory),
                "holds no DeepSpeed engine state",
                "load it with the backend, ZeRO stage and world size that saved it",
            )

    def _require(self) -> Any:
        if self._engine is None:
            raise ConfigError(
                "backend", "deepspeed", "is not prepared yet", "call prepare(module, ...) first"
            )
        return self._engine
