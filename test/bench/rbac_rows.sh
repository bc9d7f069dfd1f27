#!/usr/bin/env bash
# The cost of rows that follow RBAC (test/bench/rbac_rows.py; `make bench`
# runs it after the others).  Starts a 1.20 control plane of its own with
# RBAC authorization in $KWATCH_BENCH_DIR/rbac/k8s, without the
# controller-manager (nothing it runs is measured), and a fresh PostgreSQL
# in $KWATCH_BENCH_DIR/rbac/pg; stops both at the end unless KWATCH_KEEP=1.
# KWATCH_BENCH_NO_BUILD=1 skips building and installing kwatch.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/drivers/lib.sh
dir=${KWATCH_BENCH_DIR:-/var/tmp/kwatch-bench}
export KWATCH_BENCH_DIR=$dir
[ "${KWATCH_BENCH_NO_BUILD:-0}" = 1 ] || build_and_install
$SUDO bash test/k8s/build.sh
KWATCH_K8S_AUTHZ=RBAC KWATCH_K8S_NO_CM=1 bench_servers "$dir/rbac" rbac
. "$dir/rbac/k8s/env"
export PGHOST="$dir/rbac/pg" PGPORT=$port PGDATABASE=rbac PGUSER=postgres
/usr/bin/python3 test/bench/rbac_rows.py --rows "${RBAC_ROWS:-50000}" --json "$dir/rbac_rows.json"
