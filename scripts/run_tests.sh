#!/usr/bin/env bash
# `make test`: lint, the sandbox services (`make services`), then every test, in two pytest runs
# side by side.
#
# The FrozenLake learning tests (tests/recipes/test_frozenlake_learns.py: three `agentgym train`
# runs, the longest test by far) need neither docker nor bubblewrap, so they start first, and the
# lint, the service set-up (apt, debootstrap, image builds: mostly waiting on the network and the
# disk) and the rest of the suite run meanwhile. Measured on 2 CPUs with .ci/run: the rest of the
# suite took 39 minutes and the learning runs about 70 beside it (about 30 alone), so the whole
# takes about as long as the learning runs instead of the sum. Their output is printed at the end.
#
# Env: VENV (default .venv), MAKE (default make). Fails when the lint, the set-up or a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
MAKE=${MAKE:-make}
LEARNING=tests/recipes/test_frozenlake_learns.py
work=$(mktemp -d "${TMPDIR:-/tmp}/agentgym-test.XXXXXX")

# Job control on while starting it: the learning run gets a process group of its own, so that
# stopping it (a failed lint, Ctrl-C) also stops its training processes.
set -m
# Its own temporary directory and no cache: nothing shared with the other pytest run.
"$VENV/bin/pytest" -q --durations=5 -p no:cacheprovider --basetemp="$work/tmp" "$LEARNING" \
    >"$work/learning.log" 2>&1 &
learning=$!
set +m
trap 'kill -TERM -- "-$learning" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM

"$MAKE" --no-print-directory lint services
require=0
[[ -f $VENV/.services ]] && require=1
status=0
# The same set-up installs chromium: with it done, the web tests fail rather than skip too.
AGENTGYM_REQUIRE_DOCKER=$require AGENTGYM_REQUIRE_CHROMIUM=$require \
    "$VENV/bin/pytest" -q --durations=15 --ignore="$LEARNING" || status=$?

echo "waiting for the learning tests ($LEARNING)"
learning_status=0
wait "$learning" || learning_status=$?
cat "$work/learning.log"
if ((learning_status)); then
    echo "the learning tests failed (exit status $learning_status); their runs: $work/tmp"
else
    rm -rf "$work"
fi
exit $((status || learning_status))
