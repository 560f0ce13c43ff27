#!/usr/bin/env bash
# Make the docker sandbox backend usable on a Debian machine, as root; safe to run again.
#
#   1. apt-installs what is missing of docker.io, debootstrap, bubblewrap (the local backend),
#      the packages model-written code may import (`python -m agentgym.sandbox.images
#      solution-packages`: numpy, sympy) and chromium (the web envs);
#   2. starts dockerd (--iptables=false --bridge=none: sandboxes have no network anyway) in the
#      background when no daemon answers, logging to $AGENTGYM_DOCKERD_LOG, and waits for it;
#   3. builds the project's Python image (python -m agentgym.sandbox.images build) when missing,
#      from a rootfs tarball cached under $AGENTGYM_CACHE_DIR (default ~/.cache/agentgym).
#
# Env: PYTHON (default .venv/bin/python, else python3) must have agentgym; the docker SDK is
# pip-installed into it when missing.
set -euo pipefail

cd "$(dirname "$0")/.."
log() { echo "[docker_setup] $*" >&2; }
started=$SECONDS
DOCKERD_LOG=${AGENTGYM_DOCKERD_LOG:-/var/log/agentgym-dockerd.log}
PYTHON=${PYTHON:-}
if [[ -z "$PYTHON" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

if [[ $(id -u) -ne 0 ]]; then
    log "must run as root (it installs packages and starts dockerd)"; exit 1
fi

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v bwrap >/dev/null || missing+=(bubblewrap)
# The SWE env's local backend runs the host's /usr/bin/python3 with Debian's pytest, and git.
command -v git >/dev/null || missing+=(git)
/usr/bin/python3 -c "import pytest" 2>/dev/null || missing+=(python3-pytest)
# Code-v0's local backend grades with the host's /usr/bin/python3: the packages model-written
# code may import (agentgym.sandbox.image_tag.SOLUTION_PACKAGES; the image has them too).
while read -r module package; do
    /usr/bin/python3 -c "import $module" 2>/dev/null || missing+=("$package")
done < <("$PYTHON" -m agentgym.sandbox.images solution-packages)
# Not docker's, but installed in the same apt run: the web envs' Chromium (Web-v0, MiniWoB-v0),
# which Playwright drives through $AGENTGYM_CHROMIUM or `chromium` on PATH.
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

daemon_up() { timeout 10 docker info >/dev/null 2>&1; }
if ! daemon_up; then
    log "starting dockerd (log: $DOCKERD_LOG)"
    # setsid: the daemon outlives this script and the CI step that ran it.
    setsid nohup dockerd --iptables=false --bridge=none >>"$DOCKERD_LOG" 2>&1 </dev/null &
    for _ in $(seq 120); do
        daemon_up && break
        sleep 0.5
    done
    if ! daemon_up; then
        log "dockerd did not come up within 60 s; last lines of $DOCKERD_LOG:"
        tail -n 20 "$DOCKERD_LOG" >&2
        exit 1
    fi
fi
log "docker daemon $(docker info --format '{{.ServerVersion}}' 2>/dev/null) is up"

if ! "$PYTHON" -c "import docker" 2>/dev/null; then
    log "installing the docker SDK into $PYTHON"
    "$PYTHON" -m pip install -q docker || {
        log "could not install it; run: $PYTHON -m pip install docker"; exit 1; }
fi
"$PYTHON" -m agentgym.sandbox.images build
log "ready in $((SECONDS - started)) s: image $("$PYTHON" -m agentgym.sandbox.images tag)"
