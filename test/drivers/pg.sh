#!/usr/bin/env bash
# test/drivers/pg.sh: a throwaway PostgreSQL 15 with kwatch preloaded, for the demo
# and the integration tests.
#
#   test/drivers/pg.sh start DIR PORT DBNAME   initdb (once), start, create DBNAME
#   test/drivers/pg.sh standby DIR PORT PRIMARY_DIR PRIMARY_PORT
#                                      pg_basebackup of the running primary
#                                      (once), start it as its hot standby
#   test/drivers/pg.sh promote DIR             promote a standby (waits until done)
#   test/drivers/pg.sh stop DIR                stop (fast)
#   test/drivers/pg.sh restart DIR             restart (keeps data)
#   test/drivers/pg.sh kill DIR                SIGKILL the postmaster (crash test)
#
# PostgreSQL refuses to run as root: when root, the server runs as the
# `postgres` system user (created by Debian's postgresql packages) and DIR
# is handed to it.  The socket lives in DIR; PGHOST=DIR works.
# KWATCH_PG_PRELOAD: more shared_preload_libraries at initdb (the
# integration tests load auto_explain, off until a test turns it on).
# KWATCH_PG_CONF: more postgresql.conf lines at initdb, after the ones
# below, so they may override them (the scale-out tests: wal_level =
# logical; shared_preload_libraries = '' for a database without the worker).
set -euo pipefail
cmd=${1:?usage: pg.sh start|standby|promote|stop|restart|kill DIR [PORT DB]}
dir=$(realpath -m "${2:?state directory}")
bindir=$(pg_config --bindir)

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# start_server [PORT DB]: starts the server in $dir unless it runs, then
# creates database DB unless it exists (a standby has its primary's)
start_server() {
  if ! as_pg "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null ||
      { tail -30 "$dir/postgres.log"; exit 1; }
  fi
  [ $# -eq 0 ] && return
  as_pg "$bindir/psql" -h "$dir" -p "$1" -U postgres -d postgres -Atqc \
    "SELECT 1 FROM pg_database WHERE datname = '$2'" | grep -q 1 ||
    as_pg "$bindir/createdb" -h "$dir" -p "$1" -U postgres "$2"
}

case "$cmd" in
start)
  port=${3:?port}; db=${4:?database}
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_pg "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log"; exit 1; }
    cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'kwatch${KWATCH_PG_PRELOAD:+,$KWATCH_PG_PRELOAD}'
kwatch.database = '$db'
kwatch.backoff_initial = '200ms'
kwatch.backoff_max = '5s'
logging_collector = off
log_min_messages = info
log_line_prefix = '%m [%p] %b '
fsync = off
max_connections = 50
${KWATCH_PG_CONF:-}
CONF
  fi
  start_server "$port" "$db"
  ;;
standby)
  port=${3:?port}; primary=$(realpath -m "${4:?primary directory}"); primary_port=${5:?primary port}
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    # -R: standby.signal and primary_conninfo (the primary's socket directory)
    as_pg "$bindir/pg_basebackup" -D "$dir/data" -h "$primary" -p "$primary_port" -U postgres \
      -R -X stream -c fast >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log"; exit 1; }
    cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
unix_socket_directories = '$dir'
hot_standby = on
CONF
  fi
  start_server
  ;;
promote)
  as_pg "$bindir/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
  ;;
stop)
  [ -f "$dir/data/postmaster.pid" ] && as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
  ;;
restart)
  as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -m fast -w -t 60 restart >/dev/null
  ;;
kill)
  pid=$(head -1 "$dir/data/postmaster.pid")
  kill -9 "$pid"
  ;;
*)
  echo "unknown command $cmd" >&2; exit 2 ;;
esac
