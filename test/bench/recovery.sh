#!/usr/bin/env bash
# make bench-recovery [OBJECTS=10000]: recovery timings (issue 3, part 6) on
# a control plane and PostgreSQL of their own in $KWATCH_BENCH_DIR (default
# $KWATCH_TEST_DIR/bench-recovery), stopped at the end unless KWATCH_KEEP=1.
# Prints the report of test/bench/recovery.py; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${KWATCH_BENCH_DIR:-${KWATCH_TEST_DIR:-/var/tmp/kwatch-test}/bench-recovery}
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
bash test/install-deps.sh
make -s && $SUDO make -s install >/dev/null
$SUDO bash test/k8s/build.sh
mkdir -p "$dir"; chmod 755 "$dir"
KWATCH_K8S_NO_CM=1 bash test/k8s/cluster.sh start "$dir/k8s"
chmod -R a+rX "$dir/k8s"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rm -rf "$dir/pg"
bash test/pg.sh start "$dir/pg" "$port" bench
cleanup() {
  if [ "${KWATCH_KEEP:-0}" != 1 ]; then
    bash test/pg.sh stop "$dir/pg"; bash test/k8s/cluster.sh stop "$dir/k8s" >/dev/null
  fi
}
trap cleanup EXIT
psql -h "$dir/pg" -p "$port" -U postgres -d bench -qc "CREATE EXTENSION IF NOT EXISTS kwatch"
. "$dir/k8s/env"
PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres \
  /usr/bin/python3 test/bench/recovery.py --objects "${OBJECTS:-10000}" \
    --k8s-dir "$dir/k8s" --cluster-sh test/k8s/cluster.sh --pg-dir "$dir/pg"
