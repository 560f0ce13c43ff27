"""Per-instance docker images: the project's Python image plus the instance's repository.

An instance's image is ``agentgym.sandbox.images.DEFAULT_IMAGE`` (Debian, python3, pytest,
git) with the repository checked out at ``base_commit`` (``materialize``) and the instance's
``setup`` commands run in it, built offline: ``docker build`` of a generated Dockerfile and a
local context, with no network and nothing pulled. The repository is kept at ``IMAGE_REPO_DIR``
(named by the image's ``agentgym.swe.repo`` label); each container copies it into its own work
dir, so every episode and every grading run starts from the image's pristine copy. Setup runs
at ``/work/repo``, the path the copy has in the containers, so absolute paths it records (an
editable install) stay right.

Tags are deterministic: ``agentgym/swe:<instance id>-<hash>``, the hash covering the instance
id, base commit, setup commands, base image and ``RECIPE``. An instance's own ``image`` is used
as is and never built.

    python -m agentgym.envs.swe.images build --all                  # every shipped instance
    python -m agentgym.envs.swe.images build minicsv__minicsv-3     # some of them
    python -m agentgym.envs.swe.images build --instances mine.jsonl --all --force
    python -m agentgym.envs.swe.images list                         # tags, and which exist
    python -m agentgym.envs.swe.images remove --all                 # agentgym/swe images
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agentgym.core.errors import ConfigError, Error, SandboxError, SandboxUnavailable
from agentgym.envs.swe.backends.base import REPO_DIR
from agentgym.envs.swe.instances import SWEInstance, read_instances
from agentgym.envs.swe.repo import materialize
from agentgym.sandbox import docker_client
from agentgym.sandbox.images import DEFAULT_IMAGE, image_exists

__all__ = [
    "IMAGE_NAME",
    "IMAGE_REPO_DIR",
    "RECIPE",
    "REPO_LABEL",
    "WORKDIR",
    "ImageRef",
    "build_instance_image",
    "dockerfile",
    "ensure_image",
    "image_layout",
    "image_tag",
    "main",
]

RECIPE = 1
"""Bump when what a built image holds changes: every tag changes with it."""
IMAGE_NAME = "agentgym/swe"
WORKDIR = "/work"
"""The containers' work dir; the repository is at ``f"{WORKDIR}/{REPO_DIR}"``."""
IMAGE_REPO_DIR = "/opt/agentgym/repo"
REPO_LABEL = "agentgym.swe.repo"
"""Image label naming the folder that holds the repository in the image."""
_TAG_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


SWEBENCH_REPO_DIR = "/testbed"
"""Where SWE-bench and SWE-smith images keep the repository (their ``WORKDIR``)."""
SWEBENCH_ENV_BIN = "/opt/miniconda3/envs/testbed/bin"
"""The ``bin`` folder of those images' conda env (``conda activate testbed``)."""
IMAGE_REPO_ENV = "AGENTGYM_IMAGE_REPO"
"""Set in the sandboxes of an image whose repository lies outside the work dir: that folder
(the runner maps ``sys.path`` entries under it, e.g. an editable install's, to the copy)."""


@dataclass(frozen=True)
class ImageRef:
    """An existing image for an instance, and where the repository lies in it (if it does)."""

    tag: str
    repo_dir: str | None
    """``REPO_LABEL`` of the image, or ``/testbed`` for an image in the SWE-bench layout;
    ``None``: the backend copies the repository in itself."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment of every command in its sandboxes (the SWE-bench layout's conda env)."""


def image_layout(config: dict[str, Any]) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """Where the repository lies in an image, and the environment its commands need, from the
    image's ``Config``: ``REPO_LABEL`` when set; else, for an image in the SWE-bench / SWE-smith
    layout (``WORKDIR /testbed``), ``/testbed`` with that layout's conda env first on ``PATH``
    (what ``conda activate testbed`` does for Python); else neither."""
    labels = config.get("Labels") or {}
    if labels.get(REPO_LABEL):
        return str(labels[REPO_LABEL]), ()
    if str(config.get("WorkingDir") or "").rstrip("/") != SWEBENCH_REPO_DIR:
        return None, ()
    image_env = dict(str(e).split("=", 1) for e in config.get("Env") or [] if "=" in str(e))
    path = image_env.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env = {
        "PATH": f"{SWEBENCH_ENV_BIN}:{path}",
        "CONDA_DEFAULT_ENV": "testbed",
        "CONDA_PREFIX": str(PurePosixPath(SWEBENCH_ENV_BIN).parent),
        IMAGE_REPO_ENV: SWEBENCH_REPO_DIR,
    }
    return SWEBENCH_REPO_DIR, tuple(sorted(env.items()))


