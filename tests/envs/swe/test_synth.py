"""``agentgym swe synth``: procedural bugs, bad input, and synthesis end to end on a small repo
(the baseline leaves the flaky and the failing test out, every emitted task's gold patch scores 1
and doing nothing 0 through SWE-v0, the agent's checkout holds no commit past its base)."""

from __future__ import annotations

import ast
import difflib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from conftest import git
from swe_steps import call, replay_gold, step, submit
from synth_repo import STABLE, build_textops

from agentgym.cli import main
from agentgym.core.errors import ConfigError
from agentgym.envs.swe import SWEEnv, gold_tool_calls, read_instances
from agentgym.envs.swe.sft import export_sft
from agentgym.envs.swe.synth import KINDS, mutations, synthesize
from agentgym.envs.swe.synth.mutate import apply_edits, pick
from agentgym.envs.swe.synth.package import split_by_file
from agentgym.envs.swe.synth.statements import problem_statement

SOURCE = '''"""Module docstring: 1 < 2 and not False."""


def scan(items, limit=3, strict=False):
    """Docstring of scan."""
    found = []
    for i in range(len(items)):
        if items[i] > limit and not strict:
            found.append(items[i] * 2)
        else:
            found.append(max(items[i], 0))
    return found


class Box:
    def head(self, values, n):
        return values[:n] if n == len(values) or values is None else values[n] - 1

    def total(self, values):
        acc = 0
        while not values:
            acc += 1
        return acc
'''


def test_every_kind_is_a_small_edit_that_parses_and_changes_the_code() -> None:
    found = mutations("pkg/mod.py", SOURCE)
    assert {m.kind for m in found} == set(KINDS)
    for m in found:
        mutated = apply_edits(SOURCE, [m])
        assert ast.dump(ast.parse(mutated)) != ast.dump(ast.parse(SOURCE)), m
        assert SOURCE[m.start : m.end] == m.old
        assert m.function in {"scan", "Box.head", "Box.total"}
        # The rest of the file is untouched: only lines of the edit differ.
        diff = difflib.unified_diff(SOURCE.splitlines(), mutated.splitlines(), n=0, lineterm="")
        changed = [line for line in list(diff)[2:] if line[:1] in "+-"]
        assert len(changed) <= m.old.count("\n") + m.new.count("\n") + 2, m
    # Docstrings and the module's top level are never edited.
    assert not any(m.line in (1, 5) for m in found)
    assert mutations("broken.py", "def f(:\n") == []


def test_picking_is_deterministic_per_seed_and_interleaves_kinds() -> None:
    found = mutations("pkg/mod.py", SOURCE)
    first = pick(found, 14, seed=7)
    assert first == pick(list(reversed(found)), 14, seed=7)
    assert [m.key for m in first] != [m.key for m in pick(found, 14, seed=8)]
    assert len({m.kind for m in first}) == 14  # every kind before any repeats
    assert len(pick(found, None, seed=0)) == len(found)


def test_reports_come_from_the_failing_tests_only() -> None:
    tests = ["tests/test_a.py::test_parse_dates", "tests/test_a.py::test_x[1 2]"]
    messages = {tests[0]: "AssertionError: assert 3 == 4"}
    texts = {
        problem_statement(tests, messages, seed)[1]: problem_statement(tests, messages, seed)[0]
        for seed in range(40)
    }
    assert sorted(texts) == ["bug_report", "ci_failure", "terse", "user_question"]
    for text in texts.values():
        assert "tests/test_a.py::test_parse_dates" in text
        assert "python -m pytest" in text
        assert "'tests/test_a.py::test_x[1 2]'" in text  # quoted for the shell
        assert "diff" not in text.lower()
        assert "assert 3 == 4" in text
    assert "failing in `tests/test_a.py`" in texts["ci_failure"]
    both = [*tests, "tests/test_b.py::test_other"]
    ci = [
        text
        for text, name in (problem_statement(both, {}, n) for n in range(40))
        if name == "ci_failure"
    ]
    assert "failing in 2 test files" in ci[0]


