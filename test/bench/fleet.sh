#!/usr/bin/env bash
# make bench-fleet [WATCHES=100,300,1000]: the fleet report (test/bench/fleet.py,
# issue 47).  Starts a 1.20 control plane of its own in $KWATCH_BENCH_DIR/fleet/k8s
# whose kube-apiserver listens on every address (--bind-address=0.0.0.0: the
# kwatch servers reach it through 127.0.0.2, 127.0.0.3, ..., one loopback
# address per server, so that connections are per server as in a real fleet;
# it still requires a token or client certificate), without the
# controller-manager (nothing it runs is measured, its CPU would be), and a
# fresh PostgreSQL in $KWATCH_BENCH_DIR/fleet/pg; stops both at the end unless
# KWATCH_KEEP=1.  KWATCH_BENCH_NO_BUILD=1 skips building and installing kwatch.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/drivers/lib.sh
dir=${KWATCH_BENCH_DIR:-/var/tmp/kwatch-bench}
export KWATCH_BENCH_DIR=$dir
[ "${KWATCH_BENCH_NO_BUILD:-0}" = 1 ] || build_and_install
$SUDO bash test/k8s/build.sh
KWATCH_APISERVER_ARGS="--bind-address=0.0.0.0" KWATCH_K8S_NO_CM=1 bench_servers "$dir/fleet" fleet
. "$dir/fleet/k8s/env"
export PGHOST="$dir/fleet/pg" PGPORT=$port PGDATABASE=fleet PGUSER=postgres
/usr/bin/python3 test/bench/fleet.py --watches "${WATCHES:-100,300,1000}" --pg-dir "$dir/fleet/pg" \
  --k8s-dir "$dir/fleet/k8s" \
  --json "$dir/fleet.json"
