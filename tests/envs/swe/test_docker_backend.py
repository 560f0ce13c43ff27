"""The docker SWE backend and its image builder, on the tiny ``calc`` instance.

Skipped without a Docker daemon and agentgym's image, failed instead when
``AGENTGYM_REQUIRE_DOCKER=1`` (see tests/envs/conftest.py). Every backend here labels its
containers with a label of its own, so the checks count exactly this test's containers.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_checks import containers, new_label, processes_in, wait_until

from agentgym.core import run_sync
from agentgym.envs.swe import SWEInstance, images, read_instances
from agentgym.envs.swe.backends.docker import SWE_LABEL, DockerSWEBackend, docker_available
from agentgym.error import ConfigError, SandboxError, SandboxUnavailable
from agentgym.sandbox.images import DEFAULT_IMAGE

arun = run_sync


def _client() -> Any:
    import docker  # the [docker] extra; a missing SDK must fail, not skip

    return docker.from_env()


def _remove_image(tag: str) -> None:
    import docker

    with contextlib.suppress(docker.errors.ImageNotFound):
        _client().images.remove(tag)


def _exists(container_id: str) -> bool:
    return bool(_client().api.containers(all=True, filters={"id": container_id}))


@pytest.fixture(scope="module")
def calc(calc_jsonl: Path, docker_ready: bool) -> SWEInstance:
    instance = read_instances(calc_jsonl)[0]
    for tag in _stale_builder_tags(instance):
        _remove_image(tag)  # a tag: an image with other tags keeps them, and so lives on
    return instance


def _stale_builder_tags(instance: SWEInstance) -> list[str]:
    """Tags the image builder gave ``instance``'s id for other contents (an earlier version of
    the ``calc`` repository or of ``images.RECIPE``) that no container uses.

    ``calc``'s commits are fixed, so its tag is the same in every session; only a change to it
    leaves a stale image. Only images carrying the builder's labels for this id, and only the
    builder's own tags of them, are candidates: nothing built or tagged otherwise is touched.
    """
    builder = [f"agentgym.swe.instance={instance.instance_id}", "agentgym.swe.recipe"]
    ours = re.compile(re.escape(f"{images.IMAGE_NAME}:{instance.instance_id}-") + "[0-9a-f]{12}")
    current = images.image_tag(instance)
    in_use = {c["ImageID"] for c in _client().api.containers(all=True)}
    stale = []
    for image in _client().images.list(name=images.IMAGE_NAME, filters={"label": builder}):
        if image.labels.get(images.REPO_LABEL) == images.IMAGE_REPO_DIR and image.id not in in_use:
            stale += [tag for tag in image.tags if ours.fullmatch(tag) and tag != current]
    return stale


@pytest.fixture
def labels() -> Iterator[dict[str, str]]:
    mine = new_label()
    yield mine
    assert wait_until(lambda: not containers(mine), 30), "containers outlived the test"


@pytest.fixture
def backend(labels: dict[str, str]) -> Iterator[DockerSWEBackend]:
    b = DockerSWEBackend(pool_size=1, labels=labels)
    yield b
    arun(b.aclose())


@contextlib.contextmanager
def _other(calc: SWEInstance, suffix: str, **changes: Any) -> Iterator[SWEInstance]:
    """``calc`` under another id (so another image), whose image is removed afterwards."""
    instance = dataclasses.replace(calc, instance_id=f"calc__calc-{suffix}", **changes)
    try:
        yield instance
    finally:
        _remove_image(images.image_tag(instance))


async def _sh(sb: Any, cmd: str) -> Any:
    return await sb.run(cmd, timeout=60, cwd="repo")


def test_docker_is_available(docker_ready: bool) -> None:
    assert docker_available()


def test_acquire_gives_the_repository_at_base_commit(
    backend: DockerSWEBackend, calc: SWEInstance, calc_record: dict[str, Any], labels: Any
) -> None:
    async def episode() -> list[Any]:
        sb = await backend.acquire(calc)
        runs = [
            await _sh(sb, "git status --porcelain"),
            await _sh(sb, "git rev-parse HEAD"),
            await _sh(sb, "git log --all --format=%H"),
            await _sh(sb, "python3 -m pytest -q -p no:cacheprovider tests/test_ops.py"),
            await _sh(sb, "git status --porcelain"),
            await _sh(sb, "id -u; touch /usr/x || echo read-only"),
        ]
        cid = sb.container_id
        assert {SWE_LABEL, *labels} <= set(containers(labels)[0]["Labels"])
        await backend.release(sb)
        return [cid, *runs]

    cid, status, head, log, tests, status_after, who = arun(episode())
    assert status.ok
    assert status.stdout == ""
    assert head.stdout.strip() == calc.base_commit
    assert calc_record["fix_commit"] not in log.stdout  # the fix is not in the history
    assert tests.ok
    assert "2 passed" in tests.stdout
    assert status_after.stdout == ""  # __pycache__ and .pytest_cache are ignored
    uid, verdict = who.stdout.split()
    assert uid != "0"
    assert verdict == "read-only"
    assert wait_until(lambda: not _exists(cid), 30), "release left the container"


def test_episodes_never_share_a_container(backend: DockerSWEBackend, calc: SWEInstance) -> None:
    async def two() -> tuple[str, str, str]:
        a, b = await backend.acquire(calc), await backend.acquire(calc)
        await _sh(a, "echo broken > calc/ops.py")
        seen_by_b = (await _sh(b, "git status --porcelain")).stdout
        await backend.release(a)
        c = await backend.acquire(calc)  # never the released container, cleaned or not
        seen_by_c = (await _sh(c, "git status --porcelain")).stdout
        ids = {a.container_id, b.container_id, c.container_id}
        return seen_by_b, seen_by_c, str(len(ids))

    assert arun(two()) == ("", "", "3")


def test_warm_pool_hands_out_started_containers(
    backend: DockerSWEBackend, calc: SWEInstance, labels: dict[str, str]
) -> None:
    arun(backend.warm([calc]))
    warm = {c["Id"] for c in containers(labels)}
    assert len(warm) == 1
    sb = arun(backend.acquire(calc))
    assert sb.container_id in warm
    assert wait_until(lambda: len(containers(labels)) == 2, 60), "the pool was not refilled"
    arun(backend.release(sb))


def test_backends_of_a_process_share_warm_pools(calc: SWEInstance, labels: Any) -> None:
    first, second = (DockerSWEBackend(pool_size=1, labels=labels) for _ in range(2))
    arun(first.warm([calc]))
    arun(second.warm([calc]))
    assert len(containers(labels)) == 1
    arun(first.aclose())
    assert len(containers(labels)) == 1  # the second backend still uses the pool
    arun(second.aclose())
    assert not containers(labels)


def test_only_the_most_recent_images_stay_warm(calc: SWEInstance, labels: Any) -> None:
    with _other(calc, "warm") as other:
        backend = DockerSWEBackend(pool_size=1, max_warm_images=1, labels=labels)
        try:
            arun(backend.warm([calc]))
            arun(backend.warm([other]))

            def warm_of(instance: SWEInstance) -> int:
                tag = images.image_tag(instance)
                return len(containers({**labels, SWE_LABEL: tag}))

            assert wait_until(lambda: warm_of(calc) == 0, 30)
            assert warm_of(other) == 1
            sb = arun(backend.acquire(calc))  # a cold start still works
            assert arun(_sh(sb, "git status --porcelain")).ok
        finally:
            arun(backend.aclose())


def test_setup_commands_run_offline_at_build(calc: SWEInstance, labels: Any) -> None:
    compile_ = "python3 -m compileall -q calc && ls calc/__pycache__ > /dev/null"
    with _other(calc, "setup", setup=(compile_,)) as built:
        backend = DockerSWEBackend(pool_size=0, labels=labels)
        try:
            sb = arun(backend.acquire(built))
            assert arun(_sh(sb, "ls calc/__pycache__")).stdout.strip()  # made by setup
            assert arun(_sh(sb, "git status --porcelain")).stdout == ""
        finally:
            arun(backend.aclose())
    fetch = "python3 -c \"import urllib.request as u; u.urlopen('http://deb.debian.org')\""
    with (
        _other(calc, "online", setup=(fetch,)) as offline,
        pytest.raises(SandboxError, match="calc__calc-online"),
    ):
        images.build_instance_image(offline)


def test_a_rebuild_leaves_no_untagged_image(calc: SWEInstance) -> None:
    with _other(calc, "rebuild") as instance:
        tag = images.build_instance_image(instance)
        old = _client().images.get(tag).id
        assert images.build_instance_image(instance, force=True) == tag
        assert _client().images.get(tag).id != old
        mine = {"dangling": True, "label": "agentgym.swe.instance=calc__calc-rebuild"}
        assert not _client().images.list(filters=mine)

    def dangling() -> set[str]:
        return {i.id for i in _client().images.list(filters={"dangling": True})}

    before = dangling()
    with (
        _other(calc, "broken", setup=("exit 7",)) as broken,
        pytest.raises(SandboxError, match="calc__calc-broken"),
    ):
        images.build_instance_image(broken)
    assert dangling() <= before  # the failed build's layers went with it


def test_built_images_carry_the_builders_labels(calc: SWEInstance) -> None:
    """What the clean-up of stale calc tags (the ``calc`` fixture) goes by."""
    labels = _client().images.get(images.build_instance_image(calc)).labels
    assert labels[images.REPO_LABEL] == images.IMAGE_REPO_DIR
    assert labels["agentgym.swe.instance"] == calc.instance_id
    assert labels["agentgym.swe.base_commit"] == calc.base_commit
    assert labels["agentgym.swe.recipe"] == str(images.RECIPE)


def test_image_tags_are_deterministic(calc: SWEInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    tag = images.image_tag(calc)
    assert tag == images.image_tag(dataclasses.replace(calc))
    assert tag.startswith("agentgym/swe:calc__calc-1-")
    assert images.image_tag(dataclasses.replace(calc, base_commit="0" * 40)) != tag
    assert images.image_tag(dataclasses.replace(calc, setup=("true",))) != tag
    monkeypatch.setattr(images, "RECIPE", images.RECIPE + 1)
    assert images.image_tag(calc) != tag
    assert "compileall" in images.dockerfile(dataclasses.replace(calc, setup=("compileall",)))


def test_an_instance_image_is_used_as_is(
    backend: DockerSWEBackend, calc: SWEInstance, labels: dict[str, str]
) -> None:
    given = f"agentgym-test/given:{labels['agentgym.test']}"
    _client().images.get(images.build_instance_image(calc)).tag(given)
    try:
        instance = dataclasses.replace(calc, image=given, repo_path=None)
        sb = arun(backend.acquire(instance))
        assert containers(labels)[0]["Image"] == given
        assert arun(_sh(sb, "git rev-parse HEAD")).stdout.strip() == calc.base_commit
        arun(backend.release(sb))
    finally:
        _remove_image(given)


def test_an_image_without_the_repository_gets_it_copied_in(
    backend: DockerSWEBackend, calc: SWEInstance
) -> None:
    setup = ("python3 -m compileall -q calc",)
    instance = dataclasses.replace(calc, image=DEFAULT_IMAGE, setup=setup)
    sb = arun(backend.acquire(instance))
    assert arun(_sh(sb, "git rev-parse HEAD")).stdout.strip() == calc.base_commit
    assert arun(_sh(sb, "ls calc/__pycache__")).stdout.strip()  # setup ran in the sandbox
    assert arun(_sh(sb, "git status --porcelain")).stdout == ""


def test_missing_images_name_the_fix(calc: SWEInstance, labels: dict[str, str]) -> None:
    backend = DockerSWEBackend(build=False, labels=labels)
    try:
        missing = dataclasses.replace(calc, image="agentgym-test/nope:0")
        with pytest.raises(SandboxUnavailable, match=r"agentgym-test/nope:0.*Fix"):
            arun(backend.acquire(missing))
        unbuilt = dataclasses.replace(calc, instance_id="calc__never-built")
        with pytest.raises(SandboxUnavailable, match="images build calc__never-built"):
            arun(backend.acquire(unbuilt))
    finally:
        arun(backend.aclose())


def test_close_removes_everything_and_is_final(calc: SWEInstance, labels: dict[str, str]) -> None:
    backend = DockerSWEBackend(pool_size=2, labels=labels)
    held = [arun(backend.acquire(calc)) for _ in range(3)]
    arun(backend.release(held[0]))
    arun(backend.release(held[0]))  # a second release is a no-op
    arun(backend.aclose())
    arun(backend.aclose())
    assert not containers(labels)
    with pytest.raises(SandboxError, match="closed"):
        arun(backend.acquire(calc))


def test_a_sandbox_held_past_max_lifetime_is_removed(
    calc: SWEInstance, labels: dict[str, str]
) -> None:
    backend = DockerSWEBackend(pool_size=0, max_lifetime=1, labels=labels)
    try:
        sb = arun(backend.acquire(calc))
        assert wait_until(lambda: not containers(labels), 30)
        with pytest.raises(SandboxError):
            arun(_sh(sb, "true"))
        assert backend.held == 0
    finally:
        arun(backend.aclose())


def test_a_timed_out_command_leaves_no_process(
    backend: DockerSWEBackend, calc: SWEInstance
) -> None:
    sb = arun(backend.acquire(calc))
    run = arun(sb.run("sleep 300 & sleep 300", timeout=1, cwd="repo"))
    assert run.timed_out
    assert processes_in(sb.container_id) == []
    assert arun(_sh(sb, "echo alive")).stdout == "alive\n"


def test_a_cancelled_acquire_leaves_no_container(calc: SWEInstance, labels: Any) -> None:
    backend = DockerSWEBackend(pool_size=0, labels=labels)

    async def cancel_midway() -> None:
        await backend.warm([calc])  # the image exists: the acquire below waits on a container
        task = asyncio.ensure_future(backend.acquire(calc))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        arun(cancel_midway())
        assert wait_until(lambda: not containers(labels), 30)
    finally:
        arun(backend.aclose())


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"pool_size": -1}, "pool_size"),
        ({"max_lifetime": 0}, "max_lifetime"),
        ({"memory": 1}, "memory"),
        ({"limits": {"memory": 1}}, "limits"),
        ({"labels": {"a": 1}}, "labels"),
    ],
)
def test_config_errors_name_the_argument(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        DockerSWEBackend(**kwargs)


def test_images_cli_builds_lists_and_removes(
    calc_record: dict[str, Any],
    calc_jsonl: Path,
    tmp_path: Path,
    capsys: Any,
    docker_ready: bool,
) -> None:
    record = {**calc_record, "instance_id": "calc__calc-cli"}
    record["repo_path"] = str(calc_jsonl.parent / calc_record["repo_path"])
    path = tmp_path / "cli.jsonl"
    path.write_text(json.dumps(record) + "\n")
    tag = images.image_tag(read_instances(path)[0])
    try:
        assert images.main(["build", "--instances", str(path)]) == 1  # names no instance
        assert images.main(["build", "--instances", str(path), "--all"]) == 0
        assert images.main(["list", "--instances", str(path)]) == 0
        assert f"calc__calc-cli\t{tag}\tpresent" in capsys.readouterr().out
        assert images.main(["remove", "--instances", str(path), "calc__calc-cli"]) == 0
        images.main(["list", "--instances", str(path)])
        assert f"{tag}\tmissing" in capsys.readouterr().out
    finally:
        _remove_image(tag)


_ORPHAN = """
import asyncio, json, sys
from agentgym.envs.swe import read_instances
from agentgym.envs.swe.backends.docker import DockerSWEBackend
async def main():
    backend = DockerSWEBackend(pool_size=1, labels=json.loads(sys.argv[2]))
    sb = await backend.acquire(read_instances(sys.argv[1])[0])
    print(sb.container_id, flush=True)
    await sb.run("sleep 300", timeout=300)
asyncio.run(main())
"""


@pytest.mark.slow
def test_containers_go_when_the_process_is_killed(
    calc: SWEInstance, calc_jsonl: Path, labels: dict[str, str]
) -> None:
    argv = [sys.executable, "-c", _ORPHAN, str(calc_jsonl), json.dumps(labels)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip()
            # the held container and the warm one that replaced it
            assert wait_until(lambda: len(containers(labels)) == 2, 60)
        finally:
            proc.kill()  # SIGKILL: no atexit, no finally; only the reaper is left
    assert wait_until(lambda: not containers(labels), 60)
