"""scripts/gpu_check.py keeps working where no GPU is: it refuses without --allow-cpu, and at toy
size every section runs and lands in the JSON (the figures themselves need a GPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_it_refuses_without_a_gpu(tmp_path):
    out = tmp_path / "g.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "no CUDA device" in proc.stderr
    assert not out.exists()


@pytest.mark.slow  # ~150 CPU-s, one thread: 151 s alone on 2 cores, 304 s in CI's busy tail
@pytest.mark.timeout(1500)  # a hang catcher, as the subprocess's own: not the 300 s default
def test_every_section_runs_at_toy_size_on_the_cpu(tmp_path):
    out = tmp_path / "g.json"
    command = [sys.executable, str(SCRIPT), "--allow-cpu", "--tiny", "--out", str(out)]
    command += ["--model-dir", str(tmp_path / "model")]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=1500)
    report = json.loads(out.read_text())
    sections = report["sections"]
    failed = {k: v.get("error") for k, v in sections.items() if not v["ok"]}
    assert not failed, (failed, proc.stdout[-2000:])
    assert proc.returncode == 0
    assert set(sections) == {
        "model", "main_job", "ds_step", "logprobs", "generation", "grpo_step", "trl",
        "server_loop", "weight_sync",
    }  # fmt: skip
    assert sections["main_job"]["figures"]["updates"] == 1
    logprobs = sections["logprobs"]["figures"]
    assert logprobs["fp32_within_1e-4"] is True
    assert logprobs["fp32/static"]["decode"] == "static"
    assert sections["ds_step"]["figures"]["fp32"]["grpo-zero0"]["resumed_weight_gap"] == 0.0
    step = sections["grpo_step"]["figures"]
    assert step["engine_shares_weights"] is True
    assert step["update_tokens"] > 0
    assert sections["generation"]["figures"]["hfengine_static_tok_s"] > 0
    loop = sections["server_loop"]["figures"]
    assert loop["updates"] == 2
    assert loop["served_version"] == 2  # a push after each update
    assert loop["max_logprob_gap_vs_fp32"] < 1e-4
    sync = sections["weight_sync"]["figures"]
    assert sync["backend"] == "gloo"
    assert len(sync["push_s"]) == 3
    assert sync["max_logprob_gap"] < 1e-4  # fp32 on the CPU