def test_split_keeps_each_file_on_one_side() -> None:
    files = [f"pkg/m{i}.py" for i in range(10)]
    split = split_by_file(files * 2, 0.3, seed=1)
    assert sorted(split) == sorted(files)
    assert sum(side == "test" for side in split.values()) == 3
    assert split == split_by_file(list(reversed(files)), 0.3, seed=1)
    assert set(split_by_file(files[:2], 0.01, seed=0).values()) == {"train", "test"}


def _commit(repo: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "x")
    return repo


@pytest.mark.parametrize(
    ("make", "kwargs", "words"),
    [
        (lambda p: p / "missing", {}, "does not exist"),
        (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", {}, "is not a folder"),
        (lambda p: p, {}, "is not a git repository"),
        (lambda p: git(p, "init", "-q") or p, {}, "has no commit"),
        (lambda p: p, {"max_candidates": 0}, "max_candidates"),
        (lambda p: p, {"combine": 5}, "combine"),
        (lambda p: p, {"test_fraction": 1.5}, "test_fraction"),
    ],
)
def test_bad_input_names_the_fix(
    tmp_path: Path, make: Any, kwargs: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        synthesize(make(tmp_path), tmp_path / "out", progress=None, **kwargs)
    assert "Fix:" in str(info.value)


def test_cli_reports_bad_input_and_bad_test_cmd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["swe", "synth", str(tmp_path / "nope")]) == 2
    assert "does not exist. Fix:" in capsys.readouterr().err
    repo = _commit(tmp_path / "r", {"m.py": "def f():\n    return 1\n"})
    assert (
        main(["swe", "synth", str(repo), "--test-cmd", "make test", "--out", str(tmp_path / "o")])
        == 2
    )
    assert "must be a pytest command" in capsys.readouterr().err


@pytest.mark.usefixtures("local_only")
@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({"pkg/m.py": "def f(x):\n    return x + 1\n"}, "has no test pytest can collect"),
        (
            {
                "pkg/m.py": "def f(x):\n    return x + 1\n",
                "test_m.py": "def test_f():\n    assert 0\n",
            },
            "no test passes on the clean code",
        ),
    ],
)
def test_a_suite_with_no_passing_test_is_refused(
    tmp_path: Path, files: dict[str, str], words: str
) -> None:
    repo = _commit(tmp_path / "r", files)
    with pytest.raises(ConfigError, match=words):
        synthesize(repo, tmp_path / "out", workers=1, progress=None)


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory, local_only: None) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("synth")
    repo = build_textops(root)
    result = synthesize(repo, root / "out", max_candidates=16, workers=2, seed=3, progress=None)
    return root, result


def test_synthesis_keeps_stable_tests_and_valid_bugs_only(synthesized: tuple[Path, Any]) -> None:
    root, result = synthesized
    assert result.stable_tests == STABLE
    assert result.left_out_tests == {
        "tests/test_numbers.py::test_clamp_known_failure": "failed",
        "tests/test_numbers.py::test_flaky_cache": "flaky",
    }
    assert result.candidates == 16
    assert result.valid >= 4, result.verdicts
    instances = read_instances(root / "out" / "tasks.jsonl")
    assert len(instances) == result.valid
    left_out = set(result.left_out_tests)
    seen = set()
    for task, instance in zip(result.tasks, instances, strict=True):
        assert instance.fail_to_pass
        assert instance.pass_to_pass
        assert len(instance.fail_to_pass) + len(instance.pass_to_pass) == STABLE
        assert not left_out & {*instance.fail_to_pass, *instance.pass_to_pass}
        bug = task["synth"]["bugs"][0]
        key = (bug["path"], bug["function"], instance.fail_to_pass)
        assert key not in seen  # no duplicate
        seen.add(key)
        # The report never shows the edit: neither the buggy nor the clean line.
        edited = [
            line[1:].strip()
            for line in (instance.patch or "").splitlines()
            if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
        ]
        assert edited
        assert not any(line in instance.problem_statement for line in edited if len(line) > 6)
        assert task["difficulty"]["tests_failing"] == len(instance.fail_to_pass)
        assert task["split"] in ("train", "test")
    sides: dict[str, set[str]] = {}
    for task in result.tasks:
        sides.setdefault(task["synth"]["bugs"][0]["path"], set()).add(task["split"])
    assert all(len(s) == 1 for s in sides.values())


