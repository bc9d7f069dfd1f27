# Shell helpers of test/drivers/run.sh, test/packaging/package.sh, test/demo/demo.sh and
# test/bench/*.sh, sourced from the repository's top directory (they `cd`
# there first).

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

# as_pg CMD...: runs CMD as the postgres user when we are root (servers and
# pg_regress must not run as root), else as ourselves
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# run_regress DIR: the pg_regress suites (the Makefile's REGRESS) against
# the installed kwatch, on a temporary instance that preloads it
# (test/regress.conf).  DIR is emptied and gets a copy of test/ (the
# fixtures the server reads), the temporary instance and the results; the
# postgres user must be able to reach it.  On failure prints
# regression.diffs and returns pg_regress's status.
run_regress() {
  local rdir=$1 pgxs tests rc=0
  rm -rf "$rdir"; mkdir -p "$rdir"
  cp -r test "$rdir/"
  chmod -R a+rX "$rdir"
  [ "$(id -u)" -eq 0 ] && chown -R postgres: "$rdir"
  pgxs=$(dirname "$(pg_config --pgxs)")
  tests=$(make -s print-regress)
  ( cd "$rdir" && as_pg "$pgxs/../../src/test/regress/pg_regress" \
      --temp-instance="$rdir/tmp_check" --temp-config="$rdir/test/regress.conf" \
      --inputdir="$rdir/test" --outputdir="$rdir" --bindir="$(pg_config --bindir)" \
      --dbname=contrib_regression $tests ) || rc=$?
  if [ $rc -ne 0 ]; then
    [ -f "$rdir/regression.diffs" ] && cat "$rdir/regression.diffs"
    echo "pg_regress failed" >&2
  fi
  return $rc
}

# free_port: a free TCP port on 127.0.0.1
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# build_and_install: installs what is missing, then builds and installs kwatch
build_and_install() {
  bash test/packaging/install-deps.sh
  make -s
  $SUDO make -s install >/dev/null
}

# bench_servers DIR DB: a control plane in DIR/k8s (reused if running;
# variables set for the call pass to cluster.sh) and a fresh PostgreSQL in
# DIR/pg with database DB on a free port, $port, both stopped when the
# script exits unless KWATCH_KEEP=1
bench_servers() {
  bench_dir=$1
  mkdir -p "$bench_dir"; chmod 755 "$bench_dir"
  bash test/k8s/cluster.sh start "$bench_dir/k8s"
  chmod -R a+rX "$bench_dir/k8s"
  port=$(free_port)
  # a fresh PostgreSQL each run (pg.sh writes the port into the config at initdb)
  bash test/drivers/pg.sh stop "$bench_dir/pg" 2>/dev/null || true
  rm -rf "$bench_dir/pg"
  bash test/drivers/pg.sh start "$bench_dir/pg" "$port" "$2"
  trap bench_stop EXIT
}

bench_stop() {
  if [ "${KWATCH_KEEP:-0}" != 1 ]; then
    bash test/drivers/pg.sh stop "$bench_dir/pg"; bash test/k8s/cluster.sh stop "$bench_dir/k8s" >/dev/null
  fi
}
