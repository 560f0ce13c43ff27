"""Build agentgym/SWE-v0's shipped task set from the project sources in scripts/swe_tasks/.

Each folder scripts/swe_tasks/<project>/ holds a small library's newest tree and its history
(see scripts/swe_builder/spec.py for the layout and how to add a task). This script commits the
history with fixed authors and dates (the SHAs are the same on every run), makes one task per
fix commit, checks that its FAIL_TO_PASS tests fail before the gold patch and everything passes
after it, and writes::

    agentgym/envs/swe/data/instances.jsonl         one SWE-bench-style instance per line
    agentgym/envs/swe/data/repos/<project>.bundle  each project's history, a tag per task base

Run it from the repository root::

    .venv/bin/python scripts/build_swe_tasks.py            # rebuild the shipped files
    .venv/bin/python scripts/build_swe_tasks.py --check    # exit 1 if they would change

Bundles are compared by bytes; when only the pack encoding differs (another git version packs the
same objects differently) the refs and object ids are compared instead, and a note is printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from swe_builder.gitrepo import GitError, bundle_content
from swe_builder.spec import SpecError, load_project
from swe_builder.tasks import build_project
from swe_builder.verify import VerifyError

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "scripts" / "swe_tasks"
DATA = ROOT / "agentgym" / "envs" / "swe" / "data"
INSTANCES = "instances.jsonl"


def build(out: Path, python: str, only: list[str]) -> list[dict[str, Any]]:
    """Write instances.jsonl and repos/*.bundle under ``out``; return the records."""
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="swe-build-") as work:
        for folder in sorted(p for p in SOURCES.iterdir() if (p / "project.toml").is_file()):
            if only and folder.name not in only:
                continue
            project = load_project(folder)
            records += build_project(project, Path(work), out / "repos", python)
            count = sum(record["repo"].endswith("/" + project.name) for record in records)
            print(f"{project.name}: {count} tasks verified", file=sys.stderr)
    records.sort(key=lambda record: record["instance_id"])
    lines = [json.dumps(record, ensure_ascii=False) + "\n" for record in records]
    (out / INSTANCES).write_text("".join(lines), encoding="utf-8", newline="\n")
    return records


def _same_bundle(new: Path, old: Path, scratch: Path) -> bool:
    if new.read_bytes() == old.read_bytes():
        return True
    (scratch / "new").mkdir(exist_ok=True)
    (scratch / "old").mkdir(exist_ok=True)
    same = bundle_content(new, scratch / "new") == bundle_content(old, scratch / "old")
    if same:
        print(
            f"note: {old.name} has the same refs and objects, packed differently", file=sys.stderr
        )
    return same


def compare(new: Path, old: Path) -> list[str]:
    """The shipped files under ``old`` that ``new`` would change, add or remove."""
    problems = []
    if (
        not (old / INSTANCES).is_file()
        or (new / INSTANCES).read_bytes() != (old / INSTANCES).read_bytes()
    ):
        problems.append(INSTANCES)
    new_bundles = {p.name for p in (new / "repos").glob("*.bundle")}
    old_bundles = {p.name for p in (old / "repos").glob("*.bundle")}
    problems += [f"repos/{name}" for name in sorted(new_bundles ^ old_bundles)]
    with tempfile.TemporaryDirectory(prefix="swe-compare-") as scratch:
        for name in sorted(new_bundles & old_bundles):
            if not _same_bundle(new / "repos" / name, old / "repos" / name, Path(scratch)):
                problems.append(f"repos/{name}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the shipped files differ")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    parser.add_argument("--out", type=Path, default=DATA, help="data folder to write or check")
    parser.add_argument("--only", nargs="*", default=[], help="build only these projects")
    args = parser.parse_args(argv)
    if args.check and args.only:
        parser.error("--check rebuilds every project; drop --only")
    with tempfile.TemporaryDirectory(prefix="swe-data-") as tmp:
        fresh = Path(tmp) / "data"
        (fresh / "repos").mkdir(parents=True)
        try:
            records = build(fresh, args.python, args.only)
        except (SpecError, GitError, VerifyError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        if args.check:
            problems = compare(fresh, args.out)
            if problems:
                print(f"out of date: {', '.join(problems)}; run {Path(__file__).name}")
                return 1
            print(f"{len(records)} tasks: the shipped files are up to date")
            return 0
        if args.only:
            print(f"{len(records)} tasks verified; nothing written (--only)")
            return 0
        shutil.rmtree(args.out / "repos", ignore_errors=True)
        args.out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(fresh / "repos", args.out / "repos")
        shutil.copyfile(fresh / INSTANCES, args.out / INSTANCES)
    print(f"wrote {len(records)} tasks to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
