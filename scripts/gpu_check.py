"""One command for anyone with one GPU: does agentgym's GPU path work, and how fast is it?

::

    pip install -e '.[deepspeed]'        # '.[deepspeed,bench]' adds TRL's side by side
    make gpu-check                       # = python scripts/gpu_check.py --out gpu_check.json
    python scripts/gpu_check.py --allow-cpu --tiny --out /tmp/g.json   # toy sizes, any machine

Sections, each in a subprocess of its own with a time budget (``--budget name=seconds``): one
that fails or runs out of time records its error (and what it measured so far) and the others
still run. The defaults fit in about 9 minutes on an H100.

- ``model``: builds the Qwen2.5-0.5B-shaped random-weight model directory
  (``scripts/build_real_model.py``, an 8,192-token tokenizer; kept in ``--model-dir``);
- ``main_job``: ``agentgym train --env agentgym/FrozenLake-v0`` with its defaults: success before
  and after, the first update whose batch reached 0.9, wall time (and, if it runs out of time, the
  updates it did and their latest batch success);
- ``ds_step``: ``tests/trainers/ds_step.py`` (DeepSpeed ZeRO 0-3, GRPO and PPO, three steps and a
  resume) in bf16 and in fp32;
- ``logprobs``, ``generation``, ``grpo_step``: ``benchmarks/engine_gpu.py`` on that model
  (engine vs teacher-forced log-probs; tokens/s against transformers' static-cache compiled
  ``generate`` and the bandwidth bound; the GRPO step's generation / update / weight push split,
  peak memory and MFU);
- ``trl``: ``benchmarks/grpo_vs_trl.py`` on the same model and batch, when ``trl`` is installed;
- ``server_loop``: ``agentgym serve`` (bf16 on the GPU) in its own process and ``agentgym train
  --engine sglang`` against it for 4 updates (weights by disk after each), then the server's
  logprobs for a fixed prompt against a teacher-forced pass of the pushed weights;
- ``weight_sync``: the real-shape model served by ``agentgym serve``, three verified syncs
  through a process group (NCCL when a second GPU holds the server, else gloo), seconds per
  push and per verification, one push by disk beside them, the server's logprobs vs the
  trainer's.

Without CUDA it refuses (exit 2) unless ``--allow-cpu``; ``--tiny`` runs every section at toy
size (what the tests run, to keep this script working).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUDGETS = {
    "model": 90,
    "main_job": 170,
    "ds_step": 100,
    "logprobs": 45,
    "generation": 100,
    "grpo_step": 60,
    "trl": 90,
    "server_loop": 90,
    "weight_sync": 90,
}
"""Seconds per section on a GPU (about 9 minutes in all, the model built once)."""
TINY_MODEL = [
    "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
    "--intermediate", "128", "--vocab", "1024", "--tokenizer-vocab", "600",
    "--corpus-bytes", "100000", "--dtype", "fp32",
]  # fmt: skip
FULL_MODEL = ["--tokenizer-vocab", "8192", "--corpus-bytes", "4000000"]


class Section:
    """What a section's subprocess records, written to its file as it goes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.figures: dict[str, Any] = {}

    def record(self, **figures: Any) -> None:
        self.figures.update(figures)
        self.path.write_text(json.dumps(self.figures, default=str))


