#!/usr/bin/env bash
# Run the modern control plane (modern-build.sh: etcd 3.5 + the Kubernetes 1.36 generic API server
# of k8s.io/apiextensions-apiserver, custom resources only) on 127.0.0.1, all state in one directory.
#
#   modern-cluster.sh start DIR              start (or complete) it, wait until ready, write DIR/env, DIR/kubeconfig
#   modern-cluster.sh stop DIR               stop both processes (DIR is kept)
#   modern-cluster.sh restart-apiserver DIR  kill and restart the API server on the same port (watch cache lost)
#   modern-cluster.sh stop-etcd DIR          stop etcd only
#   modern-cluster.sh start-etcd DIR         start etcd again (same ports, same data), wait until healthy
#   modern-cluster.sh compact DIR            compact etcd to its current revision (prints the revision)
#   modern-cluster.sh status DIR             show processes, ports and readiness (exit 0 iff ready)
#
# Env:
#   KWATCH_K8S_MODERN_CACHE  where modern-build.sh put bin/ (default /var/cache/kwatch-k8s-modern);
#                            built by `start` if missing
#   KWATCH_MODERN_APISERVER_ARGS  extra API server arguments (word-split), e.g. "--watch-cache=false"
#   KWATCH_K8S_READY_TIMEOUT seconds to wait for /readyz (default 60)
#
# What it is not: there is no /api (no pods, no Namespace objects: a namespaced custom resource
# is created in any namespace name), no aggregator, no webhooks, no controller manager.
# Authentication is by client certificate only (DIR/pki/admin.crt, O=system:masters, which the
# delegating authorizer always allows); the API server's delegated authentication and
# authorization point at itself (--authentication-skip-lookup: there is no kube-system).
# `/readyz` never passes its informer-sync check here, so readiness is /readyz?exclude=informer-sync.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE="${KWATCH_K8S_MODERN_CACHE:-/var/cache/kwatch-k8s-modern}"
MBIN="$CACHE/bin"
READY_TIMEOUT="${KWATCH_K8S_READY_TIMEOUT:-60}"

TAG=k8s-modern
APISERVER_GRACE=50  # 5 s: the 1.36 API server drains its watches
# shellcheck source=daemons.sh
. "$HERE/daemons.sh"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

[ $# -eq 2 ] || usage
CMD=$1
mkdir -p "$2"
D=$(cd "$2" && pwd)
PKI="$D/pki"

bin_of() {
    case $1 in
        etcd) echo etcd ;;
        apiserver) echo crd-apiserver ;;
    esac
}

ensure_binaries() {
    if ! [ -x "$MBIN/crd-apiserver" ] || ! [ -x "$MBIN/etcd" ]; then
        say "no binaries in $MBIN: running modern-build.sh"
        "$HERE/modern-build.sh"
    fi
    command -v openssl >/dev/null || die "needs openssl"
    command -v curl >/dev/null || die "needs curl"
}