def image_tag(instance: SWEInstance, base_image: str = DEFAULT_IMAGE) -> str:
    """The tag the builder gives ``instance``'s image (whether or not it exists)."""
    recipe = json.dumps(
        [RECIPE, instance.instance_id, instance.base_commit, list(instance.setup), base_image]
    )
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    name = _TAG_CHARS.sub("-", instance.instance_id).lstrip(".-")[:100] or "instance"
    return f"{IMAGE_NAME}:{name}-{digest}"


def dockerfile(instance: SWEInstance, base_image: str = DEFAULT_IMAGE) -> str:
    """The Dockerfile of ``instance``'s image; its context holds the checkout as ``repo/``."""
    build_dir = f"{WORKDIR}/{REPO_DIR}"
    script = "\n".join(
        [
            "set -e",
            f"cd {build_dir}",
            *instance.setup,
            f"cd {WORKDIR}",
            f"mkdir -p {Path(IMAGE_REPO_DIR).parent}",
            f"mv {build_dir} {IMAGE_REPO_DIR}",
            f"chmod -R a+rX {IMAGE_REPO_DIR}",
        ]
    )
    # The exec form with a JSON string: setup commands need no Dockerfile escaping.
    return "\n".join(
        [
            f"FROM {base_image}",
            f"COPY repo {build_dir}",
            f"RUN {json.dumps(['/bin/sh', '-c', script])}",
            f"WORKDIR {WORKDIR}",
            "",
        ]
    )


def build_instance_image(
    instance: SWEInstance,
    *,
    base_image: str = DEFAULT_IMAGE,
    force: bool = False,
    client: Any = None,
) -> str:
    """Build ``instance``'s image unless it exists (or ``force``); return its tag.

    Raises ``SandboxUnavailable`` without a daemon or base image, ``SandboxError`` when the
    build (a setup command) fails, ``ConfigError`` for an instance that cannot be checked out.
    """
    client = client or docker_client()
    tag = image_tag(instance, base_image)
    if not force and image_exists(tag, client):
        return tag
    if not image_exists(base_image, client):
        raise SandboxUnavailable(
            f"the base image {base_image} is missing. Fix: bash scripts/docker_setup.sh "
            "(or python -m agentgym.sandbox.images build)"
        )
    import docker.errors

    old = _image_id(tag, client)
    with tempfile.TemporaryDirectory(prefix="agentgym-swe-image-") as context:
        materialize(instance, Path(context) / "repo")
        (Path(context) / "Dockerfile").write_text(dockerfile(instance, base_image))
        try:
            client.images.build(
                path=context,
                tag=tag,
                labels={
                    REPO_LABEL: IMAGE_REPO_DIR,
                    "agentgym.swe.instance": instance.instance_id,
                    "agentgym.swe.base_commit": instance.base_commit,
                    "agentgym.swe.recipe": str(RECIPE),
                },
                network_mode="none",  # offline: setup cannot download anything
                pull=False,
                rm=True,
                forcerm=True,
                nocache=force,
            )
        except docker.errors.BuildError as e:
            _remove_layers(client, e.build_log)
            log = "".join(str(part.get("stream", part.get("error", ""))) for part in e.build_log)
            raise SandboxError(
                f"building the image of {instance.instance_id} failed: {e.msg}\n{log[-2000:]}"
            ) from None
        except docker.errors.APIError as e:
            raise SandboxError(f"building the image of {instance.instance_id}: {e}") from None
    if old is not None and old != _image_id(tag, client):
        _remove_layers(client, [{"stream": f" ---> {old}"}])  # the image this one replaced
    return tag


