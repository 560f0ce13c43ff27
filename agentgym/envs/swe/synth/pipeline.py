"""``synthesize(repo, out)``: validated SWE-v0 tasks from a local git repository, offline.

1. The repository's ``HEAD`` is checked out into sandboxes of the local SWE backend
   (bubblewrap). pytest collects the tests (``test_cmd`` narrows it); the suite runs twice and
   only the tests that passed both times count (failing and flaky tests are left out).
2. Bugs are injected one at a time into the functions and methods of the package's source
   files (not tests, not ``setup.py`` / ``conftest.py``): ``mutate.mutations``, picked with
   ``seed``.
3. Each candidate runs the suite in a sandbox: only the test files whose tests ran the mutated
   function in a traced clean run (``select``: the other tests run the same code with the bug
   as without it), or the whole suite with ``full_suite`` or where that argument does not hold.
   Valid when no test file fails to collect, the run ends in time, at least one stable test
   fails (``FAIL_TO_PASS``) and one still passes (``PASS_TO_PASS``), and the clean code, run
   again, passes every ``FAIL_TO_PASS`` test. A bug that fails more than ``max_fail_fraction``
   of the suite (the package no longer imports) is rejected as trivial; one with the same file,
   function and failing tests as an earlier one as a duplicate. ``combine`` > 1 also tries bugs
   of 2 or 3 functions of one file together (validated the same way).
4. Each valid bug becomes a task (``package``): a bundle of a one-commit repository of the
   buggy tree, the gold patch, and a bug report written from the failing tests
   (``statements``), in ``tasks.jsonl``, ``train.jsonl`` and ``test.jsonl`` (split by source
   file).

Interrupted runs resume: every candidate's verdict is appended to ``candidates.jsonl`` in the
output folder, and the baseline is kept in ``baseline.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import itertools
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agentgym.core.aio import run_sync
from agentgym.core.errors import ConfigError, SandboxError
from agentgym.envs.swe.grader import changed_lines
from agentgym.envs.swe.instances import SWEInstance
from agentgym.envs.swe.repo import git as host_git
from agentgym.envs.swe.synth.mutate import Mutation, apply_edits, mutations, pick
from agentgym.envs.swe.synth.package import build_task_repo, export_tree, split_by_file
from agentgym.envs.swe.synth.select import Trace, trace_suite
from agentgym.envs.swe.synth.statements import problem_statement
from agentgym.envs.swe.synth.suite import (
    SuiteRun,
    collect,
    failure_messages,
    install_runner,
    pytest_args,
    reset_repo,
    run_suite,
)
from agentgym.envs.swe.tampering import scan_diff
from agentgym.sandbox import Sandbox

__all__ = ["SynthResult", "synthesize"]

STATE_FILE = "candidates.jsonl"
BASELINE_FILE = "baseline.json"
MAX_GRADED = 200
"""At most this many tests (``FAIL_TO_PASS`` and ``PASS_TO_PASS``) per task (``_pass_to_pass``)."""
_SKIP_PARTS = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "scripts"}
_SKIP_NAMES = {"setup.py", "conftest.py", "noxfile.py", "tasks.py", "__main__.py", "_version.py"}
COMPARISON_METHODS = frozenset(
    {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__len__",
     "__contains__", "__hash__"}
)  # fmt: skip
"""A fix inside one of these makes the grader compare the class's objects by their attributes
(``runner_compare``: a diff could forge them), not by the tests' own ``==``: such a bug's gold
patch can fail its own tests, so it is no task (verdict ``comparison_method``)."""


@dataclass
class SynthResult:
    """What a synthesis run made, and the counts of its candidates' verdicts."""

    out: Path
    tasks: list[dict[str, Any]]
    stable_tests: int
    left_out_tests: dict[str, str]
    """Test id -> why it is not used (``failed`` or ``flaky`` on the clean code)."""
    verdicts: dict[str, int]
    """Verdict -> number of candidates (``valid``, ``no_failing_test``, ``duplicate``, ...)."""
    candidates: int
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> int:
        return len(self.tasks)


