#!/usr/bin/env bash
# `make test`: lint, the sandbox services (`make services`), then every test, in pytest runs side
# by side.
#
# The FrozenLake learning test (tests/recipes/test_frozenlake_learns.py: `make train`'s own run,
# the longest test by far) needs neither docker nor bubblewrap, so it starts first, and the lint
# and the service set-up run meanwhile; then the rest of the suite runs beside it. Each pytest run
# is one process running one test at a time, about one CPU.
#
# ENV_HALF (paths, e.g. "tests/core tests/envs tests/sandbox") splits the rest into two runs: those
# paths, and everything else. That keeps more CPUs busy, but on CI's two it was slower and
# starved `make check-extras` beside it (docs/testing.md has the figures), so by default the rest
# is one run. Runs share no temporary directory and no pytest cache; each has a process group of
# its own; their output is printed at the end, one after another.
#
# Env: VENV (default .venv), MAKE (default make); LEARNING, ENV_HALF and REST (the runs' paths, to
# try the script on a few files). Fails when the lint, the set-up or a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
MAKE=${MAKE:-make}
LEARNING=${LEARNING:-tests/recipes/test_frozenlake_learns.py}
# shellcheck disable=SC2206  # ENV_HALF from the environment: paths without spaces
ENV_HALF=(${ENV_HALF:-})
REST=${REST:-tests}
work=$(mktemp -d "${TMPDIR:-/tmp}/agentgym-test.XXXXXX")
pids=()

# Job control on while starting them: each run gets a process group of its own, so that stopping
# it (a failed lint, Ctrl-C) also stops its training, server and browser processes.
start() {  # start NAME PYTEST-ARGS...: a pytest run in the background, its output in NAME.log
    local name=$1
    shift
    set -m
    "$VENV/bin/pytest" -q -p no:cacheprovider --basetemp="$work/$name" "$@" \
        >"$work/$name.log" 2>&1 &
    set +m
    pids+=($!)
    echo "$!" >"$work/$name.pid"
}
stop_all() {
    for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
}
trap stop_all EXIT
trap 'exit 130' INT TERM

start learning --durations=5 "$LEARNING"
"$MAKE" --no-print-directory lint services
require=0
[[ -f $VENV/.services ]] && require=1
# The same set-up installs chromium: with it done, the web tests fail rather than skip too.
export AGENTGYM_REQUIRE_DOCKER=$require AGENTGYM_REQUIRE_CHROMIUM=$require
# Runs side by side on few CPUs: OpenMP threads that spin while they wait (GNU OpenMP's default)
# would burn the CPU the other runs need. Sleeping threads change no result, only the speed.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
status=0
runs=()
if ((${#ENV_HALF[@]})); then
    ignore=()
    for path in "${ENV_HALF[@]}"; do ignore+=(--ignore="$path"); done
    start envs --durations=15 "${ENV_HALF[@]}"
    start rest --durations=15 "${ignore[@]}" --ignore="$LEARNING" "$REST"
    runs+=(envs rest)
else  # one run, in the foreground: its output as it goes
    "$VENV/bin/pytest" -q -p no:cacheprovider --basetemp="$work/suite" --durations=15 \
        --ignore="$LEARNING" "$REST" || status=$?
    echo "waiting for the learning tests ($LEARNING)"
fi

for name in "${runs[@]}" learning; do
    run_status=0
    wait "$(cat "$work/$name.pid")" || run_status=$?
    echo "=== pytest: $name ==="
    cat "$work/$name.log"
    if ((run_status)); then
        echo "the $name tests failed (exit status $run_status); their temporary files: $work/$name"
        status=1
    fi
done
((status)) || rm -rf "$work"
exit $status
