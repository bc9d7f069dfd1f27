#!/bin/bash
# test/printers/run.sh: check the printer functions (sql/schema/printers/,
# the files sql/schema/ORDER lists under printers/, in that order) against
# the upstream printer test cases ported in test/printers/cases.py.
#
# Starts a throwaway PostgreSQL 15 in a fresh directory under /tmp (as the
# unprivileged postgres user when run as root), unix socket in that
# directory only, port $PRINTERS_PGPORT (5499); creates schema kwatch, loads
# those files into it as CREATE EXTENSION would, runs check.py and fuzz.py
# and removes the instance.  Needs no kwatch library.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${PGBIN:-/usr/lib/postgresql/15/bin}
port=${PRINTERS_PGPORT:-5499}

dir=$(mktemp -d /tmp/kwatch-printers.XXXXXX)
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
cleanup() {
  as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log"; exit 2; }
as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
  -o "-p $port -k $dir -c listen_addresses= -c fsync=off -c max_connections=5 -c shared_buffers=16MB" start >/dev/null \
  || { cat "$dir/server.log"; exit 2; }

export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
"$bin/psql" -X -q -v ON_ERROR_STOP=1 -c 'CREATE SCHEMA kwatch'
order=$root/sql/schema/ORDER
files=$(sed -n 's|^\(printers/[A-Za-z0-9_]*\.sql\)[[:space:]]*$|\1|p' "$order")
[ -n "$files" ] || { echo "run.sh: $order lists no printers/*.sql" >&2; exit 2; }
for f in $files; do cat "$root/sql/schema/$f"; done \
  | PGOPTIONS='-c search_path=kwatch -c client_min_messages=warning' \
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 -f -
PSQL="$bin/psql" python3 "$here/check.py"
PSQL="$bin/psql" python3 "$here/fuzz.py"
