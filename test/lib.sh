# Shell helpers of test/run.sh, test/demo.sh and test/bench/*.sh, sourced
# from the repository's top directory (they `cd` there first).

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

# free_port: a free TCP port on 127.0.0.1
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# build_and_install: installs what is missing, then builds and installs kwatch
build_and_install() {
  bash test/install-deps.sh
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
  bash test/pg.sh stop "$bench_dir/pg" 2>/dev/null || true
  rm -rf "$bench_dir/pg"
  bash test/pg.sh start "$bench_dir/pg" "$port" "$2"
  trap bench_stop EXIT
}

bench_stop() {
  if [ "${KWATCH_KEEP:-0}" != 1 ]; then
    bash test/pg.sh stop "$bench_dir/pg"; bash test/k8s/cluster.sh stop "$bench_dir/k8s" >/dev/null
  fi
}
