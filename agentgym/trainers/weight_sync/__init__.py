"""Weights to an inference server by disk, and the policy version of every sample.

An engine in the trainer's process (``HFEngine``, placed by ``colocate``) gets the policy's
tensors after each update. A server (SGLang, or ``agentgym serve``, which speaks SGLang's native
API) cannot: ``attach_server`` wraps its engine in a ``ServerPolicy`` that, at each push,

1. writes the policy (``Trainer.policy_state_dict()``: LoRA merged, ZeRO-3 gathered) as a
   transformers model directory of safetensors, ``<weights_dir>/step-<n>``, atomically (a
   temporary folder renamed), keeping the newest ``keep`` of them;
2. has the server load it (``engine.update_weights(path)``: SGLang's pause, update from disk,
   flush cache, continue);
3. tags the new weights policy version ``n = trainer.step_count``: an ``SGLangEngine`` names
   the update ``n`` (SGLang's ``weight_version``), so the server reports the trainer's version
   with every completion; another engine's own count is mapped to it.

Attaching pushes at once, so the server samples the trainer's policy whatever it was started
with; ``Trainer.load`` pushes again on resume. With data-parallel ranks sharing servers,
rank 0 writes and pushes while the others wait for it. Completions carry the trainer's version
(weights the trainer never pushed map to None), and
``Trainer.step`` refuses a batch holding a sample of version None or of a version this trainer
did not push (``UnknownPolicyVersion``); the versions pushed are kept in ``trainer.state``
(``pushed_versions``), so a resumed run knows those of the batches its checkpoint persisted.

A push never lands inside a completion: asynchronous training (``max_staleness`` >= 1)
generates from a background thread while the main thread updates and pushes. Every call to the
server runs on one event loop of the ``ServerPolicy``'s own (its HTTP client is bound to a
loop), and a push first holds new completions and waits for those running (on every rank, then
a barrier), so each completion, hence each turn, was sampled by one version, the one it records.
Only the load is held: the model directory is written while generation goes on.

With ``sync=GroupSync(...)`` (``agentgym.trainers.group_sync``) steps 1-2 go through a process
group instead of files (NCCL on GPUs, gloo on CPUs; buckets of flattened tensors), and every
sync is verified by a checksum of each tensor on both sides.

Several servers (a list of engines): a ``Router`` (``agentgym.inference.routing``) pins each
episode to one server and sends new ones to the least loaded; every push loads on each server
(one process group per server with ``sync``: a dead server breaks its own group only). A server
that cannot be reached while generating is marked down: the episode of that call ends as an
infrastructure failure (``EpisodeLost``) and the run goes on with the others; the server is
probed and taken back once it answers, after loading the current weights (between pushes by
disk from a single process; else at the next push, which rank 0 makes and every rank hears of).

A server that fails to load the weights at the start, or when no other holds them, or no server
left to generate, stops the run with ``InferenceServerError`` naming each URL: the last
checkpoint is untouched, and ``--resume`` continues from it once the servers are back.

::

    engine = attach_server(trainer, SGLangEngine("http://127.0.0.1:30000"), "runs/r1/weights")
    engine = attach_server(trainer, [SGLangEngine(a), SGLangEngine(b)], "runs/r1/weights")

The package, by what each module owns: ``engines`` (which engines can be pushed to, a server's
URL, the errors), ``servers`` (``ServerSet``: the servers' state, the event loop every call to
them runs on, loading weights into one server), ``routing`` (``RoutedServers``: completions
routed over the servers, servers marked down, probed and taken back, the hold a push puts on
generation) and ``policy`` (``ServerPolicy``: pushes to every server, policy versions;
``attach_server``).
"""

from agentgym.trainers.weight_sync.engines import (
    InferenceServerError,
    UnknownPolicyVersion,
    check_trainable_engine,
    in_process,
)
from agentgym.trainers.weight_sync.policy import ServerPolicy, attach_server, check_versions
from agentgym.trainers.weight_sync.servers import PushingTrainer

__all__ = [
    "InferenceServerError",
    "PushingTrainer",
    "ServerPolicy",
    "UnknownPolicyVersion",
    "attach_server",
    "check_trainable_engine",
    "check_versions",
    "in_process",
]
