#!/usr/bin/env bash
# make bench [PODS=10000]: starts a control plane and PostgreSQL under
# $KWATCH_BENCH_DIR (default /var/tmp/kwatch-bench), runs bench.py, prints
# the report, stops both (unless KWATCH_KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
dir=${KWATCH_BENCH_DIR:-/var/tmp/kwatch-bench}
build_and_install
$SUDO bash test/k8s/build.sh
bench_servers "$dir" bench
. "$dir/k8s/env"
PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres \
  /usr/bin/python3 test/bench/bench.py --pods "${PODS:-10000}"
PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres \
  /usr/bin/python3 test/bench/events.py
PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres \
  /usr/bin/python3 test/bench/relist.py
PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres \
  /usr/bin/python3 test/bench/history.py
