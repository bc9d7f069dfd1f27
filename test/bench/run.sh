#!/usr/bin/env bash
# make bench [PODS=10000]: starts a control plane and PostgreSQL under
# $KWATCH_BENCH_DIR (default /var/tmp/kwatch-bench), runs bench.py (kwatch
# beside the client-go informer, kubectl, the LIST and COPY floors, relist
# and WAL costs, queries, NOTIFY delay: Markdown on stdout, JSON in
# $KWATCH_BENCH_DIR/bench-$PODS.json), then events.py, history.py,
# relist.py, relations.py (the relation functions at 50,000 pods), evreal.py (lag from the apiserver beside client-go),
# evstream.py (events/s from a synthetic source), servers.py (20 API
# servers at once) and, last (its CRDs keep a 1.20 apiserver busy for
# minutes), scale.py with SCALE_CRDS (default 200; 0 skips it); stops both servers
# (unless KWATCH_KEEP=1); then modern.sh: CR_OBJECTS (default 10000,50000; 0
# skips it) Certificates synced by streaming list and by LIST on the modern
# (1.36) control plane, beside a COPY floor; then fleet.sh: WATCHES
# (default 100,300,1000; 0 skips it) watches over many servers (the fleet report).  KWATCH_BENCH_NO_BUILD=1 skips building and
# installing kwatch (when the installed one is current).
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/drivers/lib.sh
dir=${KWATCH_BENCH_DIR:-/var/tmp/kwatch-bench}
export KWATCH_BENCH_DIR=$dir
pods=${PODS:-10000}
crds=${SCALE_CRDS:-200}
[ "${KWATCH_BENCH_NO_BUILD:-0}" = 1 ] || build_and_install
$SUDO bash test/k8s/build.sh
bench_servers "$dir" bench
. "$dir/k8s/env"
export PGHOST="$dir/pg" PGPORT=$port PGDATABASE=bench PGUSER=postgres
/usr/bin/python3 test/bench/bench.py --pods "$pods" --json "$dir/bench-$pods.json"
/usr/bin/python3 test/bench/events.py
# history.py syncs the pods bench.py left in k8s.pods, printed.py queries
# them (kubectl.pods); relist.py drops that table
/usr/bin/python3 test/bench/history.py
/usr/bin/python3 test/bench/printed.py
/usr/bin/python3 test/bench/label_selectors.py --json "$dir/selectors.json"
/usr/bin/python3 test/bench/applies.py
/usr/bin/python3 test/bench/relist.py
# the relation functions at 50,000 pods-shaped rows of its own (needs no API server)
/usr/bin/python3 test/bench/relations.py --json "$dir/relations.json"
/usr/bin/python3 test/bench/evreal.py --json "$dir/evreal.json"
# these two bring API servers of their own (a C streamer, fake API servers)
/usr/bin/python3 test/bench/evstream.py --perf 20000 --json "$dir/evstream.json"
/usr/bin/python3 test/bench/servers.py --servers 20 --json "$dir/servers-20.json"
if [ "$crds" -gt 0 ]; then
  /usr/bin/python3 test/bench/scale.py --crds "$crds" --json "$dir/scale-$crds.json"
fi
if [ "${CR_OBJECTS:-10000,50000}" != 0 ]; then
  KWATCH_BENCH_NO_BUILD=1 bash test/bench/modern.sh
fi
# the fleet report, on a control plane of its own (WATCHES=0 skips it)
if [ "${WATCHES:-100,300,1000}" != 0 ]; then
  KWATCH_BENCH_NO_BUILD=1 bash test/bench/fleet.sh
fi
if [ "${RBAC_ROWS:-50000}" != 0 ]; then
  KWATCH_BENCH_NO_BUILD=1 bash test/bench/rbac_rows.sh
fi
echo
echo "JSON reports: $dir/bench-$pods.json$([ "$crds" -gt 0 ] && echo " $dir/scale-$crds.json") $dir/evreal.json $dir/evstream.json $dir/servers-20.json$([ "${CR_OBJECTS:-}" != 0 ] && echo " $dir/crbench.json")"
echo "README table: python3 test/bench/report.py --readme test/bench/README.md $dir/bench-10000.json [$dir/bench-50000.json] $dir/scale-200.json $dir/servers-20.json $dir/evstream.json $dir/evreal.json"
