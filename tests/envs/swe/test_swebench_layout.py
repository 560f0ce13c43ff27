"""SWE-bench harness parity: an image in the SWE-bench / SWE-smith layout runs SWE-v0 tasks.

The layout: the repository at ``/testbed`` (the image's ``WORKDIR``), on a commit the harness
adds on top of ``base_commit``, and a conda env ``testbed`` (``/opt/miniconda3/envs/testbed``)
whose Python has the repository installed in editable mode. The test builds a small image that
mimics it from agentgym's own Python image (offline: nothing is pulled), with the ``calc``
task's repository, a venv standing in for the conda env and an editable-install ``.pth``
pointing at ``/testbed``; the image is removed afterwards. Skipped without Docker (failed
under ``AGENTGYM_REQUIRE_DOCKER=1``).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from docker_checks import containers, new_label, wait_until

from agentgym.core import run_sync
from agentgym.envs.swe import SWEInstance, read_instances
from agentgym.envs.swe.backends.base import REPO_DIR
from agentgym.envs.swe.grader import agent_diff, grade
from agentgym.envs.swe.images import (
    IMAGE_REPO_ENV,
    REPO_LABEL,
    SWEBENCH_ENV_BIN,
    image_layout,
)
from agentgym.envs.swe.runner_script import moved
from agentgym.sandbox.image_tag import DEFAULT_IMAGE

DOCKERFILE = f"""FROM {DEFAULT_IMAGE}
COPY testbed /testbed
RUN python3 -m venv --system-site-packages --without-pip /opt/miniconda3/envs/testbed \\
 && echo /testbed > "$(/opt/miniconda3/envs/testbed/bin/python3 -c \\
    'import sysconfig; print(sysconfig.get_paths()["purelib"])')/__editable__.calc.pth" \\
 && chmod -R a+rwX /testbed
WORKDIR /testbed/
"""


@pytest.fixture(scope="module")
def testbed_image(docker_ready: bool, calc_jsonl: Path) -> Iterator[str]:
    """A local image in the SWE-bench layout holding ``calc``; removed after the module."""
    import docker

    record = json.loads(calc_jsonl.read_text())
    client = docker.from_env()
    tag = f"agentgym-test/swebench-layout:{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="agentgym-testbed-") as context:
        repo = Path(context) / "testbed"
        subprocess.run(
            ["git", "clone", "-q", str(calc_jsonl.parent / "calc.bundle"), str(repo)], check=True
        )
        git(repo, "checkout", "-q", record["base_commit"])
        git(repo, "remote", "remove", "origin")
        # The harness commits what its install step changed in tracked files on top.
        (repo / "calc" / "__init__.py").write_text('__version__ = "1.0"\n')
        git(repo, "commit", "-q", "--allow-empty", "-am", "SWE-bench")
        (Path(context) / "Dockerfile").write_text(DOCKERFILE)
        client.images.build(
            path=context, tag=tag, network_mode="none", pull=False, rm=True, forcerm=True
        )
    yield tag
    client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def instance(testbed_image: str, calc_jsonl: Path) -> SWEInstance:
    """``calc`` as a SWE-bench record naming the image and no repository on this machine."""
    record = {**json.loads(calc_jsonl.read_text()), "image": testbed_image}
    del record["repo_path"]
    path = calc_jsonl.parent / "testbed.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return read_instances(path)[0]


@pytest.fixture
def backend(docker_ready: bool) -> Iterator[Any]:
    from agentgym.envs.swe.backends.docker import DockerSWEBackend

    labels = new_label()
    made = DockerSWEBackend(pool_size=0, labels=labels, build=False)
    yield made
    run_sync(made.aclose())
    assert wait_until(lambda: not containers(labels), 30), "containers outlived the test"


def test_a_swebench_layout_image_runs_the_task_and_grades_like_the_harness(
    backend: Any, instance: SWEInstance
) -> None:
    async def look() -> list[str]:
        sandbox = await backend.acquire(instance)
        try:
            script = 'command -v python3; git log --format=%s -1; echo "$' + IMAGE_REPO_ENV + '"'
            run = await sandbox.run(["sh", "-c", script], timeout=30, cwd=REPO_DIR)
            return run.stdout.split()
        finally:
            await backend.release(sandbox)

    python, subject, image_repo = run_sync(look())
    assert python == f"{SWEBENCH_ENV_BIN}/python3"  # conda activate testbed, in effect
    assert subject == "SWE-bench"  # the image's own commit on top of base_commit
    assert image_repo == "/testbed"

    async def fix() -> bytes | None:
        sandbox = await backend.acquire(instance)
        try:
            ops = (await sandbox.read_file(f"{REPO_DIR}/calc/ops.py")).decode()
            await sandbox.write_file(f"{REPO_DIR}/calc/ops.py", ops.replace("//", "/"))
            return (await agent_diff(sandbox, instance, max_bytes=1 << 20))[0]
        finally:
            await backend.release(sandbox)

    patch = run_sync(fix())
    assert patch is not None
    assert b"calc/ops.py" in patch
    assert b"calc/__init__.py" not in patch  # taken against the image's commit
    gold = run_sync(grade(backend, instance, patch, test_timeout=60, max_bytes=1 << 20))
    assert (gold.reward, gold.reason, gold.tampering) == (1.0, "resolved", []), gold.test_output
    assert set(gold.fail_to_pass.values()) | set(gold.pass_to_pass.values()) == {"passed"}

    # The harness's reset: the agent's change to a file the test patch touches is undone.
    tests = instance.test_patch.split("+++ b/", 1)[1].split("\n", 1)[0]
    cheat = (
        f"diff --git a/{tests} b/{tests}\n--- a/{tests}\n+++ b/{tests}\n"
        "@@ -1,3 +1,3 @@\n-from calc.ops import add, mean\n+from calc.ops import add, mean  # \n"
        " \n \n"
    )
    none = run_sync(grade(backend, instance, cheat.encode(), test_timeout=60, max_bytes=1 << 20))
    assert none.reward == 0.0, none.test_output
    assert none.dropped == {tests: "touched by test_patch"}
    assert none.fail_to_pass == {"tests/test_ops.py::test_mean_float": "failed"}


def test_the_layout_is_read_from_the_images_config() -> None:
    assert image_layout({"Labels": {REPO_LABEL: "/opt/repo"}, "WorkingDir": "/testbed"}) == (
        "/opt/repo",
        (),
    )
    assert image_layout({"WorkingDir": "/work"}) == (None, ())
    repo, env = image_layout({"WorkingDir": "/testbed/", "Env": ["PATH=/opt/miniconda3/bin:/bin"]})
    assert repo == "/testbed"
    assert dict(env)["PATH"] == f"{SWEBENCH_ENV_BIN}:/opt/miniconda3/bin:/bin"
    assert dict(env)[IMAGE_REPO_ENV] == "/testbed"


def test_editable_installs_of_the_image_repository_point_at_the_copy() -> None:
    paths = ["/usr/lib/python3.11", "/testbed", "/testbed/src", "/testbed2/x"]
    assert moved(paths, "/testbed", "/sandbox/repo") == [
        "/usr/lib/python3.11",
        "/sandbox/repo",
        "/sandbox/repo/src",
        "/testbed2/x",
    ]
    assert moved(paths, None, "/sandbox/repo") == paths
