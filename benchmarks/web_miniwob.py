"""Web envs: agentgym/MiniWoB-v0 against BrowserGym's MiniWoB env, and the shop under load.

MiniWoB: the same task (``--task``, click-button by default) played by a scripted solution in
both envs, one after the other in this process, with the same Chromium: reset latency (median,
p90) and steps per second (env steps over the time spent in ``step``). BrowserGym's env is
``browsergym/miniwob.<task>`` from ``browsergym-miniwob``, its pages served from the installed
``miniwob`` package through ``MINIWOB_URL=file://...``; Playwright's launch is pointed at the
Chromium agentgym uses (BrowserGym has no option for the chat window's browser). Its solution
clicks the button named in the goal, found in its accessibility tree.

Shop (``--shop``, when ``agentgym.envs.web.shop`` is installed): ``agentgym/Web-v0`` stepped
through ``AgentVectorEnv`` at 1, 8 and 64 concurrent episodes (``--shop-envs``); each env
clicks the first link of its page, then goes back, and so on; steps per second and the peak RSS
of this process plus its Chromium processes.

    python benchmarks/web_miniwob.py                      # both parts, a few minutes
    python benchmarks/web_miniwob.py --no-shop --episodes 40 --bg-episodes 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

import gymnasium as gym
import psutil

import agentgym  # noqa: F401 (registers the ids)
from agentgym.envs.web.browser import chromium_path


@dataclass
class Timings:
    env: str
    resets_ms: list[float] = field(default_factory=list)
    steps_s: list[float] = field(default_factory=list)
    successes: int = 0
    episodes: int = 0

    def summary(self) -> dict[str, float]:
        resets = sorted(self.resets_ms)
        return {
            "reset_median_ms": statistics.median(resets),
            "reset_p90_ms": resets[min(len(resets) - 1, int(0.9 * len(resets)))],
            "steps_per_s": len(self.steps_s) / sum(self.steps_s),
            "success_rate": self.successes / max(1, self.episodes),
        }


def _play(
    timings: Timings,
    reset: Callable[[int], Any],
    step: Callable[[Any, list[str]], tuple[bool, bool]],
    episodes: int,
    warmup: int,
) -> None:
    """``episodes`` timed episodes after ``warmup`` untimed ones."""
    for index in range(warmup + episodes):
        start = time.perf_counter()
        state = reset(index)
        reset_s = time.perf_counter() - start
        history: list[str] = []
        steps: list[float] = []
        done = success = False
        while not done and len(history) < 8:
            start = time.perf_counter()
            done, success = step(state, history)
            steps.append(time.perf_counter() - start)
        if index >= warmup:
            timings.resets_ms.append(1000 * reset_s)
            timings.steps_s += steps
            timings.episodes += 1
            timings.successes += success


def bench_agentgym(task: str, episodes: int, warmup: int) -> Timings:
    from agentgym.envs.web.miniwob.oracle import solve

    env = gym.make("agentgym/MiniWoB-v0", task=task)
    timings = Timings("agentgym/MiniWoB-v0")
    instruction = {"text": ""}

    def reset(index: int) -> None:
        _, info = env.reset(seed=index)
        instruction["text"] = getattr(env.unwrapped, "instruction", None) or info["instruction"]

    def step(_: None, history: list[str]) -> tuple[bool, bool]:
        action = solve(task, instruction["text"], env.unwrapped.nodes, history)
        history.append(action)
        _, _, terminated, truncated, info = env.step(action)
        return terminated or truncated, bool(info.get("success"))

    try:
        _play(timings, reset, step, episodes, warmup)
    finally:
        env.close()
    return timings


def _use_chromium(executable: str) -> None:
    """Make every Playwright launch (BrowserGym's page and chat browsers) use ``executable``."""
    from playwright.sync_api import BrowserType

    launch = BrowserType.launch

    def patched(self: BrowserType, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("executable_path", executable)
        return launch(self, *args, **kwargs)

    BrowserType.launch = patched  # type: ignore[method-assign]


def bench_browsergym(task: str, episodes: int, warmup: int) -> Timings:
    html = resources.files("miniwob").joinpath("html", "miniwob")
    os.environ.setdefault("MINIWOB_URL", f"file://{html}/")
    import browsergym.miniwob  # noqa: F401 (registers browsergym/miniwob.*)
    from browsergym.utils.obs import flatten_axtree_to_str

    _use_chromium(chromium_path())
    env = gym.make(f"browsergym/miniwob.{task}")
    timings = Timings(f"browsergym/miniwob.{task}")
    state: dict[str, Any] = {}

    def reset(index: int) -> None:
        state["obs"], _ = env.reset(seed=index)

    def step(_: None, history: list[str]) -> tuple[bool, bool]:
        obs = state["obs"]
        target = re.findall(r'"([^"]*)"', obs["goal"])[0]
        tree = flatten_axtree_to_str(obs["axtree_object"])
        found = re.search(rf"\[(\w+)\] button '{re.escape(target)}'", tree)
        action = f'click("{found.group(1)}")' if found else "noop()"
        history.append(action)
        state["obs"], reward, terminated, truncated, _ = env.step(action)
        return terminated or truncated, reward > 0

    try:
        _play(timings, reset, step, episodes, warmup)
    finally:
        env.close()
    return timings


class PeakRSS:
    """Peak RSS of this process and its descendants (the Chromium processes), sampled."""

    def __init__(self, every: float = 0.2) -> None:
        self.peak = 0
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        me = psutil.Process()
        total = me.memory_info().rss
        for child in me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(self._every)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def bench_shop(num_envs: int, seconds: float) -> dict[str, Any]:
    from agentgym.vector import AgentVectorEnv

    def make() -> Any:
        return gym.make("agentgym/Web-v0").unwrapped

    venv = AgentVectorEnv([make for _ in range(num_envs)])
    with PeakRSS() as rss:
        try:
            venv.reset(seed=0)
            actions, steps, start = [], 0, time.perf_counter()
            while time.perf_counter() - start < seconds or steps == 0:
                actions = [_shop_action(env, steps) for env in venv.envs]
                venv.step(actions)
                steps += num_envs
            elapsed = time.perf_counter() - start
        finally:
            venv.close()
    return {"envs": num_envs, "steps_per_s": steps / elapsed, "peak_rss_mb": rss.peak / 2**20}


def _shop_action(env: Any, turn: int) -> str:
    if turn % 2:
        return "go_back()"
    links = [n for n in env.unwrapped.nodes if n.role == "link"]
    return f"click({links[0].id})" if links else 'scroll("down")'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="click-button")
    parser.add_argument("--episodes", type=int, default=40, help="agentgym episodes timed")
    parser.add_argument("--bg-episodes", type=int, default=10, help="BrowserGym episodes timed")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--shop", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--shop-envs", default="1,8,64")
    parser.add_argument("--shop-seconds", type=float, default=20.0)
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()

    ours = bench_agentgym(args.task, args.episodes, args.warmup)
    theirs = bench_browsergym(args.task, args.bg_episodes, args.warmup)
    result: dict[str, Any] = {"task": args.task, "chromium": chromium_path()}
    for timings in (ours, theirs):
        result[timings.env] = {**timings.summary(), "episodes": timings.episodes}
        print(f"{timings.env:32s} " + "  ".join(
            f"{k}={v:.3g}" for k, v in timings.summary().items()))
    a, b = ours.summary(), theirs.summary()
    result["steps_ratio"] = a["steps_per_s"] / b["steps_per_s"]
    result["reset_ratio"] = b["reset_median_ms"] / a["reset_median_ms"]
    print(f"steps/s ratio agentgym/BrowserGym: {result['steps_ratio']:.1f}x; "
          f"median reset {a['reset_median_ms']:.0f} ms vs {b['reset_median_ms']:.0f} ms "
          f"({result['reset_ratio']:.1f}x faster)")
    if args.shop:
        try:
            import agentgym.envs.web.shop  # noqa: F401
        except ImportError:
            print("shop: agentgym.envs.web.shop is not installed; skipped")
        else:
            result["shop"] = []
            for n in (int(x) for x in args.shop_envs.split(",")):
                row = bench_shop(n, args.shop_seconds)
                result["shop"].append(row)
                print(f"shop {n:3d} envs: {row['steps_per_s']:.1f} steps/s, "
                      f"peak RSS {row['peak_rss_mb']:.0f} MiB")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**result, "agentgym_timings": asdict(ours)}, f, indent=1)


if __name__ == "__main__":
    main()
