#!/usr/bin/env bash
# make soak [MINUTES=30]: the convergence engine of test_convergence.py run
# for MINUTES at a high rate (KWATCH_CONVERGE_OPS changes per round, default
# 800, spread over 2-6 s) with faults, against its own control plane and
# PostgreSQL in $KWATCH_SOAK_DIR (default $KWATCH_TEST_DIR/soak, so it can run
# beside the test suite).  Prints the report: rounds, changes, notifications,
# rows, faults injected by kind, mismatches (must be 0), the worker's RssAnon
# at start and end.  Exit status 1 on any mismatch.  KWATCH_SEED replays.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${KWATCH_TEST_DIR:-/var/tmp/kwatch-test}
export KWATCH_TEST_DIR=${KWATCH_SOAK_DIR:-$base/soak}
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
bash test/packaging/install-deps.sh
make -s && $SUDO make -s install >/dev/null
$SUDO bash test/k8s/build.sh
mkdir -p "$KWATCH_TEST_DIR"; chmod 755 "$KWATCH_TEST_DIR"
report="$KWATCH_TEST_DIR/soak-report.txt"
rm -f "$report"
set +e
KWATCH_SOAK=1 KWATCH_CONVERGE_SECONDS=$(( ${MINUTES:-30} * 60 )) KWATCH_SOAK_REPORT="$report" \
  /usr/bin/python3 -m pytest test/integration/test_convergence.py -s -o cache_dir="$KWATCH_TEST_DIR/pytest-cache"
rc=$?
set -e
echo
echo "== soak report ($report)"
cat "$report" 2>/dev/null || echo "no report: the run failed before the end"
exit $rc
