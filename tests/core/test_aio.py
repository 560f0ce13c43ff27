"""run_sync (one loop per thread, works under a running loop) and deadline scopes."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agentgym.core import AgentEnv, Observation, StepResult, deadline, run_sync, user
from agentgym.error import DeadlineExceeded


class LoopBoundEnv(AgentEnv):
    """Starts a task on the running loop in reset and awaits it in step.

    The task only finishes if step runs on the same loop that reset ran on.
    """

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        await super().areset(seed=seed, options=options)
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.worker = asyncio.create_task(self._work())
        return (user("started"),), {"tools": []}

    async def _work(self) -> None:
        await asyncio.sleep(0.01)
        await self.queue.put("answer from the reset-time task")

    async def astep(self, action: Any) -> StepResult:
        assert asyncio.get_running_loop() is self.loop
        async with deadline(2.0, "the reset-time task"):
            answer = await self.queue.get()
        return (user(answer),), 0.0, False, False, {}


def _episode() -> list[str]:
    env = LoopBoundEnv()
    obs, _ = env.reset(seed=0)
    step_obs, *_ = env.step("go")
    env.close()
    return [obs[0]["content"], step_obs[0]["content"]]


EXPECTED = ["started", "answer from the reset-time task"]


def test_a_resource_made_in_reset_is_usable_in_step() -> None:
    assert _episode() == EXPECTED


def test_sync_api_works_inside_a_running_event_loop() -> None:
    async def main() -> list[str]:
        return _episode()  # sync calls from async code: no "event loop is already running"

    assert asyncio.run(main()) == EXPECTED


def test_each_thread_keeps_its_own_loop_across_calls() -> None:
    async def current() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    here = {run_sync(current()) for _ in range(3)}
    assert len(here) == 1
    elsewhere: list[asyncio.AbstractEventLoop] = []
    thread = threading.Thread(
        target=lambda: elsewhere.extend(run_sync(current()) for _ in range(2))
    )
    thread.start()
    thread.join()
    assert len(set(elsewhere)) == 1
    assert elsewhere[0] not in here


def test_run_sync_returns_the_result_and_propagates_exceptions() -> None:
    async def boom() -> None:
        raise KeyError("x")

    async def seven() -> int:
        return 7

    assert run_sync(seven()) == 7
    with pytest.raises(KeyError):
        run_sync(boom())


def test_deadline_raises_deadline_exceeded_for_its_own_timeout() -> None:
    async def main() -> None:
        async with deadline(0.01, "the judge"):
            await asyncio.sleep(5)

    with pytest.raises(
        DeadlineExceeded, match=r"the judge did not finish within its 0\.01 s deadline"
    ):
        asyncio.run(main())


def test_a_timeout_error_from_the_body_passes_through_unchanged() -> None:
    own = TimeoutError("the server said so")

    async def main() -> None:
        async with deadline(5, "call"):
            raise own

    with pytest.raises(TimeoutError) as caught:
        asyncio.run(main())
    assert caught.value is own
    assert not isinstance(caught.value, DeadlineExceeded)


def test_inner_deadline_expiry_is_reported_by_the_inner_scope() -> None:
    async def main() -> None:
        async with deadline(5, "outer"), deadline(0.01, "inner"):
            await asyncio.sleep(5)

    with pytest.raises(DeadlineExceeded) as caught:
        asyncio.run(main())
    assert caught.value.what == "inner"


def test_no_deadline_when_seconds_is_none() -> None:
    async def main() -> str:
        async with deadline(None, "anything"):
            await asyncio.sleep(0.01)
        return "done"

    assert asyncio.run(main()) == "done"


def test_a_forked_child_gets_its_own_loop_and_leaves_the_parents_working() -> None:
    import os

    from agentgym.core import aio

    async def pid() -> int:
        await asyncio.sleep(0)
        return os.getpid()

    parent_loop = aio._thread_loop()
    assert aio.run_sync(pid()) == os.getpid()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        ok = aio._thread_loop() is not parent_loop and aio.run_sync(pid()) == os.getpid()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The child dropping its copy must not have unregistered the parent's self-pipe.
    assert aio._thread_loop() is parent_loop
    assert aio.run_sync(pid()) == os.getpid()
    assert aio.run_sync(asyncio.sleep(0.01, result="still works")) == "still works"


def test_tasks_left_on_the_main_threads_loop_are_cancelled_cleanly_at_exit() -> None:
    import subprocess
    import sys

    code = (
        "import asyncio\n"
        "from agentgym.core import aio\n"
        "async def park():\n"
        "    asyncio.get_running_loop().create_task(asyncio.Event().wait(), name='worker')\n"
        "aio.run_sync(park())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Task was destroyed" not in done.stderr
