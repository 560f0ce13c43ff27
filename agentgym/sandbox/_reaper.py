"""Removes a process's sandbox containers and folder once that process is gone, however it ended.

Started as ``python -c <this file> LABEL=VALUE FOLDER`` with a pipe as stdin whose write end only
the owner holds: the read below returns when the owner exits, even by SIGKILL. Standard library
and the docker SDK only (importing agentgym would be slow and is not needed).
"""

import contextlib
import shutil
import sys


def main(label, folder):
    sys.stdin.buffer.read()
    try:
        import docker

        client = docker.from_env(timeout=60)
        containers = client.containers.list(
            all=True, filters={"label": label}, ignore_removed=True
        )  # one removed meanwhile (its pool closing) must not stop the rest
        for container in containers:
            # already gone, or the daemon is going down with us: nothing more to do
            with contextlib.suppress(Exception):
                container.remove(force=True)
    except Exception:  # no docker SDK or no daemon: this process made no containers
        pass
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
