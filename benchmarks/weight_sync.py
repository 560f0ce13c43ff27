"""Weight sync to an inference server: files versus a process group, side by side in one run.

The model: Qwen2.5-0.5B's shape (24 layers, hidden 896, vocabulary 151,936, tied embeddings;
494M parameters) with random weights, in fp32 and in bf16. For each dtype an ``agentgym serve``
process serves it (``--dtype`` the same) and the trainer side, this process, pushes the same
weights to it ``--rounds`` times by each way, alternating:

- ``disk``: what ``weight_sync = "disk"`` does at each push: the policy written as a
  safetensors model directory (``save_pretrained``), then ``/update_weights_from_disk``
  (pause, load, flush, continue);
- ``group``: ``weight_sync = "group"`` over gloo: ``/update_weights_from_distributed`` per
  bucket (512 MiB, flattened) while the trainer broadcasts it, bracketed the same way; the
  checksum verification (both sides' digests of every tensor) is timed apart.

Reported: seconds per push (median of the rounds), its parts, and the calls the group made::

    .venv/bin/python benchmarks/weight_sync.py --rounds 3 --out weight_sync.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import torch

from agentgym.inference import SGLangEngine
from agentgym.models import load, tiny_config
from agentgym.trainers.group_sync import GroupSync

QWEN_05B = {
    "num_hidden_layers": 24,
    "hidden_size": 896,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
    "vocab_size": 151_936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32_768,
    "rms_norm_eps": 1e-6,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(model_dir: Path, dtype: str, log: Any) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    command = [sys.executable, "-m", "agentgym", "serve", "--model", str(model_dir)]
    command += ["--port", str(port), "--dtype", dtype]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise SystemExit(f"agentgym serve exited:\n{log.read().decode()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit("agentgym serve did not answer in 600 s")


async def _disk(engine: SGLangEngine, model: Any, tokenizer: Any, folder: Path) -> dict[str, float]:
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    written = time.perf_counter()
    await engine.update_weights(folder)
    done = time.perf_counter()
    return {"total_s": done - start, "write_s": written - start, "load_s": done - written}


async def _group(engine: SGLangEngine, sync: GroupSync, weights: dict) -> dict[str, float]:
    start = time.perf_counter()
    await sync.push(engine, weights)  # verify=False: the transfer and load alone
    pushed = time.perf_counter()
    await sync.check(engine, weights)
    return {"total_s": pushed - start, "verify_s": time.perf_counter() - pushed}


async def _side_by_side(url: str, model: Any, tokenizer: Any, rounds: int, work: Path) -> dict:
    engine = SGLangEngine(url, timeout=3600)
    sync = GroupSync(backend="gloo", verify=False)
    weights = model.state_dict()
    try:
        start = time.perf_counter()
        await sync.connect(engine)
        connect_s = time.perf_counter() - start
        disk, group = [], []
        for _ in range(rounds):
            disk.append(await _disk(engine, model, tokenizer, work / "weights"))
            calls = sync.calls
            group.append(await _group(engine, sync, weights))
            group[-1]["calls"] = sync.calls - calls
    finally:
        await engine.close()

    def median(runs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    return {
        "disk": {k: median(disk, k) for k in disk[0]},
        "group": {k: median(group, k) for k in group[0]},
        "group_connect_s": connect_s,
        "rounds": {"disk": disk, "group": group},
    }


def run(dtype: str, rounds: int) -> dict[str, Any]:
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    model, tokenizer = load(seed=0, config=tiny_config(**QWEN_05B), dtype=torch_dtype)
    params = sum(p.numel() for p in model.parameters())
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile() as log:
        work = Path(tmp)
        model.save_pretrained(work / "served", safe_serialization=True)
        tokenizer.save_pretrained(work / "served")
        served = "float32" if dtype == "fp32" else "bfloat16"
        process, url = _serve(work / "served", served, log)
        try:
            result = asyncio.run(_side_by_side(url, model, tokenizer, rounds, work))
        finally:
            process.terminate()
            process.wait(60)
    size = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    return {"dtype": dtype, "parameters": params, "state_dict_bytes": size, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    results = [run(dtype, args.rounds) for dtype in args.dtypes.split(",")]
    print("| dtype | disk: push (write + load) | group (gloo): push | group calls | verify |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in results:
        d, g = r["disk"], r["group"]
        print(
            f"| {r['dtype']} | {d['total_s']:.2f} s ({d['write_s']:.2f} + {d['load_s']:.2f}) "
            f"| {g['total_s']:.2f} s | {g['calls']:.0f} | {g['verify_s']:.2f} s |"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