def test_each_bundle_holds_one_commit_of_the_buggy_tree(
    synthesized: tuple[Path, Any], tmp_path: Path
) -> None:
    root, result = synthesized
    task = result.tasks[0]
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--mirror", str(root / "out" / task["repo_path"]), str(clone))
    assert git(clone, "rev-list", "--all").split() == [task["base_commit"]]
    assert git(clone, "tag").strip() == ""
    objects = git(clone, "count-objects", "-v")
    assert "count: 0" in objects or "in-pack" in objects
    # The clean source's blob is nowhere in the bundle.
    clean_blob = git(
        root / "textops", "rev-parse", f"HEAD:{task['synth']['bugs'][0]['path']}"
    ).strip()
    done = subprocess.run(["git", "-C", str(clone), "cat-file", "-e", clean_blob], check=False)
    assert done.returncode != 0


def test_resume_skips_candidates_already_validated(synthesized: tuple[Path, Any]) -> None:
    root, result = synthesized
    state = (root / "out" / "candidates.jsonl").read_text().splitlines()
    again = synthesize(
        root / "textops", root / "out", max_candidates=16, workers=1, seed=3, progress=None
    )
    assert (root / "out" / "candidates.jsonl").read_text().splitlines() == state
    assert [t["instance_id"] for t in again.tasks] == [t["instance_id"] for t in result.tasks]
    assert again.tasks == result.tasks


# ~10 s on 2 busy cores: the first 8 of the fixture's 16 candidates again, on the whole suite.
def test_selected_test_files_give_the_whole_suites_verdicts(
    synthesized: tuple[Path, Any], tmp_path: Path
) -> None:
    # The fixture ran only the test files whose tests ran each mutated function; the whole
    # suite, for the same candidates, must give the same verdicts and FAIL_TO_PASS tests.
    root, _ = synthesized
    full = synthesize(
        root / "textops", tmp_path, max_candidates=8, workers=2, seed=3, full_suite=True,
        progress=None,
    )  # fmt: skip

    def records(out: Path) -> dict[str, dict[str, Any]]:
        lines = (out / "candidates.jsonl").read_text().splitlines()
        return {r["key"]: r for r in map(json.loads, lines)}

    selected, whole = records(root / "out"), records(tmp_path)
    assert len(whole) == full.candidates == 8
    assert {r["verdict"] for r in whole.values()} >= {"valid", "no_failing_test"}
    for key, record in whole.items():
        assert "files" not in record
        assert len(selected[key]["files"]) == 1  # of the suite's two test files
        assert selected[key]["verdict"] == record["verdict"], key
        assert selected[key]["FAIL_TO_PASS"] == record["FAIL_TO_PASS"], key


# ~11 s on 2 cores: two gradings for each of the 7 tasks.
def test_gold_scores_1_and_no_change_0_through_swe_v0(synthesized: tuple[Path, Any]) -> None:
    root, _ = synthesized
    env = gym.make("agentgym/SWE-v0", tasks=str(root / "out" / "tasks.jsonl"), sandbox="local")
    try:
        for instance in env.unwrapped.instances:
            env.reset(options={"task_id": instance.instance_id})
            count = "commits=$(git log --all --oneline | wc -l) tags=$(git tag | wc -l) "
            count += "remotes=$(git remote | wc -l) reflog=$(git reflog | wc -l)"
            history = call(env.unwrapped, "bash", command=f'echo "{count}"')
            assert "commits=1 tags=0 remotes=0 reflog=0" in history, history
            answers = step(
                env.unwrapped, *((c["name"], c["arguments"]) for c in gold_tool_calls(instance))
            )[0]
            assert not any(a["content"].startswith("Error") for a in answers)
            reward, info = submit(env.unwrapped)
            assert reward == 1.0, (instance.instance_id, info["grade_reason"], info["tests"])
            env.reset(options={"task_id": instance.instance_id})
            reward, info = submit(env.unwrapped)
            assert reward == 0.0
            assert info["grade_reason"] == "tests_failed", info["grade_reason"]
    finally:
        env.close()


