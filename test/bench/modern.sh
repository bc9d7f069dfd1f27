#!/usr/bin/env bash
# The custom-resource benchmark on the modern control plane (issue 23; part
# of `make bench`, or alone): builds (or reuses) the modern plane
# (test/k8s/modern-build.sh), starts it in $KWATCH_BENCH_DIR/k8s-modern and
# a fresh PostgreSQL in $KWATCH_BENCH_DIR/pg-modern (the plane's etcd data
# wiped first), runs crbench.py for
# CR_OBJECTS (default 10000,50000): kwatch's initial sync by streaming list
# and by LIST (median of CR_REPEAT rounds, default 3) beside a COPY floor (Markdown on stdout, JSON in
# $KWATCH_BENCH_DIR/crbench.json); stops both (unless KWATCH_KEEP=1).
# KWATCH_BENCH_NO_BUILD=1 skips building and installing kwatch.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/drivers/lib.sh
dir=${KWATCH_BENCH_DIR:-/var/tmp/kwatch-bench}
export KWATCH_BENCH_DIR=$dir
objects=${CR_OBJECTS:-10000,50000}
[ "${KWATCH_BENCH_NO_BUILD:-0}" = 1 ] || build_and_install
$SUDO bash test/k8s/modern-build.sh
mkdir -p "$dir"; chmod 755 "$dir"
# a fresh plane: its etcd holds only the objects crbench.py creates
bash test/k8s/modern-cluster.sh stop "$dir/k8s-modern" >/dev/null 2>&1 || true
rm -rf "$dir/k8s-modern/etcd-data"
bash test/k8s/modern-cluster.sh start "$dir/k8s-modern"
chmod -R a+rX "$dir/k8s-modern"
port=$(free_port)
bash test/drivers/pg.sh stop "$dir/pg-modern" 2>/dev/null || true
rm -rf "$dir/pg-modern"
bash test/drivers/pg.sh start "$dir/pg-modern" "$port" crbench
modern_stop() {
  if [ "${KWATCH_KEEP:-0}" != 1 ]; then
    bash test/drivers/pg.sh stop "$dir/pg-modern" || true
    bash test/k8s/modern-cluster.sh stop "$dir/k8s-modern" >/dev/null || true
  fi
}
trap modern_stop EXIT
export PGHOST="$dir/pg-modern" PGPORT=$port PGDATABASE=crbench PGUSER=postgres
export KWATCH_MODERN_DIR="$dir/k8s-modern"
/usr/bin/python3 test/bench/crbench.py --objects "$objects" --repeat "${CR_REPEAT:-3}" --json "$dir/crbench.json"