gen_pki() {
    [ -f "$PKI/.done" ] && return 0
    say "generating CA, serving and admin client certificates in $PKI"
    rm -rf "$PKI"; mkdir -p "$PKI"; chmod 700 "$PKI"
    cat >"$PKI/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = placeholder
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[v3_server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
authorityKeyIdentifier = keyid
[v3_client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
EOF
    (
        cd "$PKI"
        openssl req -x509 -new -nodes -newkey rsa:2048 -keyout ca.key -out ca.crt -days 3650 \
            -config openssl.cnf -extensions v3_ca -subj "/CN=kwatch-modern-test-ca"
        openssl req -new -nodes -newkey rsa:2048 -keyout apiserver.key -out apiserver.csr \
            -config openssl.cnf -subj "/CN=crd-apiserver"
        openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out apiserver.crt -days 3650 -extfile openssl.cnf -extensions v3_server
        # O=system:masters: always allowed by the delegating authorizer
        openssl req -new -nodes -newkey rsa:2048 -keyout admin.key -out admin.csr \
            -config openssl.cnf -subj "/O=system:masters/CN=admin"
        openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out admin.crt -days 3650 -extfile openssl.cnf -extensions v3_client
        chmod 600 ./*.key
    ) >"$D/pki.log" 2>&1 || { tail -n 20 "$D/pki.log" >&2; die "certificate generation failed"; }
    touch "$PKI/.done"
}

write_kubeconfig() {
    cat >"$D/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kwatch-modern
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: admin
  user:
    client-certificate: $PKI/admin.crt
    client-key: $PKI/admin.key
contexts:
- name: kwatch-modern
  context:
    cluster: kwatch-modern
    user: admin
    namespace: default
current-context: kwatch-modern
preferences: {}
EOF
    chmod 600 "$D/kubeconfig.tmp"
    mv "$D/kubeconfig.tmp" "$D/kubeconfig"
}

write_env() {
    cat >"$D/env.tmp" <<EOF
export KWATCH_K8S_SERVER=https://127.0.0.1:$API_PORT
export KWATCH_K8S_CA=$PKI/ca.crt
export KWATCH_K8S_CLIENT_CERT=$PKI/admin.crt
export KWATCH_K8S_CLIENT_KEY=$PKI/admin.key
export KWATCH_ETCD_ENDPOINT=http://127.0.0.1:$ETCD_PORT
export KUBECONFIG=$D/kubeconfig
export KWATCH_K8S_PKI=$PKI
EOF
    mv "$D/env.tmp" "$D/env"
}

api_get() { # PATH -> body on stdout; fails on HTTP error
    curl -sS -f --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
        "https://127.0.0.1:$API_PORT$1"
}

etcd_healthy() {
    [ "$(curl -sS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -o '"health":"true"')" != "" ]
}

start_etcd() {
    if running_pid etcd >/dev/null; then return 0; fi
    port_free "$ETCD_PORT" || die "etcd client port $ETCD_PORT is in use by another process"
    port_free "$ETCD_PEER_PORT" || die "etcd peer port $ETCD_PEER_PORT is in use by another process"
    mkdir -p "$D/etcd-data"; chmod 700 "$D/etcd-data"
    launch etcd "$MBIN/etcd" \
        --name kwatch-modern \
        --data-dir "$D/etcd-data" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "kwatch-modern=http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster-state new \
        --logger zap --log-outputs stderr
    local t0=$SECONDS
    until etcd_healthy; do
        running_pid etcd >/dev/null || { log_tail etcd; die "etcd exited during startup"; }
        [ $((SECONDS - t0)) -lt 30 ] || { log_tail etcd; die "etcd not healthy after 30 s"; }
        sleep 0.2
    done
}

wait_apiserver_ready() {
    local t0=$SECONDS
    until [ "$(api_get '/readyz?exclude=informer-sync' 2>/dev/null)" = ok ]; do
        running_pid apiserver >/dev/null || { log_tail apiserver; die "crd-apiserver exited during startup"; }
        if [ $((SECONDS - t0)) -ge "$READY_TIMEOUT" ]; then
            log_tail apiserver
            api_get '/readyz?verbose' >&2 || true
            die "crd-apiserver not ready after $READY_TIMEOUT s (https://127.0.0.1:$API_PORT)"
        fi
        sleep 0.25
    done
}

start_apiserver() {
    if running_pid apiserver >/dev/null; then return 0; fi
    port_free "$API_PORT" || die "API server port $API_PORT is in use by another process"
    local extra=()
    # shellcheck disable=SC2206
    [ -n "${EXTRA_ARGS:-}" ] && extra=($EXTRA_ARGS)
    launch apiserver "$MBIN/crd-apiserver" \
        --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
        --etcd-compaction-interval=0 \
        --bind-address=127.0.0.1 \
        --secure-port="$API_PORT" \
        --tls-cert-file="$PKI/apiserver.crt" \
        --tls-private-key-file="$PKI/apiserver.key" \
        --client-ca-file="$PKI/ca.crt" \
        --kubeconfig="$D/kubeconfig" \
        --authentication-kubeconfig="$D/kubeconfig" \
        --authorization-kubeconfig="$D/kubeconfig" \
        --authentication-skip-lookup \
        --disable-admission-plugins=NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionPolicy \
        --enable-priority-and-fairness=false \
        --profiling=false \
        "${extra[@]}"
    wait_apiserver_ready
}

save_settings() { printf 'EXTRA_ARGS=%q\n' "$EXTRA_ARGS" >"$D/settings"; }
load_settings() {
    EXTRA_ARGS=""
    # shellcheck disable=SC1091
    [ -f "$D/settings" ] && . "$D/settings"
    EXTRA_ARGS=${KWATCH_MODERN_APISERVER_ARGS-$EXTRA_ARGS}
}

# ------------------------------------------------------------------ commands
cmd_start() {
    local t0=$SECONDS
    ensure_binaries
    EXTRA_ARGS=${KWATCH_MODERN_APISERVER_ARGS:-}
    if running_pid etcd >/dev/null && running_pid apiserver >/dev/null; then
        load_ports
        wait_apiserver_ready
        write_env
        say "already running: https://127.0.0.1:$API_PORT (source $D/env)"
        return 0
    fi
    save_settings
    gen_pki
    if [ -f "$D/ports" ]; then
        . "$D/ports"
        if ! running_pid etcd >/dev/null && ! running_pid apiserver >/dev/null; then
            if ! port_free "$ETCD_PORT" || ! port_free "$ETCD_PEER_PORT" || ! port_free "$API_PORT"; then
                rm -f "$D/ports"
            fi
        fi
    fi
    if [ ! -f "$D/ports" ]; then
        PICKED=""
        ETCD_PORT=$(pick_port); PICKED+=$'\n'"$ETCD_PORT"
        ETCD_PEER_PORT=$(pick_port); PICKED+=$'\n'"$ETCD_PEER_PORT"
        API_PORT=$(pick_port)
        printf 'ETCD_PORT=%s\nETCD_PEER_PORT=%s\nAPI_PORT=%s\n' "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" >"$D/ports"
    fi
    . "$D/ports"
    write_kubeconfig
    write_env
    say "starting etcd $("$MBIN/etcd" --version 2>/dev/null | awk '/etcd Version/ {print $3}') on 127.0.0.1:$ETCD_PORT..."
    start_etcd
    say "starting crd-apiserver (k8s 1.36 machinery) on https://127.0.0.1:$API_PORT..."
    start_apiserver
    say "modern control plane ready in $((SECONDS - t0)) s: https://127.0.0.1:$API_PORT (source $D/env; KUBECONFIG=$D/kubeconfig)"
}

cmd_stop() {
    local c
    for c in apiserver etcd; do
        if running_pid "$c" >/dev/null; then
            say "stopping $c..."
            halt "$c"
        fi
    done
    say "stopped ($D kept)"
}

cmd_restart_apiserver() {
    load_ports
    load_settings
    local t0=$SECONDS
    say "restarting crd-apiserver on https://127.0.0.1:$API_PORT..."
    halt apiserver
    for _ in $(seq 50); do port_free "$API_PORT" && break; sleep 0.1; done
    start_apiserver
    say "crd-apiserver ready again in $((SECONDS - t0)) s"
}

cmd_stop_etcd() {
    load_ports
    say "stopping etcd..."
    halt etcd
}

cmd_start_etcd() {
    load_ports
    for _ in $(seq 50); do port_free "$ETCD_PORT" && port_free "$ETCD_PEER_PORT" && break; sleep 0.1; done
    say "starting etcd on 127.0.0.1:$ETCD_PORT..."
    start_etcd
}

# etcd's v3 HTTP gateway (etcd 3.5 serves /v3/*): no etcdctl needed
etcd_post() { # PATH JSON
    curl -sS -f --max-time 10 -X POST -d "$2" "http://127.0.0.1:$ETCD_PORT$1"
}

cmd_compact() {
    load_ports
    local rev out
    rev=$(etcd_post /v3/maintenance/status '{}' | grep -o '"revision":"[0-9]*"' | head -n1 | grep -o '[0-9]*')
    [ -n "$rev" ] || die "could not read the etcd revision from http://127.0.0.1:$ETCD_PORT"
    if out=$(curl -sS --max-time 30 -X POST -d "{\"revision\": $rev, \"physical\": true}" \
                 "http://127.0.0.1:$ETCD_PORT/v3/kv/compaction" 2>&1); then
        if grep -q "required revision has been compacted" <<<"$out"; then
            say "already compacted at revision $rev" >&2
        elif grep -q '"error"\|"code"' <<<"$out"; then
            echo "$out" >&2; die "compaction failed"
        else
            say "compacted at revision $rev" >&2
        fi
    else
        echo "$out" >&2; die "compaction failed"
    fi
    echo "$rev"
}

cmd_status() {
    [ -f "$D/ports" ] || { echo "no modern cluster in $D"; return 1; }
    . "$D/ports"
    local c pid ready=1
    for c in etcd apiserver; do
        if pid=$(running_pid "$c"); then
            printf '%-10s running  pid %-7s rss %s\n' "$c" "$pid" \
                "$(awk '/VmRSS/ {printf "%d MB", $2/1024}' "/proc/$pid/status" 2>/dev/null)"
        else
            printf '%-10s stopped\n' "$c"
        fi
    done
    echo "etcd       http://127.0.0.1:$ETCD_PORT (peer $ETCD_PEER_PORT)$(etcd_healthy && echo ' healthy' || echo ' unreachable')"
    if [ "$(api_get '/readyz?exclude=informer-sync' 2>/dev/null)" = ok ]; then
        echo "apiserver  https://127.0.0.1:$API_PORT ready"
    else
        echo "apiserver  https://127.0.0.1:$API_PORT NOT ready"; ready=0
    fi
    echo "env        $D/env"
    echo "kubeconfig $D/kubeconfig"
    [ $ready = 1 ]
}

exec 9>"$D/.lock"
flock 9

case $CMD in
    start) cmd_start ;;
    stop) cmd_stop ;;
    restart-apiserver) cmd_restart_apiserver ;;
    stop-etcd) cmd_stop_etcd ;;
    start-etcd) cmd_start_etcd ;;
    compact) cmd_compact ;;
    status) cmd_status ;;
    *) usage ;;
esac
