"""Loading SWE instances (SWE-bench / SWE-Gym / R2E-Gym spellings) and checking them out."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from agentgym.envs.swe import SWEInstance, load_instances, materialize, read_instances
from agentgym.envs.swe.backends import make_backend
from agentgym.error import ConfigError, SandboxUnavailable


def write_jsonl(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def sh(repo: Path, *args: str) -> str:
    return subprocess.run(args, cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def folder(tmp_path: Path, calc_jsonl: Path) -> Path:
    """A fresh folder holding the calc bundle (repo_path "calc.bundle" resolves here)."""
    shutil.copy(calc_jsonl.parent / "calc.bundle", tmp_path / "calc.bundle")
    return tmp_path


def test_reads_the_swe_bench_record(calc_jsonl: Path, calc_record: dict[str, Any]) -> None:
    (instance,) = read_instances(calc_jsonl)
    assert isinstance(instance, SWEInstance)
    assert instance.instance_id == instance.task_id == "calc__calc-1"
    assert instance.repo_path == calc_jsonl.parent / "calc.bundle"
    assert instance.fail_to_pass == ("tests/test_ops.py::test_mean_float",)
    assert instance.test_files == ("tests/test_ops.py",)
    assert instance.extra["difficulty"] == "easy"
    as_dict = load_instances(calc_jsonl)[0]
    assert as_dict["FAIL_TO_PASS"] == calc_record["FAIL_TO_PASS"]
    assert as_dict["repo_path"] == str(calc_jsonl.parent / "calc.bundle")
    assert as_dict["version"] == "1.0"  # extra fields come back


def test_test_ids_may_be_json_strings_and_other_spellings(
    folder: Path, calc_record: dict[str, Any]
) -> None:
    r2e = {
        "id": "x-1",
        "repo_name": "owner/calc",
        "local_repo": "calc.bundle",
        "commit_hash": calc_record["base_commit"],
        "issue": "broken",
        "fail_to_pass": json.dumps(calc_record["FAIL_TO_PASS"]),
        "pass_to_pass": json.dumps(calc_record["PASS_TO_PASS"]),
        "docker_image": "img:1",
        "setup_commands": "true",
    }
    (instance,) = read_instances(write_jsonl(folder / "r2e.jsonl", r2e))
    assert instance.instance_id == "x-1"
    assert instance.repo == "owner/calc"
    assert instance.fail_to_pass == tuple(calc_record["FAIL_TO_PASS"])
    assert instance.image == "img:1"
    assert instance.setup == ("true",)
    assert instance.test_patch == ""
    assert instance.patch is None


def test_a_list_of_dicts_resolves_paths_from_the_current_dir(
    folder: Path, calc_record: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    (instance,) = read_instances([calc_record])
    assert instance.repo_path == folder / "calc.bundle"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"FAIL_TO_PASS": []}, ["line 2", "'FAIL_TO_PASS'", "non-empty list"]),
        ({"FAIL_TO_PASS": "not json"}, ["'FAIL_TO_PASS'", "tests/test_x.py::test_a"]),
        ({"base_commit": None}, ["line 2", "'base_commit'", "missing", "commit_hash"]),
        ({"repo_path": "nowhere.bundle"}, ["'repo_path'", "names nothing", "JSONL file's folder"]),
        ({"repo_path": None}, ["'repo_path'", "is missing", "relative to"]),
        ({"setup": 3}, ["'setup'", "shell command"]),
        ({"problem_statement": ""}, ["'problem_statement'", "non-empty"]),
    ],
)
def test_a_bad_field_names_the_line_the_field_and_the_fix(
    folder: Path, calc_record: dict[str, Any], change: dict[str, Any], words: list[str]
) -> None:
    bad = {**calc_record, "instance_id": "bad", **change}
    path = write_jsonl(folder / "bad.jsonl", calc_record, bad)
    with pytest.raises(ConfigError) as caught:
        read_instances(path)
    for word in [*words, "Fix:"]:
        assert word in str(caught.value)


def test_bad_json_duplicate_ids_and_bad_sources_are_config_errors(
    folder: Path, calc_record: dict[str, Any]
) -> None:
    (folder / "broken.jsonl").write_text(json.dumps(calc_record) + "\n{oops\n")
    with pytest.raises(ConfigError, match=r"line 2.*not valid JSON"):
        read_instances(folder / "broken.jsonl")
    with pytest.raises(ConfigError, match="more than once"):
        read_instances(write_jsonl(folder / "dup.jsonl", calc_record, calc_record))
    with pytest.raises(ConfigError, match="not a file"):
        read_instances(folder / "missing.jsonl")
    with pytest.raises(ConfigError, match="list of dicts"):
        read_instances(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="holds no instance"):
        read_instances(write_jsonl(folder / "empty.jsonl"))


def test_the_shipped_set_loads() -> None:
    instances = read_instances()
    assert instances
    assert all(i.repo_path is not None and i.repo_path.exists() for i in instances)
    assert load_instances()[0]["instance_id"] == instances[0].instance_id


def _archives(folder: Path) -> dict[str, Path]:
    """The calc repository as a git dir, a tar.gz and a zip."""
    repo = folder / "calc"
    sh(folder, "git", "clone", "-q", "calc.bundle", "calc")
    with tarfile.open(folder / "calc.tar.gz", "w:gz") as tar:
        tar.add(repo, arcname="calc")
    with zipfile.ZipFile(folder / "calc.zip", "w") as archive:
        for file in repo.rglob("*"):
            archive.write(file, file.relative_to(folder))
    return {"dir": repo, "tar": folder / "calc.tar.gz", "zip": folder / "calc.zip"}


@pytest.mark.parametrize("kind", ["bundle", "dir", "tar", "zip"])
def test_materialize_checks_out_base_commit_without_later_history(
    folder: Path, calc_record: dict[str, Any], kind: str
) -> None:
    sources = {"bundle": folder / "calc.bundle", **_archives(folder)}
    (instance,) = read_instances([{**calc_record, "repo_path": str(sources[kind])}])
    repo = materialize(instance, folder / "checkout")
    assert sh(repo, "git", "rev-parse", "HEAD").strip() == calc_record["base_commit"]
    assert sh(repo, "git", "status", "--porcelain") == ""
    assert sh(repo, "git", "remote") == ""
    assert sh(repo, "git", "branch", "--all", "--format=%(refname)").split() == [
        "refs/heads/agentgym"
    ]
    everything = sh(repo, "git", "log", "--all", "--reflog", "--format=%H")
    assert calc_record["fix_commit"] not in everything
    done = subprocess.run(["git", "cat-file", "-e", calc_record["fix_commit"]], cwd=repo)
    assert done.returncode != 0, "the fix commit's object is in the checkout"


def test_materialize_names_a_missing_commit_and_refuses_a_full_folder(
    folder: Path, calc_record: dict[str, Any]
) -> None:
    (instance,) = read_instances([{**calc_record, "repo_path": str(folder / "calc.bundle")}])
    missing = SWEInstance(**{**instance.__dict__, "base_commit": "0" * 40})
    with pytest.raises(ConfigError, match=r"base_commit.*is not a commit"):
        materialize(missing, folder / "a")
    (folder / "b").mkdir()
    (folder / "b" / "x").write_text("")
    with pytest.raises(ConfigError, match="not empty"):
        materialize(instance, folder / "b")


def test_make_backend_rejects_an_unknown_name() -> None:
    with pytest.raises(ConfigError, match=r"'podman'.*'auto', 'local'.*'unsafe-local'"):
        make_backend("podman")
    assert make_backend("local").name == "local"


def test_the_local_backend_names_a_missing_host_requirement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentgym.envs.swe.backends import local

    missing = "the system's python3 cannot import pytest. Fix: apt-get install python3-pytest"
    monkeypatch.setattr(local, "host_problem", lambda: missing)
    with pytest.raises(SandboxUnavailable, match="apt-get install python3-pytest"):
        make_backend("local")