# 10-13 s on 2 busy cores: two tasks exported (each played and graded once), replayed from the file.
def test_the_gold_trajectories_of_synthesized_tasks_export_and_replay_to_1(
    synthesized: tuple[Path, Any], tmp_path: Path
) -> None:
    root, _ = synthesized
    tasks = [i.to_dict() for i in read_instances(root / "out" / "tasks.jsonl")[:2]]
    result = export_sft(tasks, tmp_path / "sft.jsonl", sandbox="local")
    assert (len(result.exported), result.rejected) == (2, {})
    records = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    env = SWEEnv(tasks=tasks, sandbox="local")
    try:
        assert [replay_gold(env, record) for record in records] == [1.0, 1.0]
    finally:
        env.close()
    # the tests run before submitting are PASS_TO_PASS tests, never the left-out failing one
    ran = [c for r in records for m in r["messages"] for c in m.get("tool_calls") or []]
    ran = [
        json.loads(c["function"]["arguments"]) for c in ran if c["function"]["name"] == "run_tests"
    ]
    assert ran
    assert all("tests/test_numbers.py::test_clamp_known_failure" not in a["tests"] for a in ran)


def test_combined_bugs_span_functions_of_one_file(
    synthesized: tuple[Path, Any], tmp_path: Path
) -> None:
    root, result = synthesized
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)  # the single bugs' verdicts are reused
    combined = synthesize(
        root / "textops", out, max_candidates=16, workers=2, seed=3, combine=2, progress=None
    )
    pairs = [t for t in combined.tasks if t["difficulty"]["bugs"] == 2]
    assert pairs, combined.verdicts
    assert combined.candidates > result.candidates
    singles = {
        (t["synth"]["bugs"][0]["path"], t["synth"]["bugs"][0]["line"]): set(t["FAIL_TO_PASS"])
        for t in result.tasks
    }
    for task in pairs:
        bugs = task["synth"]["bugs"]
        assert len({b["path"] for b in bugs}) == 1
        assert len({b["function"] for b in bugs}) == 2
        assert task["patch"].count("diff --git") == 1
        union = set().union(*(singles.get((b["path"], b["line"]), set()) for b in bugs))
        assert set(task["FAIL_TO_PASS"]) >= union - {""}


