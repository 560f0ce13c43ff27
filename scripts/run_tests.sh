#!/usr/bin/env bash
# `make test`: lint, the sandbox services (`make services`), then every test, in pytest runs side
# by side that keep both of CI's CPUs busy from start to end.
#
#   learning  the FrozenLake learning test (tests/recipes/test_frozenlake_learns.py: `make train`'s
#             own run, the longest test by far), from the start: it needs no service. As root,
#             at nice -10 (learning_run says why and what that reaches).
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
    tests/multiagent tests/registry tests/utils tests/integrations tests/recipes tests/gateway
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
# Where the CPU goes: as root, where the kernel lets us, each pytest run gets a cgroup of its own
# in cgroup v1's cpuacct hierarchy, which counts the CPU time of all it starts (servers, browsers,
# daemons), and the run logs each test's share (AGENTGYM_TEST_CPU, tests/conftest.py); printed at
# the end. Only where cpuacct is mounted apart from the cpu controller: a cgroup that the
# scheduler shares CPU between would change what it measures.
cgroups=""
acct=/sys/fs/cgroup/cpuacct
if (($(id -u) == 0)) && [[ -e $acct/cpuacct.usage && ! -e $acct/cpu.shares ]] &&
    mkdir "$acct/${work##*/}" 2>/dev/null; then
    cgroups="$acct/${work##*/}"
fi
read -r busy0 _ < <(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
started=$SECONDS
pytest_run() {  # pytest_run NAME PYTEST-ARGS...
    local name=$1
    shift
    (
        if [[ -n $cgroups ]] && mkdir "$cgroups/$name" 2>/dev/null &&
            echo "$BASHPID" >"$cgroups/$name/cgroup.procs" 2>/dev/null; then
            export AGENTGYM_TEST_CPU="$work/$name.cpu.jsonl"
        fi
        exec "$VENV/bin/pytest" -q -p no:cacheprovider --basetemp="$work/$name" --durations=15 "$@"
    )
}
cpu_report() {  # the CPU time of each run and the tests that took the most
    local busy1
    read -r busy1 _ < <(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
    echo "=== CPU time ($(nproc) CPUs, $((SECONDS - started)) s) ==="
    echo "the machine: $(((busy1 - busy0) / $(getconf CLK_TCK))) CPU-s busy"
    [[ -n $cgroups ]] || { echo "(no cgroup of our own: per run and per test not measured)"; return; }
    "$VENV/bin/python" - "$cgroups" "$work" <<'PY'
import json, pathlib, sys

groups, work = map(pathlib.Path, sys.argv[1:])
for group in sorted(p for p in groups.iterdir() if p.is_dir()):
    cpu = int((group / "cpuacct.usage").read_text()) / 1e9
    print(f"{group.name:>9}: {cpu:7.0f} CPU-s")
tests = [json.loads(line) for f in work.glob("*.cpu.jsonl") for line in f.read_text().splitlines()]
modules: dict[str, list[float]] = {}
for t in tests:
    module = modules.setdefault(t["test"].split("::")[0], [0.0, 0.0, 0])
    module[0] += t["cpu_s"]
    module[1] += t["wall_s"]
    module[2] += 1
print(f"{len(tests)} tests, {sum(t['cpu_s'] for t in tests):.0f} CPU-s; the 20 modules that took the most (CPU-s, wall s, tests):")
for name, (cpu, wall, n) in sorted(modules.items(), key=lambda m: -m[1][0])[:20]:
    print(f"{cpu:8.1f} {wall:8.1f} {n:5d}  {name}")
print("the 25 tests that took the most (CPU-s, wall s):")
for t in sorted(tests, key=lambda t: -t["cpu_s"])[:25]:
    print(f"{t['cpu_s']:8.1f} {t['wall_s']:8.1f}  {t['test']}")
PY
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
    # -10, ahead of the other runs' own processes. Only of those: where the kernel groups
    # processes by session (autogroups, /proc/sys/kernel/sched_autogroup_enabled), nice orders
    # the processes of one session, and each session gets an equal share; the browsers, servers
    # and rank launchers the tests start in sessions of their own (and docker's containers, in a
    # cgroup of their own) each take a share as large as all of this script's processes together.
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
cpu_report || true
# The cgroups go once empty (a daemon a test left may take a moment to end).
for _ in {1..20}; do
    [[ -n $cgroups && -d $cgroups ]] || break
    for group in "$cgroups"/*/ "$cgroups"; do rmdir "$group" 2>/dev/null || true; done
    [[ -d $cgroups ]] && sleep 0.5
done
((status)) || rm -rf "$work"
exit $status