def _image_id(tag: str, client: Any) -> str | None:
    import docker.errors

    try:
        return str(client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return None


def _remove_layers(client: Any, build_log: Any) -> None:
    """Remove the untagged images a build left (``---> <id>`` lines) with their untagged
    parents; images still in use (a tag, another child, a container) stay."""
    import docker.errors

    ids = [
        line.split("--->", 1)[1].strip()
        for part in build_log
        for line in str(part.get("stream", "")).splitlines()
        if line.strip().startswith("--->") and "Running in" not in line
    ]
    for image_id in reversed(ids):
        with contextlib.suppress(docker.errors.APIError):
            if not client.images.get(image_id).tags:  # never the base image, nor any tagged one
                client.images.remove(image_id)


def ensure_image(instance: SWEInstance, *, build: bool = True, client: Any = None) -> ImageRef:
    """The image ``instance`` runs in: its own ``image`` (which must exist here), else the
    builder's, built now if missing and ``build`` (else ``SandboxUnavailable`` naming the fix)."""
    import docker.errors

    client = client or docker_client()
    tag = instance.image or image_tag(instance)
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        if instance.image is not None:
            raise SandboxUnavailable(
                f"instance {instance.instance_id}: its image {tag} does not exist on this "
                "machine (nothing is pulled). Fix: docker load or build it here, or set the "
                "instance's image to null so that agentgym builds one from its repo_path"
            ) from None
        if not build:
            raise SandboxUnavailable(
                f"instance {instance.instance_id}: image {tag} is not built. Fix: python -m "
                f"agentgym.envs.swe.images build {instance.instance_id} (with --instances "
                "for your own file)"
            ) from None
        build_instance_image(instance, client=client)
        image = client.images.get(tag)
    repo_dir, env = image_layout(image.attrs.get("Config") or {})
    return ImageRef(tag, repo_dir, env)


# -- the command line -------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(f"[agentgym swe images] {msg}", file=sys.stderr, flush=True)


def _selected(args: argparse.Namespace) -> list[SWEInstance]:
    instances = read_instances(args.instances)
    if args.all:
        return instances
    if not args.ids:
        raise ConfigError("instance ids", [], "none given", "name instance ids, or pass --all")
    by_id = {instance.instance_id: instance for instance in instances}
    missing = [i for i in args.ids if i not in by_id]
    if missing:
        raise ConfigError(
            "instance ids", missing, "are not in the instances file", "check the ids (list)"
        )
    return [by_id[i] for i in args.ids]


def _build(args: argparse.Namespace) -> int:
    client = docker_client()
    for instance in _selected(args):
        if instance.image is not None:
            _log(f"{instance.instance_id}: uses its own image {instance.image}; not built")
            continue
        started = time.monotonic()
        tag = build_instance_image(instance, force=args.force, client=client)
        _log(f"{instance.instance_id}: {tag} ({time.monotonic() - started:.1f} s)")
    return 0


def _list(args: argparse.Namespace) -> int:
    client = docker_client()
    for instance in read_instances(args.instances):
        tag = instance.image or image_tag(instance)
        state = "present" if image_exists(tag, client) else "missing"
        print(f"{instance.instance_id}\t{tag}\t{state}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    import docker.errors

    client = docker_client()
    if args.all:
        tags = [t for image in client.images.list(name=IMAGE_NAME) for t in image.tags]
    else:
        tags = [image_tag(instance) for instance in _selected(args)]
    for tag in tags:
        try:
            client.images.remove(tag)
            _log(f"removed {tag}")
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as e:  # e.g. a container still uses it
            _log(f"kept {tag}: {e.explanation}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentgym.envs.swe.images")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, helptext in [
        ("build", "build instances' images (skips those that exist unless --force)"),
        ("list", "each instance's image tag and whether it exists"),
        ("remove", "remove instances' images (--all: every agentgym/swe image)"),
    ]:
        command = sub.add_parser(name, help=helptext)
        command.add_argument(
            "--instances", type=Path, default=None, help="JSONL file (default: the shipped set)"
        )
        if name != "list":
            command.add_argument("ids", nargs="*", help="instance ids")
            command.add_argument("--all", action="store_true", help="every instance")
        if name == "build":
            command.add_argument("--force", action="store_true", help="rebuild existing images")
    args = parser.parse_args(argv)
    handler = {"build": _build, "list": _list, "remove": _remove}[args.command]
    try:
        return handler(args)
    except Error as e:
        _log(f"error: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
