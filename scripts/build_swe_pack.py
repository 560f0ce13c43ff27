"""Build (and grow) agentgym/SWE-Pack-v0's task pack from real open-source repositories.

The pack lives in ``agentgym/envs/swe/pack/data/<name>/``, one folder per repository::

    source.bundle      the upstream tree at one commit, trimmed (no docs, CI, benchmarks), as a
                       one-commit repository with a fixed author and date (same SHA every run)
    LICENSE            the upstream licence, kept verbatim
    tasks.bundle       every task's buggy tree, each a root commit of its own (ref tasks/<id>)
    tasks.jsonl.gz     the SWE-bench-style records (repo_path: tasks.bundle)
    build.json         how the tasks were made: seed, candidates tried, verdicts, wall time
and ``NOTICE`` in ``pack/data/`` names every repository, its upstream URL, commit and licence.

Steps (run from the repository root; every step is resumable and deterministic)::

    # 1. snapshot an upstream git repository (a clone or bare git dir at the pinned commit)
    python scripts/build_swe_pack.py snapshot toolz --upstream ~/src/toolz
    # 2. synthesize tasks into a work folder (resumes; raise --max-candidates to grow the pack)
    nice -n 19 python scripts/build_swe_pack.py synth toolz --work ~/swe-pack-work \\
        --max-candidates 400 --workers 1
    # 3. write tasks.bundle, tasks.jsonl.gz, build.json and NOTICE into the pack
    python scripts/build_swe_pack.py pack --work ~/swe-pack-work
    #    (--drop-failed verify.json: leave out what a verify report failed; build.json says why)
    # 4. grade every task's gold patch (must score 1) and the empty patch (must score 0)
    python scripts/build_swe_pack.py verify --report verify.json
    # 5. the figures as a Markdown table (docs/envs.md)
    python scripts/build_swe_pack.py table

Synthesis uses ``agentgym swe synth`` (the local bubblewrap sandbox) with seed ``SEED``: the same
``--max-candidates`` gives the same tasks, and a larger one keeps the earlier candidates' verdicts
(``candidates.jsonl`` in the work folder) and tries only the new ones.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "agentgym" / "envs" / "swe" / "pack" / "data"
SEED = 0
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "agentgym pack",
    "GIT_AUTHOR_EMAIL": "pack@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "agentgym pack",
    "GIT_COMMITTER_EMAIL": "pack@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}


@dataclass(frozen=True)
class Upstream:
    """A repository of the pack: where it comes from, and what of it is shipped."""

    name: str
    url: str
    commit: str
    license: str
    license_file: str
    drop: tuple[str, ...]
    """Top-level paths left out of the snapshot (docs, CI, benchmarks, release tooling)."""
    test_cmd: str | None = None
    edits: tuple[tuple[str, str, str], ...] = ()
    """``(file, old, new)``: text replaced in the snapshot (pytest options it cannot run with)."""


UPSTREAMS = {
    u.name: u
    for u in (
        Upstream(
            "toolz",
            "https://github.com/pytoolz/toolz",
            "568c2b8393973cd172a466546c9d95779c452438",
            "BSD-3-Clause",
            "LICENSE.txt",
            (
                ".github",
                ".pre-commit-config.yaml",
                ".readthedocs.yaml",
                "bench",
                "doc",
                "examples",
                "release-notes",
            ),
        ),
        Upstream(
            "boltons",
            "https://github.com/mahmoud/boltons",
            "967864f89791509f9eb36b22b4579d36b72a6df2",
            "BSD-3-Clause",
            "LICENSE",
            (".github", ".omp", ".readthedocs.yaml", "docs", "misc", "TODO.rst"),
        ),
        Upstream(
            "more-itertools",
            "https://github.com/more-itertools/more-itertools",
            "2fe1b2eeb9d75f994113fe3ac76d14b6bcd6fb10",
            "MIT",
            "LICENSE",
            (".github", ".readthedocs.yaml", "docs", "requirements", "Makefile"),
            "pytest tests",
            # Left out through its pytest configuration, so that grading leaves them out too
            # (the grader runs whole test files): the slowest tests (26 s of its 45 s suite),
            # and three that start 10 to 100 threads, whose stacks overrun the sandbox's address
            # space; the MemoryErrors that followed failed every later test, and pytest's own
            # report of the grader's canary, so that gold patches scored 0 (tampering).
            edits=(
                (
                    "pyproject.toml",
                    "[tool.ruff]\n",
                    "[tool.pytest.ini_options]\naddopts = [\n"
                    + "".join(
                        f'    "--deselect=tests/{test}",\n'
                        for test in (
                            "test_recipes.py::PrimeFunctionTests::test_primes",
                            "test_recipes.py::PrimeFunctionTests::test_nth_prime_approximate",
                            "test_more.py::DiscreteFourierTransformTests::test_roundtrip",
                            "test_more.py::ExtractTests::test_all_orderings",
                            "test_more.py::TestSerialize::test_concurrent_calls",
                            "test_more.py::TestSynchronized::test_concurrent_calls",
                            "test_more.py::TestConcurrentTee::test_concurrent_consumers",
                        )
                    )
                    + "]\n\n[tool.ruff]\n",
                ),
            ),
        ),
        Upstream(
            "tabulate",
            "https://github.com/astanin/python-tabulate",
            "268615a5c27dc40e5c22454c07b44d5c50410da0",
            "MIT",
            "LICENSE",
            (".github", ".pre-commit-config.yaml", "HOWTOPUBLISH", "benchmark", "examples"),
            # Its addopts run doctests of the package and README: with them no test passed in
            # the sandbox; the suite in test/ runs as it is.
            edits=(
                (
                    "pyproject.toml",
                    'addopts = "-v --doctest-modules --ignore=benchmark '
                    '--doctest-glob=README.md"\n',
                    "",
                ),
            ),
        ),
        Upstream(
            "cachetools",
            "https://github.com/tkem/cachetools",
            "28d4506f2a49d781ffbcecb095fa7aba5bb80aff",
            "MIT",
            "LICENSE",
            (".github", ".readthedocs.yaml", "docs"),
            # A src layout: pytest's pythonpath setting makes the package importable.
            edits=(
                (
                    "pyproject.toml",
                    "[build-system]\n",
                    '[tool.pytest.ini_options]\npythonpath = ["src"]\n\n[build-system]\n',
                ),
            ),
        ),
        Upstream(
            "jmespath",
            "https://github.com/jmespath/jmespath.py",
            "2ad18b0e51ef3c22ef0d4bbeb11506746a39e228",
            "MIT",
            "LICENSE",
            (".github", ".gitmodules", ".coveragerc", "bin", "extra", "perf", "scripts"),
        ),
        Upstream(
            "parse",
            "https://github.com/r1chardj0n3s/parse",
            "738447715c76f8ebc460b33320307faccafbc599",
            "MIT",
            "LICENSE",
            # .pytest.ini only adds coverage options (pytest-cov): the suite runs without it.
            (".github", ".git-blame-ignore-revs", ".pytest.ini"),
        ),
    )
}


def git(*args: str, cwd: Path | None = None, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env={**os.environ, **_GIT_ENV},
        input=stdin,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"git {' '.join(args[:3])} failed: {done.stderr.decode().strip()[-400:]}")
    return done.stdout


# -- 1. snapshot ------------------------------------------------------------------------------


def snapshot(name: str, upstream: Path) -> None:
    """``source.bundle`` and ``LICENSE`` of ``name`` from the git repository ``upstream``."""
    spec = UPSTREAMS[name]
    archive = git("archive", "--format=tar", spec.commit, cwd=upstream)
    folder = PACK / name
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="swe-pack-") as tmp:
        work = Path(tmp) / name
        work.mkdir()
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(work, filter="data")
        for path in spec.drop:
            target = work / path
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        for path, before, after in spec.edits:
            text = (work / path).read_text(encoding="utf-8")
            if before not in text:
                sys.exit(f"{name}: {path} does not hold {before!r}; update the edit")
            (work / path).write_text(text.replace(before, after), encoding="utf-8")
        shutil.copyfile(work / spec.license_file, folder / "LICENSE")
        git("init", "-q", cwd=work)
        git("add", "-A", "-f", ".", cwd=work)
        git("commit", "-q", "--no-verify", "-m", f"{name} at {spec.commit[:12]}", cwd=work)
        git("bundle", "create", "-q", str(folder / "source.bundle"), "main", cwd=work)
        commit = git("rev-parse", "HEAD", cwd=work).decode().strip()
    size = (folder / "source.bundle").stat().st_size
    print(f"{name}: source.bundle {size / 1024:.0f} KiB, commit {commit}", file=sys.stderr)


def checkout(name: str, work: Path) -> Path:
    """A clone of ``name``'s ``source.bundle`` at ``work/<name>/<name>`` (made once; synthesis
    names the tasks after the folder)."""
    repo = work / name / name
    if not (repo / ".git").is_dir():
        repo.parent.mkdir(parents=True, exist_ok=True)
        git("clone", "-q", str(PACK / name / "source.bundle"), str(repo))
    return repo


# -- 2. synth ---------------------------------------------------------------------------------


def synth(name: str, work: Path, max_candidates: int, workers: int, timeout: float) -> None:
    """Run ``agentgym swe synth`` on ``name``'s snapshot into ``work/<name>/out`` (resumes)."""
    spec = UPSTREAMS[name]
    if not (PACK / name / "source.bundle").is_file():
        print(f"{name}: no snapshot yet; run the snapshot step first", file=sys.stderr)
        return
    repo = checkout(name, work)
    out = work / name / "out"
    command = [
        sys.executable, "-m", "agentgym", "swe", "synth", str(repo), "--out", str(out),
        "--max-candidates", str(max_candidates), "--seed", str(SEED),
        "--workers", str(workers), "--timeout", str(timeout),
    ]  # fmt: skip
    if spec.test_cmd:
        command += ["--test-cmd", spec.test_cmd]
    before = _tried(out)
    started = time.time()
    done = subprocess.run(command, cwd=ROOT, check=False)
    seconds = time.time() - started
    record = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(seconds, 1),
        "tried_before": before,
        "tried_after": _tried(out),
        "max_candidates": max_candidates,
        "workers": workers,
        "exit": done.returncode,
    }
    with (work / name / "runs.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    print(f"{name}: {json.dumps(record)}", file=sys.stderr)


def _tried(out: Path) -> int:
    state = out / "candidates.jsonl"
    if not state.is_file():
        return 0
    return len({json.loads(line)["key"] for line in state.read_text().splitlines() if line})


# -- 3. pack ----------------------------------------------------------------------------------


def pack(name: str, work: Path, drop: dict[str, str] | None = None) -> dict[str, Any] | None:
    """Write ``name``'s ``tasks.bundle``, ``tasks.jsonl.gz`` and ``build.json`` from the work
    folder, leaving out the tasks in ``drop`` (task id -> why, recorded in ``build.json``);
    ``None`` when it holds no synthesis output."""
    spec, out = UPSTREAMS[name], work / name / "out"
    if not (out / "tasks.jsonl").is_file() or not (PACK / name / "source.bundle").is_file():
        return None
    tasks = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines() if line]
    dropped = {
        t["instance_id"]: drop[t["instance_id"]] for t in tasks if t["instance_id"] in (drop or {})
    }
    tasks = [t for t in tasks if t["instance_id"] not in dropped]
    tasks.sort(key=lambda task: task["instance_id"])
    folder = PACK / name
    with tempfile.TemporaryDirectory(prefix="swe-pack-") as tmp:
        store = Path(tmp) / "tasks.git"
        git("init", "-q", "--bare", str(store))
        for task in tasks:
            branch = f"refs/heads/{task['instance_id']}"
            git("fetch", "-q", str(out / task["repo_path"]), f"main:{branch}", cwd=store)
            got = git("rev-parse", branch, cwd=store).decode().strip()
            if got != task["base_commit"]:
                sys.exit(f"{task['instance_id']}: bundle holds {got}, not {task['base_commit']}")
        bundle = folder / "tasks.bundle"
        bundle.unlink(missing_ok=True)
        if tasks:
            git("bundle", "create", "-q", str(bundle), "--branches", cwd=store)
    records = [
        {
            **task,
            "repo": spec.url.removeprefix("https://github.com/"),
            "repo_path": "tasks.bundle",
        }
        for task in tasks
    ]
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    with (
        open(folder / "tasks.jsonl.gz", "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as f,
    ):
        f.write(text.encode("utf-8"))
    build = _build_record(name, work, records)
    if dropped:
        build["dropped_by_verify"] = dict(sorted(dropped.items()))
    (folder / "build.json").write_text(json.dumps(build, indent=2) + "\n", encoding="utf-8")
    return build


def _build_record(name: str, work: Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    spec = UPSTREAMS[name]
    summary = json.loads((work / name / "out" / "summary.json").read_text())
    runs = [
        json.loads(line)
        for line in (work / name / "runs.jsonl").read_text().splitlines()
        if line.strip()
    ]
    seconds = sum(run["seconds"] for run in runs)
    candidates, valid = summary["candidates"], len(records)
    return {
        "repository": spec.url,
        "upstream_commit": spec.commit,
        "license": spec.license,
        "snapshot_commit": summary["commit"],
        "test_cmd": spec.test_cmd or "pytest",
        "seed": SEED,
        "max_candidates": max(run["max_candidates"] for run in runs),
        "candidates": candidates,
        "valid": valid,
        "validity_rate": round(valid / max(candidates, 1), 3),
        "verdicts": summary["verdicts"],
        "stable_tests": summary["stable_tests"],
        "train": sum(r["split"] == "train" for r in records),
        "test": sum(r["split"] == "test" for r in records),
        "synthesis_seconds": round(seconds, 1),
        "tasks_per_hour": round(valid / max(seconds, 1e-9) * 3600, 1),
        "runs": runs,
    }


def write_notice() -> None:
    lines = [
        "agentgym SWE task pack: third-party software",
        "",
        "Each folder holds a trimmed snapshot of an open-source project (source.bundle) and",
        "tasks made by injecting bugs into it (tasks.bundle, tasks.jsonl.gz). The projects'",
        "copyright notices and licences are kept in each folder's LICENSE file.",
        "",
    ]
    for name in sorted(UPSTREAMS):
        if (PACK / name / "LICENSE").is_file():
            spec = UPSTREAMS[name]
            lines += [
                f"{name}/",
                f"  upstream: {spec.url} at commit {spec.commit}",
                f"  licence:  {spec.license} (see {name}/LICENSE)",
                f"  left out: {', '.join(spec.drop)}",
                "",
            ]
    (PACK / "NOTICE").write_text("\n".join(lines), encoding="utf-8")


# -- 4. verify --------------------------------------------------------------------------------


def verify(names: list[str], sample: int | None, seed: int, report: Path | None) -> bool:
    """Grade every task (or ``sample`` drawn with ``seed``) of ``names`` through SWE-Pack-v0 on
    the local sandbox: gold 1, no change 0, one commit in the checkout. True when all pass."""
    from agentgym.envs.swe.pack import SWEPackEnv, load_pack
    from agentgym.envs.swe.pack.verify import check_task

    ids = [task["instance_id"] for task in load_pack(names or None)]
    if sample is not None:
        ids = sorted(random.Random(seed).sample(ids, min(sample, len(ids))))
    started, failures, checks = time.monotonic(), 0, []
    env = SWEPackEnv(repos=names or None, sandbox="local")
    try:
        for n, task_id in enumerate(ids, 1):
            check = check_task(env, task_id)
            failures += not check.ok
            checks.append({"task_id": task_id, "seconds": round(check.seconds, 2),
                           "problems": check.problems})  # fmt: skip
            status = "ok" if check.ok else "FAILED " + "; ".join(check.problems)
            print(f"[{n}/{len(ids)}] {check.seconds:5.1f}s {task_id}: {status}", file=sys.stderr)
    finally:
        env.close()
    seconds = time.monotonic() - started
    summary = {
        "tasks": len(ids),
        "passed": len(ids) - failures,
        "failed": failures,
        "seconds": round(seconds, 1),
        "seconds_per_task": round(seconds / max(len(ids), 1), 2),
    }
    print(json.dumps(summary))
    if report is not None:
        report.write_text(json.dumps({**summary, "checks": checks}, indent=1) + "\n")
    return failures == 0


def table() -> str:
    """The pack's figures as a Markdown table (for docs/envs.md)."""
    rows = [
        "| project | licence | upstream commit | candidates | tasks (train/test) | valid "
        "| synthesis | tasks/h |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    total = {"candidates": 0, "valid": 0, "seconds": 0.0}
    for name in sorted(UPSTREAMS):
        path = PACK / name / "build.json"
        if not path.is_file():
            continue
        b = json.loads(path.read_text())
        total["candidates"] += b["candidates"]
        total["valid"] += b["valid"]
        total["seconds"] += b["synthesis_seconds"]
        rows.append(
            f"| [{name}]({b['repository']}) | {b['license']} | `{b['upstream_commit'][:7]}` "
            f"| {b['candidates']} | {b['valid']} ({b['train']}/{b['test']}) "
            f"| {b['validity_rate']:.0%} | {b['synthesis_seconds'] / 60:.1f} min "
            f"| {b['tasks_per_hour']:.0f} |"
        )
    rate = total["valid"] / max(total["candidates"], 1)
    per_hour = total["valid"] / max(total["seconds"], 1e-9) * 3600
    rows.append(
        f"| all | | | {total['candidates']} | {total['valid']} | {rate:.0%} "
        f"| {total['seconds'] / 60:.1f} min | {per_hour:.0f} |"
    )
    return "\n".join(rows)


# -- the command ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    snap = sub.add_parser("snapshot", help="source.bundle and LICENSE from an upstream git dir")
    snap.add_argument("name", choices=sorted(UPSTREAMS))
    snap.add_argument("--upstream", type=Path, required=True, help="its git dir or clone")
    syn = sub.add_parser("synth", help="synthesize tasks into the work folder (resumes)")
    syn.add_argument("names", nargs="*", help="repositories (default: all)")
    syn.add_argument("--work", type=Path, required=True, help="work folder (kept between runs)")
    syn.add_argument("--max-candidates", type=int, default=100, help="per repository")
    syn.add_argument("--workers", type=int, default=1)
    syn.add_argument("--timeout", type=float, default=120.0, help="seconds per suite run")
    pk = sub.add_parser("pack", help="write the pack's files from the work folder")
    pk.add_argument("names", nargs="*", help="repositories (default: all)")
    pk.add_argument("--work", type=Path, required=True)
    pk.add_argument(
        "--drop-failed",
        type=Path,
        action="append",
        default=[],
        metavar="REPORT",
        help="a verify --report: leave its failed tasks out (recorded in build.json; repeatable)",
    )
    ver = sub.add_parser("verify", help="gold scores 1, no change 0, through SWE-Pack-v0")
    ver.add_argument("names", nargs="*", help="repositories (default: all)")
    ver.add_argument("--sample", type=int, default=None, help="check only this many tasks")
    ver.add_argument("--seed", type=int, default=0, help="draws the sample")
    ver.add_argument("--report", type=Path, default=None, help="write each task's result here")
    sub.add_parser("table", help="print the pack's figures as a Markdown table")
    args = parser.parse_args(argv)
    if args.step == "snapshot":
        snapshot(args.name, args.upstream.expanduser())
    elif args.step == "synth":
        for name in args.names or sorted(UPSTREAMS):
            if name not in UPSTREAMS:
                parser.error(f"unknown repository {name!r}; choose from {sorted(UPSTREAMS)}")
            synth(name, args.work.expanduser(), args.max_candidates, args.workers, args.timeout)
    elif args.step == "pack":
        drop = {
            check["task_id"]: "; ".join(check["problems"])
            for report in args.drop_failed
            for check in json.loads(report.read_text())["checks"]
            if check["problems"]
        }
        for name in args.names or sorted(UPSTREAMS):
            build = pack(name, args.work.expanduser(), drop)
            if build:
                keys = ("candidates", "valid", "validity_rate", "synthesis_seconds")
                print(name, json.dumps({k: build[k] for k in keys}), file=sys.stderr)
        write_notice()
    elif args.step == "table":
        print(table())
    elif args.step == "verify":
        return 0 if verify(args.names, args.sample, args.seed, args.report) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
