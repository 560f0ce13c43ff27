"""pip's configuration as uv's flags, one per line: ``python scripts/uv_flags.py``.

uv reads no pip configuration. For scripts/check_extras.sh to resolve from the same places as the
user's pip, the index, extra indexes, find-links and constraint files that ``pip config list``
shows (its files and ``PIP_*`` variables) become ``--index-url=...``, ``--extra-index-url=...``,
``--find-links=...`` and ``--constraint=...``; pip's CA bundle becomes ``--cert=...`` (the script
hands it to uv as ``SSL_CERT_FILE``).
"""

from __future__ import annotations

import ast
import subprocess
import sys

FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
    "cert": "--cert",
}


def uv_flags(listed: str) -> list[str]:
    """The flags for ``pip config list``'s output (``section.key='value'`` lines)."""
    flags: list[str] = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name not in FLAGS:
            continue
        for item in str(ast.literal_eval(value)).split():
            flag = f"{FLAGS[name]}={item}"
            if flag not in flags:
                flags.append(flag)
    return flags


def main() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    print("\n".join(uv_flags(listed)))


if __name__ == "__main__":
    main()
