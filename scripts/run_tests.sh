#!/usr/bin/env bash
# `make test`: lint, the sandbox services (`make services`), then every test, in pytest runs side
# by side, each one process running one test at a time (about one CPU).
#
#   learning  tests/recipes/test_frozenlake_learns.py: `make train`'s own run, the longest test;
#             needs neither docker nor bubblewrap nor Chromium, so it starts first.
#   early     every test that needs none of the services (trainers, recipes, inference, ...):
#             starts with it, beside the lint and the service set-up.
#   web       the web envs (Chromium), once the services are up, and the recipes', integrations'
#             and GPU check's tests (no service), to even out the runs' ends.
#   services  the other tests that need docker, bubblewrap or Chromium ($SERVICES), meanwhile.
#
# On CI's 2 CPUs the time goes to CPU work (docs/testing.md has the figures): one pytest run
# leaves a CPU idle whenever its test waits, and the service set-up (apt, debootstrap) mostly
# waits on the network, so the runs side by side keep both CPUs busy to the end. A test outside
# $SERVICES and $WEB that needs a service fails in the early run rather than skipping (the
# services are required wherever `make services` installs them).
#
# Env: VENV (default .venv), MAKE (default make); LEARNING, WEB, SERVICES and TESTS (the runs'
# paths, to try the script on a few files; an empty WEB: no web run, whose paths then belong in
# SERVICES); LOW (default 5), the niceness of the runs beside the learning run.
# Runs share no temporary directory and no pytest cache; each has a process group of its own;
# their output is printed at the end, one after another. Fails when the lint, the set-up or a
# test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
MAKE=${MAKE:-make}
LEARNING=${LEARNING:-tests/recipes/test_frozenlake_learns.py}
# shellcheck disable=SC2206  # paths without spaces, from the environment
WEB=(${WEB-tests/envs/web tests/recipes tests/integrations tests/test_gpu_check.py})
# shellcheck disable=SC2206
SERVICES=(${SERVICES:-tests/envs/swe tests/envs/test_code.py tests/envs/test_code_forging.py
    tests/envs/test_math.py tests/envs/test_tasks_argument.py tests/sandbox tests/vector
    tests/examples tests/test_conformance.py tests/test_cli.py tests/test_install.py})
TESTS=${TESTS:-tests}
LOW=${LOW:-5}  # the niceness of the runs beside the learning run
work=$(mktemp -d "${TMPDIR:-/tmp}/agentgym-test.XXXXXX")
pids=()

# Job control on while starting them: each run gets a process group of its own, so that stopping
# it (a failed lint, Ctrl-C) also stops its training, server and browser processes.
start() {  # start NAME NICE PYTEST-ARGS...: a pytest run in the background, output in NAME.log
    local name=$1 niceness=$2
    shift 2
    set -m
    nice -n "$niceness" "$VENV/bin/pytest" -q -p no:cacheprovider --basetemp="$work/$name" "$@" \
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

# The services are required (their tests fail, not skip) where `make services` installs them.
require=0
[[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 && require=1
export AGENTGYM_REQUIRE_DOCKER=$require AGENTGYM_REQUIRE_CHROMIUM=$require
# Runs side by side on few CPUs: OpenMP threads that spin while they wait (GNU OpenMP's default)
# would burn the CPU the other runs need. Sleeping threads change no result, only the speed.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

late=(--ignore="$LEARNING")
for path in "${WEB[@]}" "${SERVICES[@]}"; do late+=(--ignore="$path"); done
# The learning run is one long sequence of updates, the other runs many independent tests: it
# gets a CPU of its own (the others run at a lower priority), or it ends last. Starved in a
# .ci/run among four equal runs, it was at update 85 of 150 after 48 minutes.
start learning 0 --durations=5 "$LEARNING"
start early "$LOW" --durations=15 "${late[@]}" "$TESTS"
"$MAKE" --no-print-directory lint services
if ((require)) && [[ ! -f $VENV/.services ]]; then
    echo "make services did not finish"
    exit 1
fi
runs=(early)
if ((${#WEB[@]})); then
    start web "$LOW" --durations=15 --ignore="$LEARNING" "${WEB[@]}"
    runs+=(web)
fi
start services "$LOW" --durations=15 "${SERVICES[@]}"
runs+=(services)

status=0
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