def _run(command: list[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        head = " ".join(command[:4])
        raise RuntimeError(f"{head}... exit {proc.returncode}: {proc.stderr[-1500:]}")
    return proc


def section_model(out: Section, args: argparse.Namespace) -> None:
    model_dir = Path(args.model_dir)
    if (model_dir / "config.json").is_file() and (model_dir / "tokenizer.json").is_file():
        out.record(model_dir=str(model_dir), built=False)
        return
    shape = TINY_MODEL if args.tiny else FULL_MODEL
    _run([sys.executable, "scripts/build_real_model.py", "--out", str(model_dir), *shape])
    out.record(model_dir=str(model_dir), built=True)


def _latest(run: Path) -> dict[str, Any]:
    metrics = run / "metrics.jsonl"
    lines = metrics.read_text().splitlines() if metrics.is_file() else []
    if not lines:
        return {"updates": 0}
    last = json.loads(lines[-1])
    return {"updates": len(lines), "latest_batch_success": last.get("success_rate")}


def section_main_job(out: Section, args: argparse.Namespace) -> None:
    run = Path(tempfile.mkdtemp(prefix="gpu-check-main-")) / "run"
    command = [sys.executable, "-m", "agentgym", "train", "--env", "agentgym/FrozenLake-v0"]
    command += ["--out", str(run), "--no-progress"]
    if args.tiny:
        command += ["--steps", "1", "--set", "group_size=2", "--set", "batch_size=4"]
        command += ["--max-turns", "4", "--eval-episodes", "2"]
    out.record(command=" ".join(command[1:]))
    start = time.perf_counter()
    log = run.parent / "train.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
        while proc.poll() is None:  # progress, kept if the budget ends the run
            time.sleep(1)
            out.record(wall_s=time.perf_counter() - start, **_latest(run))
    if proc.returncode:
        tail = log.read_text(errors="replace")[-1500:]
        raise RuntimeError(f"agentgym train exit {proc.returncode}: {tail}")
    summary = json.loads((run / "summary.json").read_text())
    out.record(
        wall_s=time.perf_counter() - start,
        success_before=(summary.get("start") or {}).get("success_rate"),
        success_after=(summary.get("end") or {}).get("success_rate"),
        first_batch_success_0_9=summary.get("first_batch_success_0.9"),
        **_latest(run),
    )


def section_ds_step(out: Section, args: argparse.Namespace) -> None:
    if args.tiny:
        stages, precisions = ["0"], ["fp32"]
    else:
        stages, precisions = ["0", "1", "2", "3"], ["bf16", "fp32"]
    for precision in precisions:
        folder = Path(tempfile.mkdtemp(prefix=f"gpu-check-ds-{precision}-"))
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1"]
        command += ["tests/trainers/ds_step.py", "--out", str(folder), "--stages", *stages]
        command += ["--precision", precision] + (["--algos", "grpo"] if args.tiny else [])
        started = time.perf_counter()
        _run(command)
        results = json.loads((folder / "results.json").read_text())
        figures = {
            name: {
                "losses": [step.get("loss") for step in value["steps"]],
                "resumed_weight_gap": value["resumed_weight_gap"],
            }
            for name, value in results.items()
            if isinstance(value, dict)
        }
        out.record(**{precision: {"seconds": time.perf_counter() - started, **figures}})


def section_engine(name: str) -> Any:
    def run(out: Section, args: argparse.Namespace) -> None:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import engine_gpu

        out.record(**engine_gpu.SECTIONS[name](args.model_dir, args.tiny))

    return run


def section_trl(out: Section, args: argparse.Namespace) -> None:
    if importlib.util.find_spec("trl") is None:
        out.record(skipped="trl is not installed (pip install -e '.[bench]')")
        return
    shape = ["2", "2", "8", "1", "0"] if args.tiny else ["8", "8", "256", "2", "1"]
    result = Path(tempfile.mkdtemp(prefix="gpu-check-trl-")) / "trl.json"
    command = [sys.executable, "benchmarks/grpo_vs_trl.py", "--model", args.model_dir]
    for flag, value in zip(
        ["--prompts", "--group-size", "--max-new-tokens", "--repeats", "--warmup"],
        shape,
        strict=True,
    ):
        command += [flag, value]
    _run([*command, "--out", str(result)])
    figures = json.loads(result.read_text())
    out.record(**figures)
    sides = [figures.get(s, {}).get("step_s") for s in ("agentgym", "trl")]
    if all(isinstance(s, float) and s > 0 for s in sides):
        out.record(trl_over_agentgym_step=sides[1] / sides[0])


SERVER_PROMPT = [5, 17, 230, 41, 9, 88, 3]


def _serve(
    tmp: Path, cuda: bool, command: list[str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """``agentgym serve`` (the tiny policy, bf16 on the GPU; or ``command``) in its own process,
    once ready."""
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    if command is None:
        command = [sys.executable, "-m", "agentgym", "serve"]
        command += ["--device", "cuda", "--dtype", "bfloat16"] if cuda else []
    command = [*command, "--port", str(port)]
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115 (open while the server runs)
    proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"agentgym serve exited: {(tmp / 'serve.log').read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)


def _server_gap(url: str, weights: Path, cuda: bool) -> dict[str, Any]:
    """The server's greedy logprobs for SERVER_PROMPT against a teacher-forced pass of the
    weights the trainer pushed last (in the server's dtype and in fp32)."""
    import asyncio

    import torch
    from transformers import AutoModelForCausalLM

    from agentgym.inference.base import SamplingParams
    from agentgym.inference.sglang import SGLangEngine

    async def ask() -> Any:
        engine = SGLangEngine(url)
        try:
            params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
            completion = await engine.generate(SERVER_PROMPT, params)
            return completion, await engine.server_weight_version()
        finally:
            await engine.close()

    completion, version = asyncio.run(ask())
    figures: dict[str, Any] = {"served_version": version, "pushed": weights.name}
    device = "cuda" if cuda else "cpu"
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        if name == "bf16" and not cuda:
            continue
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=dtype).to(device).eval()
        ids = torch.tensor([SERVER_PROMPT + completion.token_ids], device=device)
        with torch.no_grad():
            logits = model(ids).logits[0, len(SERVER_PROMPT) - 1 : -1].float()
        expected = torch.log_softmax(logits, -1).gather(-1, ids[0, len(SERVER_PROMPT) :, None])
        pairs = zip(completion.logprobs, expected[:, 0].tolist(), strict=True)
        gaps = [abs(a - b) for a, b in pairs]
        figures[f"max_logprob_gap_vs_{name}"] = max(gaps)
    return figures


def section_server_loop(out: Section, args: argparse.Namespace) -> None:
    """``agentgym serve`` in its own process and ``agentgym train --engine sglang`` against it
    (weights pushed by disk after every update), then the server's logprobs vs the pushed
    weights."""
    import torch

    cuda = torch.cuda.is_available()
    tmp = Path(tempfile.mkdtemp(prefix="gpu-check-server-"))
    server, url = _serve(tmp, cuda)
    try:
        steps = 2 if args.tiny else 4
        run = tmp / "run"
        command = [sys.executable, "-m", "agentgym", "train", "--env", "agentgym/FrozenLake-v0"]
        command += ["--engine", "sglang", "--engine-url", url, "--steps", str(steps)]
        command += ["--no-action-choices", "--eval-episodes", "0", "--no-progress"]
        command += ["--checkpoint-every", str(steps), "--out", str(run)]
        if args.tiny:
            command += ["--set", "group_size=2", "--set", "batch_size=4", "--max-turns", "2"]
        out.record(command=" ".join(command[1:]))
        started = time.perf_counter()
        _run(command)
        metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        out.record(
            wall_s=time.perf_counter() - started,
            updates=len(metrics),
            step_s=[m.get("step_s") for m in metrics],
            batch_success=[m.get("success_rate") for m in metrics],
        )
        pushed = sorted((run / "weights").glob("step-*"))[-1]
        out.record(**_server_gap(url, pushed, cuda))
    finally:
        server.kill()
        server.wait(30)


def section_weight_sync(out: Section, args: argparse.Namespace) -> None:
    """The real-shape model served by ``agentgym serve`` in its own process, and weights pushed
    to it through a process group (``weight_sync = "group"``): NCCL with the server on a second
    GPU (NCCL refuses two ranks on one device), else gloo; three verified syncs, their seconds,
    a push by disk beside them, and the server's greedy logprobs against the trainer's."""
    import asyncio

    import torch

    from agentgym.inference.base import SamplingParams
    from agentgym.inference.sglang import SGLangEngine
    from agentgym.models import load
    from agentgym.trainers.group_sync import GroupSync

    cuda = torch.cuda.is_available()
    nccl = cuda and torch.cuda.device_count() >= 2
    dtype = torch.bfloat16 if cuda else torch.float32
    out.record(backend="nccl" if nccl else "gloo", two_gpus=nccl)
    tmp = Path(tempfile.mkdtemp(prefix="gpu-check-sync-"))
    command = [sys.executable, "-m", "agentgym", "serve", "--model", args.model_dir]
    command += ["--device", "cuda:1" if nccl else "cuda", "--dtype", "bfloat16"] if cuda else []
    server, url = _serve(tmp, cuda, command)
    try:
        model, _ = load(args.model_dir, dtype=dtype, device="cuda:0" if cuda else "cpu")
        with torch.no_grad():  # not the served weights: the first sync must change them all
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.01)

        async def syncs() -> dict[str, Any]:
            engine = SGLangEngine(url, timeout=1800)
            sync = GroupSync(backend="nccl" if nccl else "gloo")
            figures: dict[str, Any] = {"push_s": [], "verify_s": []}
            try:
                for _ in range(3):
                    start = time.perf_counter()
                    sync.verify = False
                    await sync.push(engine, model.state_dict())
                    pushed = time.perf_counter()
                    await sync.check(engine, model.state_dict())
                    figures["push_s"].append(pushed - start)
                    figures["verify_s"].append(time.perf_counter() - pushed)
                figures["calls_per_sync"] = sync.calls // 3
                start = time.perf_counter()
                model.save_pretrained(tmp / "disk")
                await engine.update_weights(tmp / "disk")
                figures["disk_push_s"] = time.perf_counter() - start
                params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
                figures["completion"] = await engine.generate(SERVER_PROMPT, params)
            finally:
                await engine.close()
            return figures

        figures = asyncio.run(syncs())
        completion = figures.pop("completion")
        out.record(**figures)
        ids = torch.tensor([SERVER_PROMPT + completion.token_ids], device=model.device)
        with torch.no_grad():
            logits = model(ids).logits[0, len(SERVER_PROMPT) - 1 : -1].float()
        expected = torch.log_softmax(logits, -1).gather(-1, ids[0, len(SERVER_PROMPT) :, None])
        pairs = zip(completion.logprobs, expected[:, 0].tolist(), strict=True)
        gaps = [abs(a - b) for a, b in pairs]
        out.record(max_logprob_gap=max(gaps))
    finally:
        server.kill()
        server.wait(30)


SECTIONS = {
    "model": section_model,
    "main_job": section_main_job,
    "ds_step": section_ds_step,
    "logprobs": section_engine("logprobs"),
    "generation": section_engine("generation"),
    "grpo_step": section_engine("grpo_step"),
    "trl": section_trl,
    "server_loop": section_server_loop,
    "weight_sync": section_weight_sync,
}


def run_section(name: str, args: argparse.Namespace, budget: float) -> dict[str, Any]:
    """``name`` in a subprocess of its own session, killed with its children at ``budget``."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        command = [sys.executable, __file__, "--section", name, "--result", str(result)]
        command += ["--model-dir", args.model_dir] + (["--tiny"] if args.tiny else [])
        command += ["--allow-cpu"] if args.allow_cpu else []
        start = time.perf_counter()
        proc = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, text=True,
        )  # fmt: skip
        try:
            log, _ = proc.communicate(timeout=budget)
            error = None if proc.returncode == 0 else log[-2000:]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            error = f"ran out of its {budget:.0f} s budget"
        figures = json.loads(result.read_text()) if result.is_file() else {}
    return {
        "ok": error is None,
        "seconds": round(time.perf_counter() - start, 1),
        **({"error": error} if error else {}),
        "figures": figures,
    }


def _budgets(pairs: list[str], tiny: bool) -> dict[str, float]:
    # toy sizes: the budgets only stop a hang (a loaded 2-core machine is slow to import torch)
    budgets = {k: (300.0 if tiny else float(v)) for k, v in BUDGETS.items()}
    for pair in pairs:
        name, _, seconds = pair.partition("=")
        if name not in budgets or not seconds.replace(".", "", 1).isdigit():
            raise SystemExit(f"--budget {pair!r}: use NAME=SECONDS, NAME one of {list(budgets)}")
        budgets[name] = float(seconds)
    return budgets


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_check.json", help="the JSON of figures")
    parser.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    parser.add_argument("--model-dir", help="the real-shape model (built there if missing)")
    parser.add_argument("--budget", action="append", default=[], metavar="NAME=SECONDS")
    parser.add_argument("--allow-cpu", action="store_true", help="run without CUDA")
    parser.add_argument("--tiny", action="store_true", help="every section at toy size")
    parser.add_argument("--section", choices=list(SECTIONS), help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.model_dir is None:
        name = "real-shape-tiny" if args.tiny else "qwen2.5-0.5b-shape"
        args.model_dir = str(Path(tempfile.gettempdir()) / "agentgym-gpu-check" / name)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.section:  # a child: one section
        SECTIONS[args.section](Section(Path(args.result)), args)
        return 0
    import torch

    if not torch.cuda.is_available() and not args.allow_cpu:
        print("gpu_check: no CUDA device (torch sees none). Fix: run it on a machine with a GPU "
              "and a CUDA build of torch, or pass --allow-cpu --tiny to check the script itself.",
              file=sys.stderr)  # fmt: skip
        return 2
    budgets = _budgets(args.budget, args.tiny)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    report: dict[str, Any] = {"device": device, "torch": torch.__version__, "tiny": args.tiny}
    report["sections"] = {}
    sections = ["model", *(s for s in args.sections if s != "model")]
    for name in sections:
        print(f"gpu_check: {name} (budget {budgets[name]:.0f} s)...", flush=True)
        report["sections"][name] = result = run_section(name, args, budgets[name])
        print(f"  {'ok' if result['ok'] else 'FAILED'} in {result['seconds']} s", flush=True)
        Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    print(f"gpu_check: figures in {args.out}")
    return 0 if all(r["ok"] for r in report["sections"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
