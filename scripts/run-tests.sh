#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every cmocka unit test binary of BUILD/tests and, side by side with them, the pytest suites (integration,
# the Python tests of tests/python, the layering check's self-test); prints the totals.
# Usage: scripts/run-tests.sh BUILD [pytest args...]
#        scripts/run-tests.sh BUILD --units-only   (the unit test binaries alone, side by side)
# Last line: "N passed, N failed". Exit status non-zero when anything failed or nothing ran.
set -uo pipefail

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD [pytest args...]" >&2
	exit 2
fi
BUILD=$1
shift
units_only=false
if [ "${1:-}" = "--units-only" ]; then
	units_only=true
	shift
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
PYTHON=/usr/bin/python3
UNIT_TIMEOUT=${UNIT_TIMEOUT:-300}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

unit_passed=0
unit_failed=0

# Counts one cmocka binary's results from its output ("[==========] N test(s) run." and
# "[  PASSED  ] N test(s).") and exit status (in $out and $out.rc, written by start_unit); a binary
# that crashes or exits non-zero with no failure counted adds one failure, so a crash is never silent.
count_unit() {
	local bin=$1 out=$2 rc run passed failed
	rc=$(cat "$out.rc" 2>/dev/null || echo 1)
	echo "== $bin"
	cat "$out"
	run=$(sed -n 's/^\[==========\] \([0-9][0-9]*\) test(s) run\..*/\1/p' "$out" | awk '{s += $1} END {print s + 0}')
	passed=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' "$out" | awk '{s += $1} END {print s + 0}')
	failed=$((run - passed))
	if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
		if [ "$rc" -eq 124 ]; then
			echo "!! $bin timed out after ${UNIT_TIMEOUT}s"
		else
			echo "!! $bin exited with status $rc"
		fi
		failed=1
	fi
	if [ "$run" -eq 0 ] && [ "$rc" -eq 0 ]; then
		echo "!! $bin ran no test"
		failed=1
	fi
	echo "-- $(basename "$bin"): $passed passed, $failed failed"
	unit_passed=$((unit_passed + passed))
	unit_failed=$((unit_failed + failed))
}

shopt -s nullglob
units=()
for f in "$BUILD"/tests/test_*; do
	if [ -f "$f" ] && [ -x "$f" ]; then
		units+=("$f")
	fi
done
if [ "${#units[@]}" -eq 0 ]; then
	echo "!! no unit test binaries in $BUILD/tests"
	unit_failed=1
fi
# The unit binaries run side by side with the pytest suites: most of their wall time is waiting (timeouts,
# servers' drains; 50 s of it, 4 s of CPU, measured 2026-11-29), which the suites' workers fill. Their servers
# bind ephemeral ports, above the integration tests' range (tests/integration/conftest.py PORT_HI).
start_unit() {
	timeout "$UNIT_TIMEOUT" "$1" >"$2" 2>&1
	echo $? >"$2.rc"
}
for i in "${!units[@]}"; do
	start_unit "${units[$i]}" "$TMP/unit-$i.out" &
done

junit=$TMP/junit.xml
pytest_rc=5
if ! $units_only; then
	echo "==== integration tests (tests/integration, tests/python, tests/layers)"
	FT_BIN=${FT_BIN:-$ROOT/$BUILD/bin} "$PYTHON" -m pytest -rfEs --junitxml="$junit" tests/integration tests/python \
		tests/layers "$@"
	pytest_rc=$?
fi

wait
echo "==== unit tests ($BUILD/tests)"
for i in "${!units[@]}"; do
	count_unit "${units[$i]}" "$TMP/unit-$i.out"
done
echo "==== unit tests: $unit_passed passed, $unit_failed failed (${#units[@]} binaries)"
# Per test case: failed if it holds a failure or an error (setup, call or teardown), skipped if
# only skipped, passed otherwise. Collection errors appear as failed cases too.
read -r int_passed int_failed int_skipped < <("$PYTHON" - "$junit" <<'EOF'
import sys
import xml.etree.ElementTree as ET
p = f = s = 0
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print(0, 0, 0)
    sys.exit(0)
for case in root.iter("testcase"):
    tags = {child.tag for child in case}
    if tags & {"failure", "error"}:
        f += 1
    elif "skipped" in tags:
        s += 1
    else:
        p += 1
print(p, f, s)
EOF
)
# pytest exit 0 = all passed, 1 = some failed, 5 = nothing collected; others are its own errors.
if [ "$pytest_rc" -ne 0 ] && [ "$pytest_rc" -ne 1 ] && [ "$pytest_rc" -ne 5 ] && [ "$int_failed" -eq 0 ]; then
	echo "!! pytest exited with status $pytest_rc"
	int_failed=1
fi
if [ "$pytest_rc" -eq 1 ] && [ "$int_failed" -eq 0 ]; then
	int_failed=1
fi
$units_only || echo "==== integration tests: $int_passed passed, $int_failed failed, $int_skipped skipped"

total_passed=$((unit_passed + int_passed))
total_failed=$((unit_failed + int_failed))
status=0
if [ "$total_failed" -ne 0 ]; then
	status=1
fi
if [ $((total_passed + total_failed)) -eq 0 ]; then
	echo "!! no test ran"
	status=1
fi
echo "$total_passed passed, $total_failed failed"
exit "$status"