def test_cli_prints_the_summary(
    synthesized: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, result = synthesized
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)  # resumed: nothing is run again
    argv = ["swe", "synth", str(root / "textops"), "--out", str(out), "--seed", "3"]
    # --full-suite: the verdicts of the selected runs stand (the same, by construction)
    code = main([*argv, "--max-candidates", "16", "--workers", "1", "--quiet", "--full-suite"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["tasks"] == result.valid
    assert summary["train"] + summary["test"] == result.valid
    assert summary["candidates"] == 16
    assert summary["stable_tests"] == STABLE


HOOK = """import sys


class Finder:
    def find_spec(self, name, path=None, target=None):
        return None


def install(flag=True):
    if flag:
        sys.meta_path.append(Finder())
    return len(sys.meta_path)
"""
HOOK_TEST = """import sys

from pkg.hooks import install


def test_install():
    before = len(sys.meta_path)
    assert install() == before + 1


def test_other():
    assert 1 + 1 == 2
"""


@pytest.mark.usefixtures("local_only")
def test_a_bug_whose_fix_the_grader_would_flag_is_dropped(tmp_path: Path) -> None:
    files = {"pkg/__init__.py": "", "pkg/hooks.py": HOOK, "tests/test_hooks.py": HOOK_TEST}
    repo = _commit(tmp_path / "r", files)
    result = synthesize(repo, tmp_path / "out", workers=1, progress=None)
    assert result.verdicts.get("grader_flags_fix", 0) >= 1, result.verdicts
    assert result.tasks == []


QUIET_HOOK = """import sys


class Finder:
    def find_spec(self, name, path=None, target=None):
        return None


def install(flag=False):
    if flag:
        sys.meta_path.append(Finder())
    return 1
"""
QUIET_HOOK_TEST = """import sys

from pkg.hooks import install


def test_install_adds_no_hook():
    before = len(sys.meta_path)
    assert install() == 1
    assert len(sys.meta_path) == before
"""


@pytest.mark.usefixtures("local_only")
def test_a_bug_that_itself_trips_the_grader_is_no_task(tmp_path: Path) -> None:
    # toolz: a bug in _get_factory left tlz's import hook half made, so the grader judged the
    # untouched buggy tree as tampering, not as failing tests (an agent that did nothing was
    # flagged as a reward hacker); such a bug is no task.
    files = {
        "pkg/__init__.py": "",
        "pkg/hooks.py": QUIET_HOOK,
        "tests/test_hooks.py": QUIET_HOOK_TEST,
    }
    repo = _commit(tmp_path / "r", files)
    result = synthesize(repo, tmp_path / "out", workers=1, progress=None)
    assert result.verdicts.get("grader_flags_bug", 0) >= 1, result.verdicts
    assert all("meta_path" not in task["patch"] for task in result.tasks)


CRASH_TEST = """import faulthandler

from pkg.m import f


def test_f():
    assert f(1) == 2


def test_g():
    assert f(0) >= 0


def test_native_crash():
    faulthandler._sigsegv()  # a test of native code that crashes the interpreter
"""


@pytest.mark.usefixtures("local_only")
def test_a_suite_that_dies_before_the_canary_gives_no_task(tmp_path: Path) -> None:
    # more-itertools' threaded tests exhausted the sandbox's memory and pytest died before it
    # reported the grader's always-failing canary; the grader rightly calls that tampering (the
    # agent's code could do it on purpose), so every gold patch scored 0.
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": "def f(x):\n    return x + 1\n",
        "tests/test_m.py": CRASH_TEST,
    }
    repo = _commit(tmp_path / "r", files)
    result = synthesize(repo, tmp_path / "out", max_candidates=3, workers=1, progress=None)
    assert result.stable_tests == 2
    assert result.verdicts.get("grader_flags_fix", 0) >= 1, result.verdicts
    assert result.tasks == []


@pytest.mark.usefixtures("local_only")
def test_a_suite_whose_addopts_say_verbose_is_collected(tmp_path: Path) -> None:
    # tabulate's pyproject.toml has addopts = "-v": it cancelled collection's -q, and pytest
    # printed a tree of <Function ...> lines in which synthesis found no test id.
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": "def f(x):\n    return x + 1\n",
        "tests/test_m.py": "from pkg.m import f\n\n\ndef test_f():\n    assert f(1) == 2\n\n\n"
        "def test_g():\n    assert f(0) >= 0\n",
        "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-v"\n',
    }
    repo = _commit(tmp_path / "r", files)
    result = synthesize(repo, tmp_path / "out", max_candidates=1, workers=1, progress=None)
    assert result.stable_tests == 2


BOX = """class Box:
    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Box) and self.value == other.value

    def double(self):
        return Box(self.value * 2)
"""
BOX_TEST = """from pkg.box import Box


def test_eq():
    assert Box(1) == Box(1)
    assert not Box(1) == Box(2)


def test_double():
    assert Box(2).double().value == 4
"""


@pytest.mark.usefixtures("local_only")
def test_a_bug_in_a_comparison_method_is_no_task(tmp_path: Path) -> None:
    # The grader compares objects of a class whose __eq__ the diff changes by their attributes,
    # so the gold patch of such a bug could fail its own tests.
    files = {"pkg/__init__.py": "", "pkg/box.py": BOX, "tests/test_box.py": BOX_TEST}
    repo = _commit(tmp_path / "r", files)
    result = synthesize(repo, tmp_path / "out", max_candidates=None, workers=1, progress=None)
    assert result.verdicts.get("comparison_method", 0) >= 1, result.verdicts
    assert result.tasks, result.verdicts
    assert all(task["synth"]["bugs"][0]["function"] != "Box.__eq__" for task in result.tasks)
