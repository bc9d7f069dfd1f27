#!/bin/bash
# test/printers/run.sh: check the printer functions (the section "Issue 35
# (printer part)" of sql/kwatch--0.6.0--0.7.0.sql) against the upstream
# printer test cases ported in test/printers/cases.py.
#
# Starts a throwaway PostgreSQL 15 in a fresh directory under /tmp (as the
# unprivileged postgres user when run as root), unix socket in that
# directory only, port $PRINTERS_PGPORT (5499); creates schema kwatch, loads
# that section with @extschema@ = kwatch as CREATE EXTENSION does, runs
# check.py and removes the instance.  Needs no kwatch library.
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
script=$root/sql/kwatch--0.6.0--0.7.0.sql
section=$(awk '/^-- Issue 35 \(printer part\)/ { on = 1 } /^-- End of issue 35, printer part/ { on = 0 } on' "$script")
[ -n "$section" ] || { echo "run.sh: no printer section in $script" >&2; exit 2; }
# the line before the header is the section's opening rule
printf '%s\n' "$section" | sed 's/@extschema@/kwatch/g' \
  | PGOPTIONS='-c search_path=kwatch -c client_min_messages=warning' \
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 -f -
PSQL="$bin/psql" python3 "$here/check.py"
PSQL="$bin/psql" python3 "$here/fuzz.py"
