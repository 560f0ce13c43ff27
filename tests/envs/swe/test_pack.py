"""``agentgym/SWE-Pack-v0``: the shipped pack of tasks from real repositories loads, filters and
keeps its licences; a seeded sample of its tasks scores 1 with the gold patch and 0 with no
change through the env on the local sandbox, and the agent's checkout holds only the base."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
from pathlib import Path

import gymnasium as gym
import pytest

from agentgym.core.errors import ConfigError
from agentgym.envs.swe.pack import PACK_DIR, SPLITS, SWEPackEnv, load_pack, pack_repos
from agentgym.envs.swe.pack.verify import check_task, fixed_blobs

REPOS = pack_repos()
TASKS = load_pack()


def test_the_pack_holds_six_real_repositories_each_with_its_licence_and_attribution() -> None:
    assert len(REPOS) >= 6, REPOS
    notice = (PACK_DIR / "NOTICE").read_text(encoding="utf-8")
    for name in REPOS:
        folder = PACK_DIR / name
        licence = (folder / "LICENSE").read_text(encoding="utf-8")
        assert "Copyright" in licence or "copyright" in licence, name
        build = json.loads((folder / "build.json").read_text(encoding="utf-8"))
        assert f"{build['repository']} at commit {build['upstream_commit']}" in notice
        with gzip.open(folder / "tasks.jsonl.gz", "rt", encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        # The recorded figures are those of the shipped tasks.
        assert build["valid"] == len(records) > 0
        assert build["candidates"] >= build["valid"]
        assert build["train"] + build["test"] == len(records)


def test_every_task_is_a_branch_of_its_repositorys_bundle_and_has_a_gold_patch() -> None:
    ids = [task["instance_id"] for task in TASKS]
    assert len(ids) == len(set(ids))
    for name in REPOS:
        bundle = PACK_DIR / name / "tasks.bundle"
        heads = subprocess.run(
            ["git", "bundle", "list-heads", str(bundle)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        branches = dict(zip(heads[1::2], heads[::2], strict=True))
        mine = [task for task in TASKS if Path(task["repo_path"]) == bundle]
        assert len(mine) == len(branches), name
        for task in mine:
            assert branches[f"refs/heads/{task['instance_id']}"] == task["base_commit"]
            assert task["FAIL_TO_PASS"]
            assert task["PASS_TO_PASS"]
            assert not set(task["FAIL_TO_PASS"]) & set(task["PASS_TO_PASS"])
            assert fixed_blobs(task["patch"]), task["instance_id"]
            assert task["split"] in SPLITS


def test_repos_and_split_filter_the_tasks() -> None:
    name = REPOS[0]
    mine = load_pack([name])
    assert mine == [t for t in TASKS if t["repo_path"].endswith(f"/{name}/tasks.bundle")]
    assert load_pack(name) == mine  # one name as a string
    train, test = load_pack(split="train"), load_pack(split="test")
    assert {t["split"] for t in train} == {"train"}
    assert {t["split"] for t in test} == {"test"}
    assert len(train) + len(test) == len(TASKS)
    # Split by source file: no file has tasks on both sides.
    train_files = {(t["repo"], t["synth"]["bugs"][0]["path"]) for t in train}
    assert not train_files & {(t["repo"], t["synth"]["bugs"][0]["path"]) for t in test}


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"repos": ["nosuchrepo"]}, "nosuchrepo"),
        ({"repos": []}, "repos"),
        ({"split": "validation"}, "validation"),
    ],
)
def test_a_bad_filter_is_an_error_naming_the_value_and_the_choices(
    kwargs: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigError, match=named) as caught:
        load_pack(**kwargs)  # type: ignore[arg-type]
    assert "Fix:" in str(caught.value)


def test_the_pack_env_refuses_tasks_of_its_own() -> None:
    with pytest.raises(ConfigError, match="agentgym/SWE-v0"):
        SWEPackEnv(tasks=[{"instance_id": "x"}], sandbox="unsafe-local")


@pytest.mark.slow
def test_a_seeded_sample_scores_1_with_gold_0_without_change_and_holds_no_later_commit(
    local_only: None,
) -> None:
    by_repo: dict[str, list[str]] = {}
    for task in TASKS:
        by_repo.setdefault(Path(task["repo_path"]).parent.name, []).append(task["instance_id"])
    rng = random.Random(0)
    # One task of each repository (about 5 s of CPU each: two graded runs of a suite), so that
    # a broken bundle of any of them shows.
    chosen = [rng.choice(by_repo[name]) for name in sorted(by_repo)]
    env = gym.make("agentgym/SWE-Pack-v0", sandbox="local")
    try:
        for task_id in chosen:
            check = check_task(env.unwrapped, task_id)  # type: ignore[arg-type]
            assert (check.gold, check.no_op) == (1.0, 0.0), (task_id, check.problems)
            base = next(t["base_commit"] for t in TASKS if t["instance_id"] == task_id)
            assert check.commits == [base]
            assert check.leaked_blobs == []
            assert check.ok, check.problems
    finally:
        env.close()
