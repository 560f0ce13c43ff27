"""HFEngine leaves no task pending at interpreter exit, whichever loop served and closed it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_PROGRAM = textwrap.dedent(
    """
    import asyncio, sys, threading
    from agentgym import models
    from agentgym.core.aio import run_sync
    from agentgym.inference import HFEngine, SamplingParams

    model, tokenizer = models.load(seed=0)
    engine = HFEngine(model, tokenizer, seed=0, threads=1)
    sampling = SamplingParams(max_tokens=4)
    how = sys.argv[1]
    if how == "same-loop":  # what agentgym train and eval do
        print(len(run_sync(engine.generate([1, 2, 3], sampling)).token_ids) > 0)
        run_sync(engine.close())
    elif how == "other-thread":  # served on a thread's running loop, closed from the main one
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        done = asyncio.run_coroutine_threadsafe(engine.generate([1, 2, 3], sampling), loop)
        print(len(done.result().token_ids) > 0)
        run_sync(engine.close())
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
    elif how == "never-closed":  # its loop closed without cancelling what was left on it
        loop = asyncio.new_event_loop()
        print(len(loop.run_until_complete(engine.generate([1, 2, 3], sampling)).token_ids) > 0)
        loop.close()
        del engine, loop
    print("exit")
    """
)


@pytest.mark.parametrize("how", ["same-loop", "other-thread", "never-closed"])
def test_exit_leaves_no_pending_worker(how):
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", _PROGRAM, how],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "exit"]
    assert "Task was destroyed" not in done.stderr
    assert "was never awaited" not in done.stderr
