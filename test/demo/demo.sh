#!/usr/bin/env bash
# test/demo/demo.sh start|stop -- what `make demo` and `make demo-stop` run.
#
# start: installs what is missing, builds and installs kwatch, starts a
# throwaway PostgreSQL with kwatch preloaded and a local Kubernetes control
# plane (or uses $KWATCH_DEMO_KUBECONFIG, set by `make demo KUBECONFIG=...`),
# creates a small workload, watches pods, replicasets, deployments and
# namespaces, shows live queries and notifications, and leaves it all
# running.  Writes .demo/env ($KWATCH_DEMO_ENV) so that `. .demo/env; psql` and `kubectl get
# pods -A` work.
#
# Server state lives in $KWATCH_DEMO_DIR (default /var/tmp/kwatch-demo): the
# PostgreSQL server runs as the postgres user, which must be able to reach it.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
state=${KWATCH_DEMO_DIR:-/var/tmp/kwatch-demo}
envfile=${KWATCH_DEMO_ENV:-.demo/env}
. test/drivers/lib.sh

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# server_kubeconfig KUBECONFIG: the PostgreSQL server (the postgres OS user)
# cannot read your ~/.kube: writes one self-contained copy of KUBECONFIG (a
# path or a :-separated list, merged as kubectl merges them; certificate
# files embedded by `kubectl config view --flatten`; exec plugin entries kept
# as they are) to $state/kubeconfig, readable by postgres alone, and prints
# its path.  Says which exec plugins the server will run, and as whom.
server_kubeconfig() {
  local out="$state/kubeconfig"
  KUBECONFIG=$1 kubectl config view --raw --flatten >"$out.tmp"
  chmod 600 "$out.tmp"
  $SUDO chown postgres: "$out.tmp"
  mv "$out.tmp" "$out"
  local cmds
  cmds=$(KUBECONFIG=$1 kubectl config view -o jsonpath='{range .users[*]}{.user.exec.command}{"\n"}{end}' | sort -u | grep . || true)
  if [ -n "$cmds" ]; then
    echo "exec credential plugins, run by the PostgreSQL server as the postgres user with" >&2
    echo "the server's environment (README \"Exec credential plugins\"): $(echo $cmds)" >&2
  fi
  echo "$out"
}

stop() {
  [ -d "$state/pg" ] && bash test/drivers/pg.sh stop "$state/pg" && echo "PostgreSQL stopped"
  [ -d "$state/k8s" ] && bash test/k8s/cluster.sh stop "$state/k8s" >/dev/null 2>&1 && echo "control plane stopped"
  rm -f "$envfile"
  true
}

