#!/usr/bin/env bash
# `make test`: lint, the sandbox services (`make services`), then every test, in pytest runs side
# by side that keep both of CI's CPUs busy from start to end.
#
#   learning  the FrozenLake learning test (tests/recipes/test_frozenlake_learns.py: `make train`'s
#             own run, the longest test by far), from the start: it needs no service. As root,
#             at nice -10: a CPU of its own (learning_run says why).
#   early     from the start too, while the lint and the service set-up (apt, debootstrap, images:
#             mostly waiting on the network) run: the tests under EARLY, which need no service,
#             until the set-up is done.
#   suite     every other test, once the services are up.
#   tail      when the learning test ends: the same tests as the suite, from the last module back.
#
# early, suite and tail share the modules through claims (tests/conftest.py): the first run to
# reach a module runs all of it, and the others report its tests "elsewhere". So no test runs
# twice and none is left out, and the runs end together wherever the time goes. early runs with
# AGENTGYM_REQUIRE_DOCKER/CHROMIUM=1, so a test there that needs a service fails instead of
# skipping before the service is set up. Each pytest run is one process running one test at a
# time; each has a process group of its own, its own temporary directory and no pytest cache; the
# outputs are printed at the end, the suite's as it goes.
#
# Env: VENV (default .venv), MAKE (default make); LEARNING, EARLY and SUITE (paths, to try the
# script on a few files). Fails when the lint, the set-up or a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
MAKE=${MAKE:-make}
LEARNING=${LEARNING:-tests/recipes/test_frozenlake_learns.py}
# Service-free: no docker, bubblewrap or Chromium (the env families that use them are elsewhere).
# shellcheck disable=SC2206  # paths without spaces
EARLY=(${EARLY:-tests/core tests/trainers tests/rollout tests/inference tests/models
    tests/multiagent tests/registry tests/utils tests/integrations tests/recipes
    tests/test_gpu_check.py tests/test_layers.py tests/test_wrappers.py
    tests/test_deprecations.py tests/test_collection.py})
# shellcheck disable=SC2206
SUITE=(${SUITE:-tests})
work=$(mktemp -d "${TMPDIR:-/tmp}/agentgym-test.XXXXXX")
mkdir "$work/claims"
pids=()

# Runs side by side on few CPUs: OpenMP threads that spin while they wait (GNU OpenMP's default)
# would burn the CPU the other runs need. Sleeping threads change no result, only the speed.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

# Job control on while starting them: each run gets a process group of its own, so that stopping
# it (a failed lint, Ctrl-C) also stops its training, server and browser processes.
start() {  # start NAME COMMAND...: in the background, its output in NAME.log
    local name=$1
    shift
    set -m
    "$@" >"$work/$name.log" 2>&1 &
    set +m
    pids+=($!)
    echo "$!" >"$work/$name.pid"
}
pytest_run() {  # pytest_run NAME PYTEST-ARGS...
    local name=$1
    shift
    "$VENV/bin/pytest" -q -p no:cacheprovider --basetemp="$work/$name" --durations=15 "$@"
}
shared() {  # shared NAME [ORDER] -- PYTEST-ARGS...: a run that takes modules through the claims
    local name=$1 order=$2
    shift 3
    AGENTGYM_TEST_CLAIMS="$work/claims" AGENTGYM_TEST_ORDER=$order pytest_run "$name" "$@"
}
stop_all() {
    for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
}
trap stop_all EXIT
trap 'exit 130' INT TERM

learning_run() {  # the learning test, then a mark that it has ended (the tail starts then)
    local run_status=0
    # The one run the claims cannot split, so it must not end last: as root (CI) it runs at nice
    # -10, ahead of the Chromium (-8, as Chromium sets itself) and docker processes the other
    # runs start, so it has a CPU to itself; the others share the other CPU, then both.
    if (($(id -u) == 0)); then renice -n -10 -p "$BASHPID" >/dev/null; fi
    pytest_run learning "$LEARNING" || run_status=$?
    touch "$work/learning.done"
    return $run_status
}
early_run() {
    AGENTGYM_REQUIRE_DOCKER=1 AGENTGYM_REQUIRE_CHROMIUM=1 AGENTGYM_TEST_UNTIL="$work/services.up" \
        shared early forward -- --ignore="$LEARNING" "${EARLY[@]}"
}
start learning learning_run
start early early_run
"$MAKE" --no-print-directory lint services
touch "$work/services.up"
require=0
[[ -f $VENV/.services ]] && require=1
# The same set-up installs chromium: with it done, the web tests fail rather than skip too.
export AGENTGYM_REQUIRE_DOCKER=$require AGENTGYM_REQUIRE_CHROMIUM=$require

# The tail: once the learning test's process has ended, unless the suite has ended first.
tail_run() {
    until [[ -e $work/learning.done ]]; do sleep 5; done
    [[ -e $work/suite.done ]] && { echo "the suite ended first: no tail run"; return 0; }
    shared tail reverse -- --ignore="$LEARNING" "${SUITE[@]}"
}
start tail tail_run

status=0
shared suite forward -- --ignore="$LEARNING" "${SUITE[@]}" || status=$?
touch "$work/suite.done"
echo "waiting for the learning, early and tail runs"

for name in early learning tail; do
    run_status=0
    wait "$(cat "$work/$name.pid")" || run_status=$?
    echo "=== pytest: $name ==="
    cat "$work/$name.log"
    if ((run_status)); then
        echo "the $name run failed (exit status $run_status); its temporary files: $work/$name"
        status=1
    fi
done
((status)) || rm -rf "$work"
exit $status