def synthesize(
    repo: str | Path,
    out: str | Path,
    *,
    test_cmd: str | None = None,
    max_candidates: int | None = 100,
    seed: int = 0,
    workers: int | None = None,
    timeout: float = 120.0,
    combine: int = 0,
    test_fraction: float = 0.2,
    max_fail_fraction: float = 0.5,
    sources: list[str] | None = None,
    isolation: str = "auto",
    full_suite: bool = False,
    progress: TextIO | None = sys.stderr,
) -> SynthResult:
    """Synthesize validated SWE-v0 tasks from the git repository ``repo`` into folder ``out``.

    Args:
        repo: a local git work tree (its ``HEAD`` commit is used; uncommitted changes are not).
        out: the output folder (created; a second run with the same settings resumes).
        test_cmd: ``"pytest ARGS"``: which tests to collect and run (default: pytest's own
            discovery from the repository's root and configuration).
        max_candidates: how many single bugs to try (``None``: every one found).
        seed: picks the candidates, the report templates and the split.
        workers: sandboxes validating in parallel (default: the CPU count, at most 8).
        timeout: seconds one run of the suite may take.
        combine: when 2 or 3, also try that many validated bugs of different functions of one
            file together (at most one combined task per valid bug); 0: none.
        test_fraction: the share of source files whose tasks go to ``test.jsonl``.
        max_fail_fraction: a bug failing more than this share of the stable tests is trivial.
        sources: repository paths (files or folders) to inject bugs into (default: every
            tracked ``.py`` file outside test, doc and example folders).
        isolation: the local backend's ``isolation`` (``"none"`` runs the repository's code
            unisolated: only when you ask for it by name).
        full_suite: run every stable test for every candidate, instead of the test files
            that ran the mutated function (the same verdicts, slower).
        progress: where progress lines go (``None``: nowhere).

    Raises ``ConfigError`` naming the fix for a bad argument, a path that is not a git
    repository, a suite pytest finds no test in, or one in which no test passes.
    """
    _check_numbers(max_candidates, workers, timeout, combine, test_fraction, max_fail_fraction)
    root = _git_root(repo)
    try:
        args = pytest_args(test_cmd)
    except ValueError:
        raise ConfigError(
            "test_cmd", test_cmd, "must be a pytest command", "write e.g. 'pytest tests/ -k fast'"
        ) from None
    out = Path(out).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    n = workers or min(8, os.cpu_count() or 1)
    job = _Job(root, out, args, seed, timeout, max_fail_fraction, progress)
    job.full_suite = full_suite
    return run_sync(job.run(n, max_candidates, combine, test_fraction, sources, isolation))


def _check_numbers(
    max_candidates: int | None,
    workers: int | None,
    timeout: float,
    combine: int,
    test_fraction: float,
    max_fail_fraction: float,
) -> None:
    if max_candidates is not None and max_candidates < 1:
        raise ConfigError("max_candidates", max_candidates, "must be >= 1", "pass e.g. 100")
    if workers is not None and workers < 1:
        raise ConfigError("workers", workers, "must be >= 1", "pass e.g. 2, or leave it out")
    if not timeout > 0:
        raise ConfigError("timeout", timeout, "must be > 0 seconds", "pass e.g. 120")
    if combine not in (0, 1, 2, 3):
        raise ConfigError("combine", combine, "must be 0, 2 or 3", "pass 2 for pairs of bugs")
    if not 0 <= test_fraction < 1:
        raise ConfigError("test_fraction", test_fraction, "must be in [0, 1)", "pass e.g. 0.2")
    if not 0 < max_fail_fraction <= 1:
        raise ConfigError("max_fail_fraction", max_fail_fraction, "must be in (0, 1]", "0.5")


