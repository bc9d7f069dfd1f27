#!/usr/bin/env bash
# make bench-recovery [OBJECTS=10000]: recovery timings (issue 3, part 6) on
# a control plane and PostgreSQL of their own in $KWATCH_BENCH_DIR (default
# $KWATCH_TEST_DIR/bench-recovery), stopped at the end unless KWATCH_KEEP=1.
# Prints the report of test/bench/recovery.py; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/drivers/lib.sh
dir=${KWATCH_BENCH_DIR:-${KWATCH_TEST_DIR:-/var/tmp/kwatch-test}/bench-recovery}
build_and_install
$SUDO bash test/k8s/build.sh
KWATCH_K8S_NO_CM=1 bench_servers "$dir" bench
psql -h "$dir/pg" -p "$port" -U postgres -d bench -qc "CREATE EXTENSION IF NOT EXISTS kwatch"
. "$dir/k8s/env"
PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres \
  /usr/bin/python3 test/bench/recovery.py --objects "${OBJECTS:-10000}" \
    --k8s-dir "$dir/k8s" --cluster-sh test/k8s/cluster.sh --pg-dir "$dir/pg"
