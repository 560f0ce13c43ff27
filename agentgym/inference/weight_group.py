"""Weights through a process group: SGLang's ``/init_weights_update_group`` and
``/update_weights_from_distributed``, both sides, plus the checksums that verify a sync.

The trainer is rank 0 of a new process group whose other ranks are the server's workers
(world size ``1 + tp``); the server joins when asked by ``/init_weights_update_group``
(``master_address``, ``master_port``, ``rank_offset``, ``world_size``, ``group_name``,
``backend``: ``"nccl"`` on GPUs, ``"gloo"`` on CPUs). The group is built on its own
``TCPStore``, apart from any default group the trainer already has (data parallelism).

A sync sends the policy in buckets (``plan_buckets``: tensors of one dtype, at most
``bucket_bytes`` each, 512 MiB by default): one ``/update_weights_from_distributed`` call per
bucket (``names``, ``dtypes``, ``shapes``), so a 0.5B model takes a few calls, not one per
parameter. With ``load_format="flattened_bucket"`` the bucket crosses as one broadcast of a
flat uint8 tensor, the tensors' bytes in ``names`` order (the layout of SGLang's
``FlattenedTensorBucket``); without it as one broadcast per tensor, in ``names`` order (what
SGLang's receiver does by default).

Verification: ``tensor_checksum`` is a 64-bit BLAKE2b digest of a tensor's bytes, dtype and
shape. A wrong, stale or truncated tensor changes its bytes, so its digest differs but with
probability 2^-64; unlike a sum or a norm (a fingerprint), it cannot be fooled by changes that
cancel out, or by two tensors swapped. ``agentgym serve`` answers ``/weights_checker``
``{"action": "checksum"}`` in SGLang's shape (``ranks[i].checksums``: name -> hex digest) with
these digests, and says so in ``checksum_algorithm``; SGLang's own digests (its
``tensor_hash``) are another function, see ``docs/weight_sync.md``.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agentgym.core.errors import ConfigError

__all__ = [
    "BACKENDS",
    "CHECKSUM_ALGORITHM",
    "DEFAULT_BUCKET_BYTES",
    "DEFAULT_GROUP_NAME",
    "DESTROY_WEIGHTS_UPDATE_GROUP",
    "FLATTENED",
    "INIT_WEIGHTS_UPDATE_GROUP",
    "UPDATE_WEIGHTS_FROM_DISTRIBUTED",
    "WEIGHTS_CHECKER",
    "Bucket",
    "WeightGroup",
    "checksum_response",
    "dtype_name",
    "init_group_request",
    "join_group",
    "parse_checksums",
    "parse_dtype",
    "plan_buckets",
    "receive_bucket",
    "send_bucket",
    "tensor_checksum",
    "update_request",
    "without_aliases",
]

INIT_WEIGHTS_UPDATE_GROUP = "/init_weights_update_group"
UPDATE_WEIGHTS_FROM_DISTRIBUTED = "/update_weights_from_distributed"
DESTROY_WEIGHTS_UPDATE_GROUP = "/destroy_weights_update_group"
WEIGHTS_CHECKER = "/weights_checker"

DEFAULT_GROUP_NAME = "weight_update_group"
DEFAULT_BUCKET_BYTES = 512 * 2**20
BACKENDS = ("gloo", "nccl")
FLATTENED = "flattened_bucket"
CHECKSUM_ALGORITHM = "blake2b-64"
"""What ``tensor_checksum`` computes; agentgym serve names it in its checksum answers."""


# -- buckets ----------------------------------------------------------------------------------


@dataclass
class Bucket:
    """Tensors of one dtype sent by one ``/update_weights_from_distributed`` call."""

    names: list[str] = field(default_factory=list)
    tensors: list[torch.Tensor] = field(default_factory=list)
    nbytes: int = 0

    @property
    def dtype(self) -> torch.dtype:
        return self.tensors[0].dtype


def plan_buckets(
    weights: Mapping[str, torch.Tensor], bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> list[Bucket]:
    """``weights`` in buckets of one dtype and at most ``bucket_bytes`` (a tensor larger than
    that gets a bucket of its own), in the mapping's order within a dtype."""
    if bucket_bytes < 1:
        raise ConfigError("bucket_bytes", bucket_bytes, "must be >= 1", "use e.g. 512 MiB")
    open_: dict[torch.dtype, Bucket] = {}
    done: list[Bucket] = []
    for name, tensor in weights.items():
        size = tensor.numel() * tensor.element_size()
        bucket = open_.get(tensor.dtype)
        if bucket is not None and bucket.nbytes + size > bucket_bytes:
            done.append(bucket)
            bucket = None
        if bucket is None:
            bucket = open_[tensor.dtype] = Bucket()
        bucket.names.append(name)
        bucket.tensors.append(tensor)
        bucket.nbytes += size
    return done + [b for b in open_.values() if b.names]


