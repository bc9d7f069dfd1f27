#!/usr/bin/env bash
# make bench [PODS=10000]: starts a control plane and PostgreSQL under
# $KWATCH_BENCH_DIR (default /var/tmp/kwatch-bench), runs bench.py, prints
# the report, stops both (unless KWATCH_KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${KWATCH_BENCH_DIR:-/var/tmp/kwatch-bench}
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
bash test/install-deps.sh
make -s && $SUDO make -s install >/dev/null
$SUDO bash test/k8s/build.sh
mkdir -p "$dir"; chmod 755 "$dir"
bash test/k8s/cluster.sh start "$dir/k8s"
chmod -R a+rX "$dir/k8s"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# a fresh PostgreSQL each run (pg.sh writes the port into the config at initdb)
bash test/pg.sh stop "$dir/pg" 2>/dev/null || true
rm -rf "$dir/pg"
bash test/pg.sh start "$dir/pg" "$port" bench
cleanup() {
  if [ "${KWATCH_KEEP:-0}" != 1 ]; then
    bash test/pg.sh stop "$dir/pg"; bash test/k8s/cluster.sh stop "$dir/k8s" >/dev/null
  fi
}
trap cleanup EXIT
. "$dir/k8s/env"
PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres \
  /usr/bin/python3 test/bench/bench.py --pods "${PODS:-10000}"
PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres \
  /usr/bin/python3 test/bench/events.py
PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres \
  /usr/bin/python3 test/bench/relist.py