start() {
  say "1/7 dependencies, build and install kwatch"
  build_and_install
  echo "installed into $(pg_config --pkglibdir)"

  mkdir -p "$state" "$(dirname "$envfile")"
  chmod 755 "$state"
  if [ -n "${KWATCH_DEMO_KUBECONFIG:-}" ]; then
    say "2/7 using your cluster: $KWATCH_DEMO_KUBECONFIG"
    # a path or a :-separated list, as $KUBECONFIG; kubectl runs its exec plugin as you
    kubeconfig=$KWATCH_DEMO_KUBECONFIG
    KUBECONFIG=$kubeconfig kubectl version >/dev/null
    pg_kubeconfig=$(server_kubeconfig "$kubeconfig")
    local_cluster=0
  else
    say "2/7 local Kubernetes control plane (etcd + kube-apiserver + controller-manager 1.20)"
    $SUDO bash test/k8s/build.sh
    bash test/k8s/cluster.sh start "$state/k8s"
    chmod -R a+rX "$state/k8s"
    kubeconfig="$state/k8s/kubeconfig"
    pg_kubeconfig=$kubeconfig
    local_cluster=1
  fi
  export KUBECONFIG=$kubeconfig

  say "3/7 PostgreSQL with kwatch preloaded"
  port=$(cat "$state/pgport" 2>/dev/null || free_port)
  echo "$port" >"$state/pgport"
  bash test/drivers/pg.sh start "$state/pg" "$port" app
  export PGHOST="$state/pg" PGPORT=$port PGDATABASE=app PGUSER=postgres
  cat >"$envfile" <<ENV
export PGHOST='$PGHOST'
export PGPORT=$PGPORT
export PGDATABASE=app
export PGUSER=postgres
export KUBECONFIG='$kubeconfig'
ENV
  echo "PostgreSQL on port $port (socket $PGHOST), database app"

  if [ "$local_cluster" = 1 ]; then
    say "4/7 a small workload: namespaces shop, billing, monitoring"
    bash test/demo/workload.sh
    kubectl get deployments -A
  else
    say "4/7 workload: using what your cluster runs (nothing is created)"
  fi

  say "5/7 watching pods, replicasets, deployments, namespaces"
  psql -X -q -v ON_ERROR_STOP=1 -v kubeconfig="$pg_kubeconfig" -f test/demo/setup.sql
  printf 'waiting for the initial sync'
  for _ in $(seq 1 100); do
    ready=$(psql -XAtc "SELECT count(*) FILTER (WHERE healthy) = count(*) AND count(*) = 4 FROM kwatch.watches")
    [ "$ready" = t ] && break
    printf '.'; sleep 0.2
  done
  echo
  psql -X -c "SELECT server, resource, table_name, channel, state, objects, resource_version FROM kwatch.watches"
  echo "-- pods per namespace and phase (from k8s.pods; no API call):"
  psql -X -c "SELECT namespace, phase, count(*) FROM k8s.pods GROUP BY 1, 2 ORDER BY 1, 2"
  psql -X -c "SELECT d.namespace, d.name, d.replicas, d.labels->>'tier' AS tier, count(p.*) AS pods
              FROM k8s.deployments d
              LEFT JOIN k8s.replicasets r ON r.cluster = d.cluster AND r.owner_references @> jsonb_build_array(jsonb_build_object('uid', d.uid))
              LEFT JOIN k8s.pods p ON p.cluster = r.cluster AND p.owner_references @> jsonb_build_array(jsonb_build_object('uid', r.uid))
              GROUP BY 1, 2, 3, 4 ORDER BY 1, 2"
  echo "k8s.pods: $(psql -XAtc 'SELECT count(*) FROM k8s.pods') rows;  kubectl get pods -A: $(kubectl get pods -A --no-headers 2>/dev/null | wc -l) pods"

  if [ "$local_cluster" = 1 ]; then
    say "6/7 LISTEN kwatch_pods while shop/web scales 3 -> 5 -> 3"
    /usr/bin/python3 examples/listen.py kwatch_pods 6 &
    lpid=$!
    sleep 1
    kubectl -n shop scale deployment web --replicas=5 >/dev/null
    sleep 2
    kubectl -n shop scale deployment web --replicas=3 >/dev/null
    wait $lpid || true
  fi

  say "7/7 live tables (a LIST per scan) and the event stream"
  # the live tables k8s_live.* were made by test/demo/setup.sql (step 5)
  echo "-- the WHERE clause becomes the request (selectors are pushed down, rows re-checked):"
  psql -X -c "EXPLAIN (COSTS OFF) SELECT name, phase FROM k8s_live.pods WHERE labels->>'app' = 'web' AND namespace = 'shop'"
  psql -X -c "SELECT name, phase FROM k8s_live.pods WHERE labels->>'app' = 'web' AND namespace = 'shop' ORDER BY name"
  echo "-- kwatch.events: every change applied, numbered; a client that missed NOTIFYs reads from its last seq:"
  psql -X -c "SELECT seq, type, namespace, name, resource_version FROM kwatch.events
              WHERE seq > kwatch.events_last_seq() - 8 AND table_name = 'pods' ORDER BY seq"

  cat <<EOF

Everything is running.
  . .demo/env; psql            # e.g. SELECT name, phase FROM k8s.pods WHERE labels->>'app' = 'web';
                               #      SELECT * FROM kwatch.events WHERE seq > 0 ORDER BY seq;
                               #      SELECT name, object->'data' FROM k8s_live.configmaps WHERE namespace = 'kube-system';
  . .demo/env; kubectl get pods -A
  make demo-stop               # stop PostgreSQL and the control plane
EOF
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