def without_aliases(weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``weights`` less each tensor that is another's very storage (tied embeddings: the
    server's model ties them too, so sending one loads both)."""
    seen: set[tuple[Any, ...]] = set()
    kept = {}
    for name, tensor in weights.items():
        key = (tensor.device, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride())
        if tensor.numel() and key in seen:
            continue
        seen.add(key)
        kept[name] = tensor
    return kept


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``, as SGLang's clients send dtypes."""
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: Any) -> torch.dtype:
    dtype = getattr(torch, str(name).removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ConfigError("dtypes", name, "is not a torch dtype", 'send e.g. "bfloat16"')
    return dtype


# -- requests ---------------------------------------------------------------------------------


def init_group_request(
    master_address: str,
    master_port: int,
    world_size: int,
    *,
    rank_offset: int = 1,
    group_name: str = DEFAULT_GROUP_NAME,
    backend: str = "gloo",
) -> dict[str, Any]:
    """The body of ``/init_weights_update_group`` (SGLang's ``InitWeightsUpdateGroupReqInput``)."""
    return {
        "master_address": master_address,
        "master_port": int(master_port),
        "rank_offset": int(rank_offset),
        "world_size": int(world_size),
        "group_name": group_name,
        "backend": backend,
    }


def update_request(
    bucket: Bucket,
    *,
    group_name: str = DEFAULT_GROUP_NAME,
    weight_version: int | None = None,
    flatten: bool = False,
    flush_cache: bool = True,
) -> dict[str, Any]:
    """The body of ``/update_weights_from_distributed`` for ``bucket``
    (``UpdateWeightsFromDistributedReqInput``)."""
    body: dict[str, Any] = {
        "names": list(bucket.names),
        "dtypes": [dtype_name(t.dtype) for t in bucket.tensors],
        "shapes": [list(t.shape) for t in bucket.tensors],
        "group_name": group_name,
        "flush_cache": flush_cache,
    }
    if weight_version is not None:
        body["weight_version"] = str(weight_version)
    if flatten:
        body["load_format"] = FLATTENED
    return body


# -- the group --------------------------------------------------------------------------------


@dataclass
class WeightGroup:
    """A process group of the trainer (rank 0) and a server's workers, with its store."""

    group: Any
    store: Any  # must outlive the group
    rank: int
    world_size: int
    backend: str

    def broadcast(self, tensor: torch.Tensor) -> None:
        """``tensor`` from rank 0 to every rank, in place; returns when it arrived."""
        self.group.broadcast(tensor, 0).wait()


def join_group(
    address: str, port: int, rank: int, world_size: int, backend: str, timeout: float
) -> WeightGroup:
    """This process as ``rank`` of a new process group (rank 0 hosts its ``TCPStore``).
    Blocks until all ``world_size`` ranks joined. Not the default group: a trainer's own
    data-parallel group is untouched."""
    import torch.distributed as dist

    if backend not in BACKENDS:
        raise ConfigError("backend", backend, "is not a weight-sync backend", f"use {BACKENDS}")
    wait = datetime.timedelta(seconds=timeout)
    store = dist.TCPStore(address, port, world_size, rank == 0, timeout=wait)
    prefixed = dist.PrefixStore("agentgym-weights", store)
    if backend == "nccl":
        group: Any = dist.ProcessGroupNCCL(prefixed, rank, world_size)
    else:
        group = dist.ProcessGroupGloo(prefixed, rank, world_size, wait)
    return WeightGroup(group, store, rank, world_size, backend)


def send_bucket(group: WeightGroup, bucket: Bucket, *, flatten: bool, device: Any = None) -> None:
    """Broadcast ``bucket`` from rank 0: one flat uint8 tensor (the tensors' bytes in order,
    the layout of SGLang's ``FlattenedTensorBucket``), or one tensor after another."""
    tensors = [t.detach() if device is None else t.detach().to(device) for t in bucket.tensors]
    if flatten:
        group.broadcast(torch.cat([_bytes(t) for t in tensors]))
        return
    for tensor in tensors:
        group.broadcast(tensor.contiguous())


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous().reshape(-1).view(torch.uint8)


def receive_bucket(
    group: WeightGroup,
    names: Sequence[str],
    dtypes: Sequence[torch.dtype],
    shapes: Sequence[Sequence[int]],
    *,
    flatten: bool,
    device: Any = "cpu",
) -> dict[str, torch.Tensor]:
    """What ``send_bucket`` sent, as named tensors."""
    received = {
        name: torch.empty(tuple(shape), dtype=dtype, device=device)
        for name, dtype, shape in zip(names, dtypes, shapes, strict=True)
    }
    if flatten:
        sizes = [t.numel() * t.element_size() for t in received.values()]
        buffer = torch.empty(sum(sizes), dtype=torch.uint8, device=device)
        group.broadcast(buffer)
        for tensor, part in zip(received.values(), buffer.split(sizes), strict=True):
            _bytes(tensor).copy_(part)
        return received
    for tensor in received.values():
        group.broadcast(tensor)
    return received


# -- checksums --------------------------------------------------------------------------------


def tensor_checksum(tensor: torch.Tensor) -> str:
    """A 64-bit BLAKE2b digest of ``tensor``'s dtype, shape and bytes, as 16 hex digits."""
    t = tensor.detach().to("cpu").contiguous()
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{dtype_name(t.dtype)}{list(t.shape)}".encode())
    digest.update(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
    return digest.hexdigest()


def checksum_response(
    state: Iterator[tuple[str, torch.Tensor]] | Mapping[str, torch.Tensor],
) -> dict[str, Any]:
    """``/weights_checker``'s checksum answer (SGLang's ``CheckWeightsReqOutput`` shape, one
    rank) with agentgym's digests; ``dtypes`` and ``checksum_algorithm`` are agentgym's."""
    items = state.items() if isinstance(state, Mapping) else state
    checksums: dict[str, str] = {}
    dtypes: dict[str, str] = {}
    for name, tensor in items:
        checksums[name] = tensor_checksum(tensor)
        dtypes[name] = dtype_name(tensor.dtype)
    overall = hashlib.sha256()
    for name in sorted(checksums):
        overall.update(name.encode())
        overall.update(checksums[name].encode())
    parallel = {"tp_rank": 0, "tp_size": 1, "dp_rank": 0, "dp_size": 1, "pp_rank": 0}
    parallel |= {"pp_size": 1, "rank": 0, "size": 1}
    return {
        "success": True,
        "message": f"checksums of {len(checksums)} tensors",
        "ranks": [
            {
                "checksums": checksums,
                "per_gpu_checksum": overall.hexdigest(),
                "parallelism_info": parallel,
                "dtypes": dtypes,
                "checksum_algorithm": CHECKSUM_ALGORITHM,
            }
        ],
    }


def parse_checksums(answer: Any) -> tuple[dict[str, str], dict[str, str], str | None]:
    """``(checksums, dtypes, algorithm)`` of a ``/weights_checker`` checksum answer, the ranks
    merged (a name in several tensor-parallel ranks keeps the first; ``algorithm`` is None
    when the server does not name agentgym's)."""
    ranks = answer.get("ranks") or answer.get("payload") if isinstance(answer, dict) else None
    if not isinstance(ranks, list):
        return {}, {}, None
    checksums: dict[str, str] = {}
    dtypes: dict[str, str] = {}
    algorithm = None
    for rank in ranks:
        if not isinstance(rank, dict):
            continue
        for name, value in (rank.get("checksums") or {}).items():
            checksums.setdefault(name, str(value))
        for name, value in (rank.get("dtypes") or {}).items():
            dtypes.setdefault(name, str(value))
        algorithm = algorithm or rank.get("checksum_algorithm")
    return checksums, dtypes, algorithm
