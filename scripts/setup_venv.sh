#!/usr/bin/env bash
# `make setup`: the venv with agentgym editable and an extra (default dev: everything), and
# PyTorch's CPU build first where there is no GPU (an unpinned torch pulls several GB of CUDA
# packages). What `pip install -e '.[dev]'` gives, installed through uv: pip took ~190 s of a
# fresh CI machine's time before any test could start (resolving, then unpacking and byte-compiling
# ~180 packages one by one), uv 35 s, the same versions.
#
#   scripts/setup_venv.sh                       # VENV=.venv EXTRAS=dev PYTHON=python3
#   INSTALLER=pip scripts/setup_venv.sh         # pip throughout
#
# uv is pip-installed into the venv and reads no pip configuration: scripts/uv_flags.py turns the
# indexes, find-links, constraints and CA bundle pip is configured with into its flags, and uv
# chooses among the indexes as pip does (--index-strategy unsafe-best-match). When uv cannot be
# installed or fails, pip installs instead, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
EXTRAS=${EXTRAS:-dev}
TORCH_CPU=${TORCH_CPU:-torch==2.13.0}
INSTALLER=${INSTALLER:-uv}
export PIP_DISABLE_PIP_VERSION_CHECK=1

"$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip)
"${pip[@]}" uninstall -y -q agentgym 2>/dev/null || true # the distribution was renamed agentgymnasium
specs=()
command -v nvidia-smi >/dev/null 2>&1 || specs+=("$TORCH_CPU")
specs+=(-e ".[$EXTRAS]")

# shellcheck source=scripts/uv_pip.sh
source scripts/uv_pip.sh
with_uv() {
    "${pip[@]}" install --quiet uv || return 1
    UV_FLAGS=$("$VENV/bin/python" scripts/uv_flags.py) || return 1
    # torch first, alone, as pip would take it: nothing else may choose a torch for it
    if [[ ${specs[0]} == "$TORCH_CPU" ]]; then
        uv_pip "$VENV/bin/uv" "$VENV/bin/python" "$TORCH_CPU" || return 1
    fi
    uv_pip "$VENV/bin/uv" "$VENV/bin/python" "${specs[@]}"
}

if [[ $INSTALLER == uv ]] && with_uv; then
    exit 0
fi
[[ $INSTALLER == uv ]] && echo "setup_venv: uv could not install it; pip now"
"${pip[@]}" install --upgrade pip
if [[ ${specs[0]} == "$TORCH_CPU" ]]; then
    "${pip[@]}" install "$TORCH_CPU"
fi
"${pip[@]}" install -e ".[$EXTRAS]"
