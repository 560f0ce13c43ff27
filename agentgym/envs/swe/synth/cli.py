"""``agentgym swe synth REPO``: validated SWE-v0 tasks from a local git repository;
``agentgym swe export-sft``: their gold trajectories as tool-call conversations for SFT.

::

    agentgym swe synth ~/src/mylib --out mylib-tasks --max-candidates 200
    agentgym swe synth . --test-cmd "pytest tests/unit" --source src/mylib --workers 2
    agentgym swe export-sft --tasks mylib-tasks/train.jsonl --out mylib-sft.jsonl

Progress goes to stderr; the summary (counts of each verdict, tasks per hour) to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys

from agentgym.core.errors import ConfigError, SandboxError, SandboxUnavailable

__all__ = ["add_swe_arguments", "run_swe"]

EXIT_USAGE, EXIT_FAILED = 2, 1


def add_swe_arguments(parser: argparse.ArgumentParser) -> None:
    subparsers = parser.add_subparsers(dest="swe_command", metavar="SUBCOMMAND")
    synth = subparsers.add_parser(
        "synth",
        help="make validated SWE-v0 tasks from a local git repository with a pytest suite",
        description="Inject bugs into a repository's functions, keep those that make at least "
        "one stable test fail and leave one passing (checked in the local sandbox), and write "
        "SWE-bench-style JSONL (tasks, train, test) with one git bundle per task.",
    )
    synth.add_argument("repo", metavar="REPO", help="the repository's folder (its HEAD is used)")
    synth.add_argument(
        "--out", default=None, help="output folder (default: ./<repo name>-swe-tasks)"
    )
    synth.add_argument(
        "--test-cmd", default=None, help="'pytest ARGS' naming the tests (default: discovery)"
    )
    synth.add_argument(
        "--source",
        action="append",
        default=None,
        metavar="PATH",
        help="file or folder to inject bugs into (repeatable; default: every non-test .py file)",
    )
    synth.add_argument(
        "--max-candidates", type=int, default=100, help="single bugs to try (default 100)"
    )
    synth.add_argument("--seed", type=int, default=0, help="picks bugs, reports and the split")
    synth.add_argument("--workers", type=int, default=None, help="parallel sandboxes (CPU count)")
    synth.add_argument("--timeout", type=float, default=120.0, help="seconds per suite run")
    synth.add_argument(
        "--combine",
        type=int,
        default=0,
        choices=(0, 2, 3),
        help="also try 2 or 3 valid bugs of one file together",
    )
    synth.add_argument(
        "--test-fraction", type=float, default=0.2, help="share of source files in test.jsonl"
    )
    synth.add_argument(
        "--isolation",
        default="auto",
        choices=("auto", "bwrap", "none"),
        help="'none' runs the repository's code unisolated (only for code you trust)",
    )
    synth.add_argument(
        "--full-suite",
        action="store_true",
        help="run every stable test for every candidate (default: only the test files whose "
        "tests ran the mutated function on the clean code; the same verdicts, faster)",
    )
    synth.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    export = subparsers.add_parser(
        "export-sft",
        help="write the gold trajectories of SWE-v0 tasks as tool-call conversations (SFT data)",
        description="Play each task's gold patch through SWE-v0 with its own tools (view, "
        "edit/create, run_tests, submit) and write the episodes that score 1 as JSONL in "
        "TRL's conversational format (messages with tool_calls, and tools); tasks whose gold "
        "episode does not score 1 are left out and reported.",
    )
    export.add_argument(
        "--tasks", default=None, help="SWE-bench-style JSONL (default: the shipped tasks)"
    )
    export.add_argument("--out", default="swe-sft.jsonl", help="output JSONL (swe-sft.jsonl)")
    export.add_argument(
        "--sandbox",
        default="auto",
        choices=("auto", "local", "docker", "unsafe-local"),
        help="where the episodes run (auto: bubblewrap, else Docker)",
    )


def run_swe(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agentgym.envs.swe.synth.pipeline import synthesize

    if args.swe_command == "export-sft":
        return _export_sft(args)
    if args.swe_command != "synth":
        print("agentgym swe: error: name a subcommand: synth, export-sft", file=sys.stderr)
        return EXIT_USAGE
    out = args.out or f"{Path(args.repo).expanduser().resolve().name}-swe-tasks"
    try:
        result = synthesize(
            args.repo,
            out,
            test_cmd=args.test_cmd,
            max_candidates=args.max_candidates,
            seed=args.seed,
            workers=args.workers,
            timeout=args.timeout,
            combine=args.combine,
            test_fraction=args.test_fraction,
            sources=args.source,
            isolation=args.isolation,
            full_suite=args.full_suite,
            progress=None if args.quiet else sys.stderr,
        )
    except ConfigError as e:
        print(f"agentgym swe synth: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (SandboxUnavailable, SandboxError) as e:
        print(f"agentgym swe synth: the sandbox failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    hours = max(result.seconds, 1e-9) / 3600
    summary = {
        "out": str(result.out),
        "tasks": result.valid,
        "train": sum(t["split"] == "train" for t in result.tasks),
        "test": sum(t["split"] == "test" for t in result.tasks),
        "candidates": result.candidates,
        "verdicts": result.verdicts,
        "stable_tests": result.stable_tests,
        "left_out_tests": len(result.left_out_tests),
        "seconds": round(result.seconds, 1),
        "tasks_per_hour": round(result.valid / hours, 1),
    }
    print(json.dumps(summary, indent=2))
    return 0


def _export_sft(args: argparse.Namespace) -> int:
    from agentgym.envs.swe.sft import export_sft

    try:
        result = export_sft(args.tasks, args.out, sandbox=args.sandbox)
    except ConfigError as e:
        print(f"agentgym swe export-sft: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (SandboxUnavailable, SandboxError) as e:
        print(f"agentgym swe export-sft: the sandbox failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    summary = {
        "out": str(result.out),
        "exported": len(result.exported),
        "rejected": result.rejected,
    }
    print(json.dumps(summary, indent=2))
    return 0 if result.exported else EXIT_FAILED