def _git_root(repo: str | Path) -> Path:
    path = Path(repo).expanduser()
    if not path.exists():
        raise ConfigError(
            "repo", str(repo), "does not exist", "pass the folder of a git repository"
        )
    if not path.is_dir():
        raise ConfigError("repo", str(repo), "is not a folder", "pass the repository's folder")
    try:
        top = host_git("rev-parse", "--show-toplevel", cwd=path).strip()
    except SandboxError:
        raise ConfigError(
            "repo",
            str(repo),
            "is not a git repository",
            "run `git init && git add -A && git commit -m base` in it, or pass its git root",
        ) from None
    try:
        host_git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=Path(top))
    except SandboxError:
        raise ConfigError(
            "repo", str(repo), "has no commit", "commit the code: git add -A && git commit"
        ) from None
    return Path(top).resolve()


def _is_source(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    if not name.endswith(".py") or name in _SKIP_NAMES:
        return False
    if name.startswith("test_") or name.endswith("_test.py") or name == "tests.py":
        return False
    return not any(part in _SKIP_PARTS or part.startswith(".") for part in parts[:-1])


@dataclass
class _Baseline:
    commit: str
    args: list[str]
    stable: list[str]
    left_out: dict[str, str]
    traced: bool = False
    trace: dict[str, list[str]] | None = None
    """``select.Trace.files`` of a traced clean run; ``None`` when it could not be used."""


class _Job:
    def __init__(
        self,
        root: Path,
        out: Path,
        args: list[str],
        seed: int,
        timeout: float,
        max_fail_fraction: float,
        progress: TextIO | None,
    ) -> None:
        self.root, self.out, self.args, self.seed = root, out, args, seed
        self.timeout, self.max_fail_fraction, self.progress = timeout, max_fail_fraction, progress
        self.commit = host_git("rev-parse", "HEAD", cwd=root).strip()
        self.name = root.name
        self.done: dict[str, dict[str, Any]] = {}
        self.sources: dict[str, str] = {}
        self.started = time.monotonic()
        self._lock = asyncio.Lock()
        self.full_suite = False
        self.trace: Trace | None = None

    # -- progress and state ---------------------------------------------------------------

    def say(self, text: str) -> None:
        if self.progress is not None:
            elapsed = time.monotonic() - self.started
            print(f"[synth {elapsed:6.0f}s] {text}", file=self.progress, flush=True)

    def load_state(self) -> None:
        path = self.out / STATE_FILE
        if not path.is_file():
            return
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                record = json.loads(line)
                if record["commit"] == self.commit and record["args"] == self.args:
                    self.done[record["key"]] = record

    async def record(self, record: dict[str, Any]) -> None:
        async with self._lock:
            self.done[record["key"]] = record
            with (self.out / STATE_FILE).open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    # -- the run --------------------------------------------------------------------------

    async def run(
        self,
        n: int,
        max_candidates: int | None,
        combine: int,
        test_fraction: float,
        sources: list[str] | None,
        isolation: str,
    ) -> SynthResult:
        from agentgym.envs.swe.backends.local import LocalSWEBackend

        backend = LocalSWEBackend(isolation=isolation)
        base = SWEInstance(
            instance_id=f"{self.name}-synth-base",
            repo=self.name,
            repo_path=self.root,
            base_commit=self.commit,
            problem_statement="(synthesis baseline)",
            test_patch="",
            patch=None,
            fail_to_pass=("-",),
            pass_to_pass=(),
        )
        try:
            sandboxes = list(await asyncio.gather(*(backend.acquire(base) for _ in range(n))))
            for sandbox in sandboxes:
                await install_runner(sandbox)
            baseline = await self.baseline(sandboxes)
            if not self.full_suite:
                self.trace = await self.traced(sandboxes[0], baseline)
            self.load_state()
            singles = self.candidates(max_candidates, sources)
            self.say(
                f"{len(baseline.stable)} stable tests ({len(baseline.left_out)} left out); "
                f"{len(singles)} candidates, {sum(k in self.done for k in map(_key, singles))} "
                f"done before; {n} sandboxes"
            )
            await self.validate_all(sandboxes, singles, baseline)
            groups = list(singles)
            if combine >= 2:
                combos = self.combinations(singles, combine)
                self.say(f"{len(combos)} combined candidates")
                await self.validate_all(sandboxes, combos, baseline)
                groups += combos
        finally:
            await backend.aclose()
        return self.package(groups, baseline, test_fraction)

    async def baseline(self, sandboxes: list[Sandbox]) -> _Baseline:
        path = self.out / BASELINE_FILE
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            cached = _Baseline(**json.loads(path.read_text(encoding="utf-8")))
            if cached.commit == self.commit and cached.args == self.args:
                return cached
        ids, output = await collect(sandboxes[0], self.args, self.timeout)
        if not ids:
            narrowed = f" with {' '.join(self.args)}" if self.args else ""
            raise ConfigError(
                "repo",
                str(self.root),
                f"has no test pytest can collect{narrowed} (pytest said: {output.strip()[-600:]})",
                "pass test_cmd / --test-cmd 'pytest PATH' naming the tests, and make sure the "
                "package imports from the repository root with only the standard library and "
                "pytest",
            )
        self.say(f"collected {len(ids)} tests; running the clean suite twice")
        # Both runs in one sandbox, one after the other: a test that depends on what an earlier
        # run left behind (a cache file, a port) shows up as flaky here, not later.
        runs = [await self.clean_run(sandboxes[0], ids) for _ in range(2)]
        for run in runs:
            if run.error:
                raise ConfigError(
                    "repo",
                    str(self.root),
                    f"its test suite does not run: {run.error}",
                    "check that `python3 -m pytest` runs in the repository with only the "
                    "standard library and pytest",
                )
        stable = [t for t in ids if runs[0].passed(t) and runs[1].passed(t)]
        left_out = {
            t: "flaky" if runs[0].passed(t) or runs[1].passed(t) else "failed"
            for t in ids
            if t not in stable
        }
        if not stable:
            raise ConfigError(
                "repo",
                str(self.root),
                f"no test passes on the clean code ({len(ids)} collected; output: "
                f"{runs[0].output.strip()[-600:]})",
                "fix the suite (or narrow it with --test-cmd) so that it passes in a sandbox "
                "with no network",
            )
        result = _Baseline(self.commit, self.args, stable, left_out)
        path.write_text(json.dumps(asdict(result)), encoding="utf-8")
        return result

    async def traced(self, sandbox: Sandbox, baseline: _Baseline) -> Trace | None:
        """The trace of which test files ran which functions (made once, kept in the
        baseline's file)."""
        if not baseline.traced:
            self.say("tracing which test files run which functions")
            trace = await trace_suite(sandbox, baseline.stable, 3 * self.timeout)
            await reset_repo(sandbox)
            baseline.traced, baseline.trace = True, trace.files if trace else None
            path = self.out / BASELINE_FILE
            path.write_text(json.dumps(asdict(baseline)), encoding="utf-8")
            if trace is None:
                self.say("the trace could not be used: every candidate runs the whole suite")
        return Trace(baseline.trace) if baseline.trace is not None else None

    async def clean_run(self, sandbox: Sandbox, tests: list[str]) -> SuiteRun:
        run = await run_suite(sandbox, tests, self.timeout)
        await reset_repo(sandbox)
        return run

    def candidates(
        self, max_candidates: int | None, sources: list[str] | None
    ) -> list[list[Mutation]]:
        tracked = host_git("ls-tree", "-r", "--name-only", self.commit, cwd=self.root).splitlines()
        packages = {p.rsplit("/", 1)[0] for p in tracked if p.endswith("/__init__.py")}
        # Modules at the root or in a package (not a folder of loose scripts).
        chosen = [
            p
            for p in tracked
            if _is_source(p) and ("/" not in p or p.rsplit("/", 1)[0] in packages)
        ]
        if sources:
            wanted = [s.strip("/").removeprefix("./") for s in sources]
            chosen = [
                p
                for p in tracked
                if p.endswith(".py") and any(p == w or p.startswith(w + "/") for w in wanted)
            ]
            if not chosen:
                raise ConfigError(
                    "sources",
                    sources,
                    "names no tracked .py file of the repository",
                    "pass paths relative to the repository root, e.g. src/mypkg",
                )
        found: list[Mutation] = []
        for path in chosen:
            text = host_git("show", f"{self.commit}:{path}", cwd=self.root)
            self.sources[path] = text
            found += mutations(path, text)
        if not found:
            raise ConfigError(
                "repo",
                str(self.root),
                "has no function or method to inject a bug into",
                "pass sources / --source naming the package's folder",
            )
        return [[m] for m in pick(found, max_candidates, self.seed)]

    def combinations(self, singles: list[list[Mutation]], size: int) -> list[list[Mutation]]:
        valid = [g[0] for g in singles if self.done.get(_key(g), {}).get("verdict") == "valid"]
        by_file: dict[str, list[Mutation]] = {}
        for m in valid:
            by_file.setdefault(m.path, []).append(m)
        rng = random.Random(f"{self.seed}-combine")
        combos: list[list[Mutation]] = []
        for path in sorted(by_file):
            pool = by_file[path]
            rng.shuffle(pool)
            for group in itertools.combinations(pool, size):
                if len({m.function for m in group}) == size and not _overlap(group):
                    combos.append(sorted(group, key=lambda m: m.start))
                if len(combos) >= len(valid):
                    break
        return combos[: len(valid)]

    async def validate_all(
        self, sandboxes: list[Sandbox], groups: list[list[Mutation]], baseline: _Baseline
    ) -> None:
        queue: asyncio.Queue[list[Mutation]] = asyncio.Queue()
        todo = [g for g in groups if _key(g) not in self.done]
        for group in todo:
            queue.put_nowait(group)
        total, counter = len(todo), itertools.count(1)

        async def worker(sandbox: Sandbox) -> None:
            while not queue.empty():
                group = queue.get_nowait()
                record = await self.validate(sandbox, group, baseline)
                await self.record(record)
                where = f"{group[0].path}:{','.join(str(m.line) for m in group)}"
                kinds = "+".join(m.kind for m in group)
                self.say(
                    f"[{next(counter)}/{total}] {record['verdict']:<16} {kinds} {where}"
                    + (
                        f" ({len(record['FAIL_TO_PASS'])} failing)"
                        if record["FAIL_TO_PASS"]
                        else ""
                    )
                )

        await asyncio.gather(*(worker(sb) for sb in sandboxes))

    async def validate(
        self, sandbox: Sandbox, group: list[Mutation], baseline: _Baseline
    ) -> dict[str, Any]:
        path = group[0].path
        record: dict[str, Any] = {
            "key": _key(group),
            "commit": self.commit,
            "args": self.args,
            "edits": [m.to_dict() for m in group],
            "FAIL_TO_PASS": [],
            "messages": {},
        }
        buggy = apply_edits(self.sources[path], group)
        tests = baseline.stable
        files = None if self.trace is None else self.trace.files_for(group, self.sources)
        if files is not None:  # the other stable tests run the same code: they pass
            record["files"] = files
            tests = [t for t in tests if t.split("::", 1)[0] in set(files)]
        run = await self.buggy_run(sandbox, path, buggy, tests)
        failing = [t for t in tests if not run.passed(t)]
        verdict = self.buggy_verdict(run, failing, len(baseline.stable))
        if verdict == "grader_flags_bug":
            record["problems"] = run.problems[:5]
        if verdict is None:
            # As grading the gold patch sees it: the file counts as changed.
            fix = _fix_lines(path, buggy, self.sources[path])
            restored = await run_suite(sandbox, failing, self.timeout, [path], lines=fix)
            await reset_repo(sandbox)
            verdict = "valid" if all(restored.passed(t) for t in failing) else "not_restored"
            if restored.problems:
                verdict = "grader_flags_fix"
                record["problems"] = restored.problems[:5]
        record["verdict"] = verdict
        if verdict == "valid":
            messages = failure_messages(run.output)
            record["FAIL_TO_PASS"] = failing
            record["messages"] = {t: messages.get(t, "") for t in failing}
        return record

    def buggy_verdict(self, run: SuiteRun, failing: list[str], stable: int) -> str | None:
        """Why the buggy tree's ``run`` makes no task; None when the fix is to be tried."""
        if run.error or run.collect_errors:
            return "collection_error"
        if run.timed_out:
            return "timeout"
        if run.problems:
            # The bug itself trips the grader's tamper checks (toolz: a broken _get_factory left
            # tlz's import hook half made): leaving it, or fixing it partly, would be graded as
            # tampering rather than as failing tests.
            return "grader_flags_bug"
        if not failing:
            return "no_failing_test"
        if len(failing) == stable:
            return "no_passing_test"
        if len(failing) > self.max_fail_fraction * stable:
            return "trivial"
        if len(failing) > MAX_GRADED:
            return "too_many_failing"
        return None

    async def buggy_run(
        self, sandbox: Sandbox, path: str, buggy: str, tests: list[str]
    ) -> SuiteRun:
        if not tests:
            return SuiteRun()  # no test runs the function: none can fail
        try:
            await sandbox.write_file(f"repo/{path}", buggy)
            return await run_suite(sandbox, tests, self.timeout, [path])
        finally:
            await reset_repo(sandbox)

    # -- the tasks ------------------------------------------------------------------------

    def package(
        self, groups: list[list[Mutation]], baseline: _Baseline, test_fraction: float
    ) -> SynthResult:
        verdicts: dict[str, int] = {}
        seen: set[tuple[str, str, tuple[str, ...]]] = set()
        accepted: list[tuple[list[Mutation], dict[str, Any]]] = []
        for group in groups:
            record = self.done.get(_key(group))
            if record is None:
                continue
            verdict = record["verdict"]
            if verdict == "valid" and any(
                m.function.rsplit(".", 1)[-1] in COMPARISON_METHODS for m in group
            ):
                verdict = "comparison_method"
            if verdict == "valid":
                ident = (
                    group[0].path,
                    "+".join(m.function for m in group),
                    tuple(sorted(record["FAIL_TO_PASS"])),
                )
                if ident in seen:
                    verdict = "duplicate"
                else:
                    seen.add(ident)
                    accepted.append((group, record))
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
        split = split_by_file([g[0].path for g, _ in accepted], test_fraction, self.seed)
        tasks = []
        names: dict[str, int] = {}
        with tempfile.TemporaryDirectory(prefix="agentgym-synth-clean-") as tmp:
            clean = export_tree(self.root, self.commit, Path(tmp) / "clean")
            for group, record in accepted:
                task = self.task(group, record, baseline, clean, split, names)
                if scan_diff(task["patch"]):  # the grader would not run the gold patch's tests
                    (self.out / task["repo_path"]).unlink()
                    verdicts["valid"] -= 1
                    verdicts["grader_flags_fix"] = verdicts.get("grader_flags_fix", 0) + 1
                    continue
                tasks.append(task)
        files = {"tasks.jsonl": tasks}
        for side in ("train", "test"):
            files[f"{side}.jsonl"] = [t for t in tasks if t["split"] == side]
        for name, items in files.items():
            text = "".join(json.dumps(t) + "\n" for t in items)
            (self.out / name).write_text(text, encoding="utf-8")
        result = SynthResult(
            out=self.out,
            tasks=tasks,
            stable_tests=len(baseline.stable),
            left_out_tests=baseline.left_out,
            verdicts=dict(sorted(verdicts.items())),
            candidates=sum(verdicts.values()),
            seconds=time.monotonic() - self.started,
        )
        summary = {
            "repo": str(self.root),
            "commit": self.commit,
            "candidates": result.candidates,
            "valid": result.valid,
            "verdicts": result.verdicts,
            "stable_tests": len(baseline.stable),
            "left_out_tests": baseline.left_out,
            "seconds": round(result.seconds, 1),
        }
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        self.say(f"{result.valid} tasks from {result.candidates} candidates: {result.verdicts}")
        return result

    def task(
        self,
        group: list[Mutation],
        record: dict[str, Any],
        baseline: _Baseline,
        clean: Path,
        split: dict[str, str],
        names: dict[str, int],
    ) -> dict[str, Any]:
        failing = sorted(record["FAIL_TO_PASS"])
        stem = group[0].path.removesuffix(".py").replace("/", ".")
        function = group[0].function if len(group) == 1 else "combined"
        label = f"{self.name}__{stem}.{function}"
        names[label] = names.get(label, 0) + 1
        instance_id = f"{label}-{names[label]}"
        bundle = self.out / "repos" / f"{instance_id}.bundle"
        commit, patch = build_task_repo(clean, group, bundle, f"{self.name} at {self.commit[:12]}")
        statement, template = problem_statement(failing, record["messages"], instance_id)
        changed = sum(
            1
            for line in patch.splitlines()
            if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
        )
        score = changed + 2 * (len(group) - 1) + (1 if len(failing) <= 2 else 0)
        level = "easy" if score <= 2 else "medium" if score <= 4 else "hard"
        return {
            "instance_id": instance_id,
            "repo": self.name,
            "repo_path": f"repos/{bundle.name}",
            "base_commit": commit,
            "problem_statement": statement,
            "test_patch": "",
            "patch": patch,
            "FAIL_TO_PASS": failing,
            "PASS_TO_PASS": _pass_to_pass(baseline.stable, failing, instance_id),
            "split": split[group[0].path],
            "difficulty": {
                "level": level,
                "lines_changed": changed,
                "tests_failing": len(failing),
                "bugs": len(group),
            },
            "synth": {
                "source_commit": self.commit,
                "template": template,
                "bugs": [
                    {"kind": m.kind, "path": m.path, "function": m.function, "line": m.line}
                    for m in group
                ],
            },
        }


def _pass_to_pass(stable: list[str], failing: list[str], seed: str) -> list[str]:
    """The stable tests that still pass, at most ``MAX_GRADED - len(failing)`` of them: those in
    the failing tests' files first, then a seeded sample of the rest (in suite order).

    The grader reads each listed test's records from one line of the sandbox's output, which
    keeps 64 KiB by default: a few hundred tests."""
    room = max(MAX_GRADED - len(failing), 1)
    passing = [t for t in stable if t not in set(failing)]
    files = {t.split("::", 1)[0] for t in failing}
    near = [t for t in passing if t.split("::", 1)[0] in files][:room]
    rest = [t for t in passing if t not in set(near)]
    extra = random.Random(seed).sample(rest, min(len(rest), room - len(near)))
    chosen = {*near, *extra}
    return [t for t in passing if t in chosen]


def _fix_lines(path: str, buggy: str, clean: str) -> dict[str, list[int]]:
    """The lines the gold patch (``buggy`` back to ``clean``) writes, as the grader reads them."""
    diff = difflib.unified_diff(
        buggy.splitlines(), clean.splitlines(), f"a/{path}", f"b/{path}", n=0, lineterm=""
    )
    return changed_lines(f"diff --git a/{path} b/{path}\n" + "\n".join(diff))


def _key(group: list[Mutation]) -> str:
    return "+".join(m.key for m in group)


def _overlap(group: tuple[Mutation, ...]) -> bool:
    spans = sorted((m.start, m.end) for m in group)
    return any(a[1] > b[0] for a, b in itertools.pairwise(spans))
