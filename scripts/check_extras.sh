#!/usr/bin/env bash
# Each extra alone: a fresh venv with `pip install 'agentgymnasium[<extra>]'` (from a wheel of this
# tree) and nothing else, then scripts/smoke_extra.py for it. What a user's install gives, checked
# before a missing dependency or an import of another extra's package reaches them.
#
#   scripts/check_extras.sh                         # every extra below, JOBS venvs at a time
#   EXTRAS="core train" JOBS=1 scripts/check_extras.sh
#   INSTALLER=pip scripts/check_extras.sh           # pip instead of uv (the default)
#
# core: no extra; lowest: no extra, with the core dependencies at their lowest allowed versions.
# Extras that need torch get the CPU wheel with them ($TORCH_CPU), as the README tells users to
# install it: an unpinned torch pulls several GB of CUDA packages.
#
# The installs go through uv (`pip install uv` into $WORK first), which unpacks each wheel once
# into its cache and links it into every venv: pip's fourteen installs took ~900 CPU-s even with
# torch unpacked once for all of them, most of check-extras, on CI's two CPUs beside the tests.
# uv reads no pip configuration: scripts/uv_flags.py turns the indexes, find-links, constraints
# and CA bundle pip is configured with into uv's flags, and uv chooses among the indexes as pip
# does (the best version over all of them: --index-strategy unsafe-best-match). An extra that uv
# cannot install is installed with pip, and its log says so; INSTALLER=pip uses pip throughout
# (torch then goes once into a folder each torch extra's venv sees through a .pth file).
# Logs go to $WORK/<extra>.log; the venvs are removed unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_CPU=${TORCH_CPU:-torch==2.13.0}
JOBS=${JOBS:-3}
# Longest installs first (torch), so the short ones fill the other slots meanwhile.
EXTRAS=${EXTRAS:-"train deepspeed models serve trl math mcp web docker code ray openenv core lowest"}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/agentgym-extras.XXXXXX")}
KEEP=${KEEP:-0}
INSTALLER=${INSTALLER:-uv}
TORCH_EXTRAS=" models train deepspeed serve trl bench "
export PYTHON TORCH_CPU WORK KEEP TORCH_EXTRAS INSTALLER
export SMOKE="$PWD/scripts/smoke_extra.py" PIP_DISABLE_PIP_VERSION_CHECK=1

start=$(date +%s)
mkdir -p "$WORK/src" "$WORK/dist"
# A wheel of the working tree as pip builds it for a user (isolated build, build-system.requires),
# from a copy so that the build leaves nothing in the checkout.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard \
        | tar --null -T - --ignore-failed-read -cf - | tar -xf - -C "$WORK/src"
else
    tar --exclude=./.venv --exclude=./build --exclude=./runs -cf - . | tar -xf - -C "$WORK/src"
fi
"$PYTHON" -m pip wheel --verbose --no-deps --wheel-dir "$WORK/dist" "$WORK/src" \
    >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
# setuptools announces what will stop building as a SetuptoolsDeprecationWarning.
if grep -q "DeprecationWarning" "$WORK/build.log"; then
    echo "the wheel build warns of a deprecation:"; grep -A 12 "DeprecationWarning" "$WORK/build.log"
    exit 1
fi
WHEEL=$(ls "$WORK"/dist/agentgymnasium-*.whl)
export WHEEL

# Core dependencies pinned to the lower bound of their range: `name>=x,<y` -> `name==x`.
LOWEST=$("$PYTHON" - <<'EOF'
import re, tomllib
with open("pyproject.toml", "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
print(" ".join(re.sub(r"\s*>=\s*([^,;\s]+).*", r"==\1", d) for d in deps))
EOF
)
export LOWEST

if [[ $INSTALLER == uv ]]; then
    "$PYTHON" -m pip install --quiet --target "$WORK/uv" uv >"$WORK/uv.log" 2>&1 \
        || { cat "$WORK/uv.log"; exit 1; }
    UV_FLAGS=$("$PYTHON" scripts/uv_flags.py)
    export UV_FLAGS UV_CACHE_DIR="$WORK/uv-cache"
fi

# install VENV EXTRA: agentgym with that extra (core: none; lowest: the core dependencies at their
# lower bounds), and for a torch extra $TORCH_CPU with it, as the README has users install it.
install() {
    local venv=$1 extra=$2 spec=() torch=0
    [[ $TORCH_EXTRAS == *" $extra "* ]] && torch=1
    case $extra in
        core) spec=("$WHEEL") ;;
        # shellcheck disable=SC2206  # requirement specifiers without spaces
        lowest) spec=("$WHEEL" $LOWEST) ;;
        *) spec=("$WHEEL[$extra]") ;;
    esac
    if [[ $INSTALLER == uv ]]; then
        local torch_spec=()
        ((torch)) && torch_spec=("$TORCH_CPU")
        if uv_pip "$WORK/uv/bin/uv" "$venv/bin/python" --quiet "${spec[@]}" "${torch_spec[@]}"; then
            return 0
        fi
        echo "uv could not install it: pip now"
    fi
    if ((torch)); then
        # pip: torch once, by whichever venv comes first (xargs runs JOBS at a time), into a
        # folder each torch extra's venv sees through a .pth file (pip counts it as installed)
        flock "$WORK/torch.lock" bash -c '[[ -d $1/torch ]] || "$2" -m pip install --quiet \
            --target "$1/torch" "$3"' _ "$WORK" "$PYTHON" "$TORCH_CPU" || return 1
        "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' \
            | { read -r site; echo "$WORK/torch" >"$site/torch-cpu.pth"; }
    fi
    # --no-compile: byte-compiling every installed module (transformers' thousands) was much of
    # the CPU; the smoke run compiles what it imports.
    "$venv/bin/python" -m pip install --quiet --no-compile "${spec[@]}"
}
# shellcheck source=scripts/uv_pip.sh
source scripts/uv_pip.sh
export -f install uv_pip

check_one() {
    local extra=$1 venv="$WORK/venv-$1" log="$WORK/$1.log" t0
    t0=$(date +%s)
    (
        set -e
        "$PYTHON" -m venv "$venv"
        install "$venv" "$extra"
        "$venv/bin/python" -m pip freeze
        echo "installed in $(( $(date +%s) - t0 )) s"
        mkdir -p "$WORK/scratch-$extra"
        # From outside the checkout: `import agentgym` must find the installed wheel.
        cd "$WORK/scratch-$extra"
        "$venv/bin/python" "$SMOKE" "$extra" "$WORK/scratch-$extra"
    ) >"$log" 2>&1
    local status=$?
    [[ $KEEP == 1 ]] || rm -rf "$venv"
    local took="$(( $(date +%s) - t0 )) s, $(grep -o 'installed in [0-9]* s' "$log")"
    if [[ $status == 0 ]]; then
        echo "ok    $extra ($took)"
    else
        echo "FAIL  $extra ($took): $log"; tail -n 40 "$log" | sed 's/^/      /'
    fi
    return $status
}
export -f check_one

status=0
printf '%s\n' $EXTRAS | xargs -P "$JOBS" -I{} bash -c 'check_one "$@"' _ {} || status=1
echo "extras checked in $(( $(date +%s) - start )) s (logs: $WORK)"
exit $status
