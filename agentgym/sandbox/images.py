"""Build the project's Python image locally: nothing can be pulled, so it is made from Debian.

``debootstrap --variant=minbase`` installs Debian with Python into a folder, which is trimmed,
packed into a tarball (cached, so a rebuild skips the download) and imported with
``docker import``. Needs root, ``debootstrap`` and a reachable Debian mirror.

    python -m agentgym.sandbox.images build            # builds DEFAULT_IMAGE if missing
    python -m agentgym.sandbox.images build --force    # rebuilds the image (the tarball stays)
    python -m agentgym.sandbox.images build --tag my/python:1 --package python3-pandas
                                                       # an image with more for solutions to import
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.core.errors import SandboxError, SandboxUnavailable
from agentgym.sandbox.client import docker_client
from agentgym.sandbox.image_tag import DEFAULT_IMAGE, RECIPE, SOLUTION_PACKAGES, SUITE

__all__ = ["DEFAULT_IMAGE", "DEFAULT_PACKAGES", "build_image", "image_exists", "main"]

DEFAULT_PACKAGES = ("python3", "python3-pytest", "git", *SOLUTION_PACKAGES.values())
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Cut from the rootfs: package caches and docs, nothing a program runs.
_TRIM = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)
_CHANGES = [
    "ENV PATH=/usr/local/bin:/usr/bin:/bin",
    "ENV LANG=C.UTF-8",
    "WORKDIR /work",
    'CMD ["sleep", "infinity"]',
]


def cache_dir() -> Path:
    """``$AGENTGYM_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentgym``, else ``~/.cache/agentgym``."""
    if env := os.environ.get("AGENTGYM_CACHE_DIR"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentgym"


def image_exists(tag: str = DEFAULT_IMAGE, client: Any = None) -> bool:
    import docker.errors

    client = client or docker_client()
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _log(msg: str) -> None:
    print(f"[agentgym images] {msg}", file=sys.stderr, flush=True)


def rootfs_tarball(
    packages: Sequence[str] = DEFAULT_PACKAGES,
    *,
    mirror: str | None = None,
    cache: Path | None = None,
) -> Path:
    """The cached rootfs tarball for ``packages``, made with debootstrap when missing."""
    key = hashlib.sha256(f"{SUITE} {RECIPE} {sorted(packages)}".encode()).hexdigest()[:12]
    cache = cache or cache_dir()
    tarball = cache / "images" / f"rootfs-{SUITE}-{key}.tar"
    if tarball.exists():
        _log(f"using cached rootfs {tarball}")
        return tarball
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        raise SandboxUnavailable(
            "building the image needs root and debootstrap. Fix: as root, "
            "apt-get install debootstrap (scripts/docker_setup.sh does it all)"
        )
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tarball.parent, prefix="rootfs-") as tmp:
        root = Path(tmp) / "root"
        mirror = mirror or os.environ.get("AGENTGYM_DEBIAN_MIRROR") or DEFAULT_MIRROR
        started = time.monotonic()
        _log(f"debootstrap {SUITE} from {mirror} with {', '.join(packages)} (about a minute)")
        _check_call(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(packages)}",
                SUITE,
                str(root),
                mirror,
            ],
            Path(tmp) / "debootstrap.log",
        )
        for rel in _TRIM:
            for child in (root / rel).glob("*"):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        partial = Path(tmp) / "rootfs.tar"
        _check_call(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."], None)
        partial.rename(tarball)
        _log(f"rootfs ready in {time.monotonic() - started:.0f} s: {tarball}")
    return tarball


def _check_call(argv: list[str], log: Path | None) -> None:
    with open(log or os.devnull, "wb") as out:
        rc = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = log.read_text(errors="replace")[-2000:] if log else ""
        raise SandboxError(f"{argv[0]} failed with exit code {rc}:\n{tail}")


def build_image(
    tag: str = DEFAULT_IMAGE,
    *,
    packages: Sequence[str] = DEFAULT_PACKAGES,
    mirror: str | None = None,
    cache: Path | None = None,
    force: bool = False,
) -> str:
    """Make image ``tag`` (Debian ``SUITE`` + ``packages``) unless it exists; return its tag."""
    client = docker_client()
    if not force and image_exists(tag, client):
        _log(f"{tag} already exists")
        return tag
    tarball = rootfs_tarball(packages, mirror=mirror, cache=cache)
    repository, _, version = tag.rpartition(":")
    started = time.monotonic()
    client.api.import_image_from_file(
        str(tarball),
        repository=repository or tag,
        tag=version or "latest",
        changes=[*_CHANGES, f"LABEL agentgym.image={tag}"],
    )
    if not image_exists(tag, client):
        raise SandboxError(f"docker import of {tarball} did not produce {tag}")
    _log(f"imported {tag} in {time.monotonic() - started:.0f} s")
    return tag


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentgym.sandbox.images")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the Python image if it is missing")
    build.add_argument("--tag", default=DEFAULT_IMAGE)
    build.add_argument("--mirror", default=None, help=f"Debian mirror (default {DEFAULT_MIRROR})")
    build.add_argument("--cache-dir", type=Path, default=None, help="where the rootfs is cached")
    build.add_argument(
        "--package", action="append", default=[], help="an extra Debian package (repeatable)"
    )
    build.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    sub.add_parser("tag", help="print the default image tag")
    sub.add_parser(
        "solution-packages",
        help="print the modules model-written code may import, each with its Debian package",
    )
    args = parser.parse_args(argv)
    if args.command == "tag":
        print(DEFAULT_IMAGE)
        return 0
    if args.command == "solution-packages":
        for module, package in SOLUTION_PACKAGES.items():
            print(module, package)
        return 0
    try:
        build_image(
            args.tag,
            packages=(*DEFAULT_PACKAGES, *args.package),
            mirror=args.mirror,
            cache=args.cache_dir,
            force=args.force,
        )
    except SandboxError as e:
        _log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
