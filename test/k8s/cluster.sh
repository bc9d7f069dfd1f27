#!/usr/bin/env bash
# Run a real Kubernetes 1.20 control plane (etcd + kube-apiserver + kube-controller-manager)
# on 127.0.0.1, with all state in one directory.
#
#   cluster.sh start DIR              start (or complete) the cluster, wait until ready, write DIR/env, DIR/kubeconfig
#   cluster.sh stop DIR               stop all processes (DIR is kept)
#   cluster.sh restart-apiserver DIR  kill and restart kube-apiserver on the same port, wait until ready
#                                     (KWATCH_APISERVER_DOWN_S=n: stay down n seconds first)
#   cluster.sh stop-etcd DIR          stop etcd only
#   cluster.sh start-etcd DIR         start etcd again (same ports, same data), wait until healthy
#   cluster.sh compact DIR            compact etcd to its current revision (prints the revision)
#   cluster.sh status DIR             show processes, ports and readiness (exit 0 iff apiserver ready)
#
# Env:
#   KWATCH_K8S_CACHE        where build.sh put bin/ (default /var/cache/kwatch-k8s)
#   KWATCH_K8S_BIN          dir holding kube-apiserver, kube-controller-manager (default $KWATCH_K8S_CACHE/bin)
#   KWATCH_K8S_AUTHZ        --authorization-mode (default AlwaysAllow; e.g. RBAC, where the token
#                           KWATCH_K8S_USER_TOKEN (user kwatch-user, no groups) gets 403s)
#   KWATCH_APISERVER_ARGS   extra kube-apiserver arguments (word-split), e.g. "--watch-cache=false"
#   KWATCH_K8S_SA_ADMISSION=1  keep the ServiceAccount admission plugin (default: disabled)
#   KWATCH_K8S_NO_CM=1      do not run kube-controller-manager
#   KWATCH_K8S_READY_TIMEOUT  seconds to wait for /readyz (default 60)
#   KWATCH_K8S_AUDIT=0      no audit log (default: DIR/audit.log, Metadata level, list, watch and some writes)
# `start` uses the env values (or defaults) and saves them in DIR/settings; `restart-apiserver`
# uses an env value when set, else the saved one.
#
# Authentication: the static tokens of DIR/pki/tokens.csv (admin, kwatch-user), client certificates
# signed by DIR/pki/ca.crt, and a token webhook authenticator (authn_webhook.py, the fourth process,
# HTTPS on another loopback port, log DIR/webhook.log) that accepts only unexpired tokens minted by
# the test exec credential plugin (test/integration/exec_plugin.py) with the secret in
# DIR/pki/webhook.secret:  kwexec.<user>.<expiry unix>.<hex hmac-sha256(secret, "<user>|<expiry>")>.
# It appends one JSON line per TokenReview to DIR/webhook-reviews.jsonl.  Its cache TTL is 0 (every
# token the static file does not know is reviewed), but kube-apiserver 1.20 also caches every
# successful token authentication for 10 s (not configurable), so an expired token still works for
# up to 10 s after the last review that accepted it.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE="${KWATCH_K8S_CACHE:-/var/cache/kwatch-k8s}"
KBIN="${KWATCH_K8S_BIN:-$CACHE/bin}"
READY_TIMEOUT="${KWATCH_K8S_READY_TIMEOUT:-60}"

TAG=k8s
# kube-apiserver 1.20 stops listening at once on SIGTERM but then waits up to 60 s for
# open watches to end (it has no watch termination on shutdown), hence a short grace (3 s)
APISERVER_GRACE=30
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

# ------------------------------------------------------------------ helpers
ensure_packages() {
    local want=() p
    command -v etcd >/dev/null || want+=(etcd-server)
    command -v etcdctl >/dev/null || want+=(etcd-client)
    command -v openssl >/dev/null || want+=(openssl)
    command -v curl >/dev/null || want+=(curl)
    [ ${#want[@]} -eq 0 ] && return 0
    say "installing packages: ${want[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "${want[@]}" >"$D/apt.log" 2>&1; then
        apt-get update >>"$D/apt.log" 2>&1
        apt-get install -y --no-install-recommends "${want[@]}" >>"$D/apt.log" 2>&1 ||
            { tail -n 20 "$D/apt.log" >&2; die "apt-get install ${want[*]} failed"; }
    fi
}

ensure_binaries() {
    if ! [ -x "$KBIN/kube-apiserver" ] || ! [ -x "$KBIN/kube-controller-manager" ]; then
        if [ -z "${KWATCH_K8S_BIN:-}" ]; then
            say "binaries missing in $KBIN: running build.sh"
            "$HERE/build.sh"
        else
            die "no kube-apiserver/kube-controller-manager in $KBIN (KWATCH_K8S_BIN)"
        fi
    fi
}

bin_of() {
    case $1 in
        etcd) echo etcd ;;
        apiserver) echo kube-apiserver ;;
        controller-manager) echo kube-controller-manager ;;
        webhook) echo authn_webhook.py ;;
    esac
}

# await_start NAME WHAT NOT-READY SECONDS INTERVAL CHECK...: polls CHECK every INTERVAL s
# until it succeeds; dies with NAME's log tail when NAME exits or after SECONDS s
# ("WHAT NOT-READY after SECONDS s").
await_start() {
    local name=$1 what=$2 not_ready=$3 limit=$4 interval=$5; shift 5
    local t0=$SECONDS
    until "$@"; do
        running_pid "$name" >/dev/null || { log_tail "$name"; die "$what exited during startup"; }
        [ $((SECONDS - t0)) -lt "$limit" ] || { log_tail "$name"; die "$what $not_ready after $limit s"; }
        sleep "$interval"
    done
}

gen_pki() {
    [ -f "$PKI/.done" ] && return 0
    say "generating CA, serving certificate, service-account keys and admin token in $PKI"
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
EOF
    (
        cd "$PKI"
        openssl req -x509 -new -nodes -newkey rsa:2048 -keyout ca.key -out ca.crt -days 3650 \
            -config openssl.cnf -extensions v3_ca -subj "/CN=kwatch-test-ca"
        openssl req -new -nodes -newkey rsa:2048 -keyout apiserver.key -out apiserver.csr \
            -config openssl.cnf -subj "/CN=kube-apiserver"
        openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out apiserver.crt -days 3650 -extfile openssl.cnf -extensions v3_server
        openssl genrsa -out sa.key 2048
        openssl rsa -in sa.key -pubout -out sa.pub
        openssl rand -hex 32 >admin.token
        openssl rand -hex 32 >user.token
        printf '%s,admin,admin-uid,"system:masters"\n' "$(cat admin.token)" >tokens.csv
        printf '%s,kwatch-user,kwatch-user-uid\n' "$(cat user.token)" >>tokens.csv
        chmod 600 ./*.key ./*.token tokens.csv
    ) >"$D/pki.log" 2>&1 || { tail -n 20 "$D/pki.log" >&2; die "certificate generation failed"; }
    touch "$PKI/.done"
}

# The webhook authenticator's HMAC secret (also for clusters whose pki predates it). The exec
# plugin, run by PostgreSQL as the postgres OS user, mints tokens with it: world-readable (test only).
gen_webhook_secret() {
    [ -s "$PKI/webhook.secret" ] && return 0
    openssl rand -hex 32 >"$PKI/webhook.secret.tmp"
    chmod 644 "$PKI/webhook.secret.tmp"
    mv "$PKI/webhook.secret.tmp" "$PKI/webhook.secret"
}

# kube-apiserver's --authentication-token-webhook-config-file (kubeconfig format: the cluster is
# the webhook, the user is the apiserver's credentials for it; it needs none)
write_webhook_kubeconfig() {
    cat >"$D/authn-webhook.kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: authn-webhook
  cluster:
    server: https://127.0.0.1:$WEBHOOK_PORT/authenticate
    certificate-authority: $PKI/ca.crt
users:
- name: kube-apiserver
  user: {}
contexts:
- name: webhook
  context:
    cluster: authn-webhook
    user: kube-apiserver
current-context: webhook
EOF
    mv "$D/authn-webhook.kubeconfig.tmp" "$D/authn-webhook.kubeconfig"
}

write_kubeconfig() { # FILE CONTEXT-USER
    cat >"$1.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kwatch-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    token: $(cat "$PKI/admin.token")
contexts:
- name: kwatch-test
  context:
    cluster: kwatch-test
    user: $2
    namespace: default
current-context: kwatch-test
preferences: {}
EOF
    chmod 600 "$1.tmp"
    mv "$1.tmp" "$1"
}

write_env() {
    cat >"$D/env.tmp" <<EOF
export KWATCH_K8S_SERVER=https://127.0.0.1:$API_PORT
export KWATCH_K8S_TOKEN=$(cat "$PKI/admin.token")
export KWATCH_K8S_USER_TOKEN=$(cat "$PKI/user.token" 2>/dev/null)
export KWATCH_K8S_CA=$PKI/ca.crt
export KWATCH_ETCD_ENDPOINT=http://127.0.0.1:$ETCD_PORT
export KUBECONFIG=$D/kubeconfig
export KWATCH_K8S_PKI=$PKI
export KWATCH_K8S_WEBHOOK_URL=https://127.0.0.1:${WEBHOOK_PORT:-0}/authenticate
export KWATCH_K8S_WEBHOOK_SECRET=$PKI/webhook.secret
export KWATCH_K8S_WEBHOOK_LOG=$D/webhook-reviews.jsonl
EOF
    mv "$D/env.tmp" "$D/env"
}

api_get() { # PATH -> body on stdout; fails on HTTP error
    curl -sS -f --max-time 5 --cacert "$PKI/ca.crt" \
        -H "Authorization: Bearer $(cat "$PKI/admin.token")" "https://127.0.0.1:$API_PORT$1"
}

etcd_healthy() {
    ETCDCTL_API=3 etcdctl --endpoints="http://127.0.0.1:$ETCD_PORT" --dial-timeout=2s \
        --command-timeout=3s endpoint health >/dev/null 2>&1
}

# ------------------------------------------------------------------ components
start_etcd() {
    if running_pid etcd >/dev/null; then return 0; fi
    port_free "$ETCD_PORT" || die "etcd client port $ETCD_PORT is in use by another process"
    port_free "$ETCD_PEER_PORT" || die "etcd peer port $ETCD_PEER_PORT is in use by another process"
    mkdir -p "$D/etcd-data"; chmod 700 "$D/etcd-data"
    launch etcd "$(command -v etcd)" \
        --name kwatch \
        --data-dir "$D/etcd-data" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "kwatch=http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster-state new \
        --logger zap --log-outputs stderr
    await_start etcd etcd "not healthy" 30 0.2 etcd_healthy
}

apiserver_args() {
    local authz=$1 extra=$2
    APISERVER_ARGS=(
        --etcd-servers="http://127.0.0.1:$ETCD_PORT"
        --bind-address=127.0.0.1
        --advertise-address=127.0.0.1
        --secure-port="$API_PORT"
        --tls-cert-file="$PKI/apiserver.crt"
        --tls-private-key-file="$PKI/apiserver.key"
        --client-ca-file="$PKI/ca.crt"
        --token-auth-file="$PKI/tokens.csv"
        --anonymous-auth=false
        --authorization-mode="$authz"
        --service-account-issuer=https://kubernetes.default.svc.cluster.local
        --service-account-key-file="$PKI/sa.pub"
        --service-account-signing-key-file="$PKI/sa.key"
        --service-cluster-ip-range=10.0.0.0/24
        --endpoint-reconciler-type=none
        --etcd-compaction-interval=0
        --cert-dir="$D/apiserver-certs"
        --profiling=false
    )
    # the token webhook (clusters started before it existed have no WEBHOOK_PORT): cache TTL 0
    # bypasses the webhook's own cache, so each token the static file does not know is reviewed
    # (kube-apiserver still caches successful token authentications for 10 s, see the header)
    if [ -n "${WEBHOOK_PORT:-}" ] && [ -f "$D/authn-webhook.kubeconfig" ]; then
        APISERVER_ARGS+=(
            --authentication-token-webhook-config-file="$D/authn-webhook.kubeconfig"
            --authentication-token-webhook-version=v1beta1
            --authentication-token-webhook-cache-ttl=0s
        )
    fi
    if [ "$SA_ADMISSION" != 1 ]; then
        APISERVER_ARGS+=(--disable-admission-plugins=ServiceAccount)
    fi
    if [ "${KWATCH_K8S_AUDIT:-1}" != 0 ]; then
        write_audit_policy
        APISERVER_ARGS+=(
            --audit-policy-file="$D/audit-policy.yaml"
            --audit-log-path="$D/audit.log"
            --audit-log-format=json
            --audit-log-maxsize=200
            --audit-log-maxbackup=1
        )
    fi
    # shellcheck disable=SC2206
    [ -n "$extra" ] && APISERVER_ARGS+=($extra)
    return 0
}

wait_apiserver_ready() {
    local t0=$SECONDS
    until [ "$(api_get /readyz 2>/dev/null)" = ok ]; do
        running_pid apiserver >/dev/null || { log_tail apiserver; die "kube-apiserver exited during startup"; }
        if [ $((SECONDS - t0)) -ge "$READY_TIMEOUT" ]; then
            log_tail apiserver
            echo "[k8s] /readyz says:" >&2
            curl -sS --max-time 5 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$PKI/admin.token")" \
                "https://127.0.0.1:$API_PORT/readyz?verbose" >&2 || true
            die "kube-apiserver not ready after $READY_TIMEOUT s (https://127.0.0.1:$API_PORT)"
        fi
        sleep 0.25
    done
}

start_apiserver() {
    if running_pid apiserver >/dev/null; then return 0; fi
    port_free "$API_PORT" || die "apiserver port $API_PORT is in use by another process"
    apiserver_args "$AUTHZ" "$EXTRA_ARGS"
    launch apiserver "$KBIN/kube-apiserver" "${APISERVER_ARGS[@]}"
    wait_apiserver_ready
}

webhook_ready() {
    [ "$(curl -sS --max-time 2 --cacert "$PKI/ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/healthz" 2>/dev/null)" = ok ]
}

start_webhook() {
    [ -n "${WEBHOOK_PORT:-}" ] || return 0
    if running_pid webhook >/dev/null; then return 0; fi
    port_free "$WEBHOOK_PORT" || die "webhook port $WEBHOOK_PORT is in use by another process"
    touch "$D/webhook-reviews.jsonl"
    launch webhook "$(command -v python3)" "$HERE/authn_webhook.py" \
        --port "$WEBHOOK_PORT" \
        --cert "$PKI/apiserver.crt" --key "$PKI/apiserver.key" \
        --secret-file "$PKI/webhook.secret" \
        --review-log "$D/webhook-reviews.jsonl"
    await_start webhook "the authn webhook" "not answering" 20 0.1 webhook_ready
}

start_cm() {
    [ "$NO_CM" = 1 ] && return 0
    if running_pid controller-manager >/dev/null; then return 0; fi
    launch controller-manager "$KBIN/kube-controller-manager" \
        --kubeconfig="$D/controller-manager.kubeconfig" \
        --leader-elect=false \
        --bind-address=127.0.0.1 --secure-port=0 --port=0 \
        --service-account-private-key-file="$PKI/sa.key" \
        --root-ca-file="$PKI/ca.crt" \
        --use-service-account-credentials=false \
        --profiling=false
    sleep 0.5
    running_pid controller-manager >/dev/null || { log_tail controller-manager; die "kube-controller-manager exited during startup"; }
}

# wait (best effort, up to 30 s) until the controller manager has created the default service account
wait_cm_working() {
    [ "$NO_CM" = 1 ] && return 0
    local t0=$SECONDS
    until api_get /api/v1/namespaces/default/serviceaccounts/default >/dev/null 2>&1; do
        running_pid controller-manager >/dev/null || { log_tail controller-manager; die "kube-controller-manager exited"; }
        if [ $((SECONDS - t0)) -ge 30 ]; then
            say "warning: no default service account after 30 s; is kube-controller-manager working? (see $D/controller-manager.log)"
            return 0
        fi
        sleep 0.25
    done
}

save_settings() {
    {
        printf 'AUTHZ=%q\n' "$AUTHZ"
        printf 'EXTRA_ARGS=%q\n' "$EXTRA_ARGS"
        printf 'SA_ADMISSION=%q\n' "$SA_ADMISSION"
        printf 'NO_CM=%q\n' "$NO_CM"
    } >"$D/settings"
}

load_settings() { # saved values, overridden by env values that are set
    AUTHZ=AlwaysAllow EXTRA_ARGS="" SA_ADMISSION=0 NO_CM=0
    # shellcheck disable=SC1091
    [ -f "$D/settings" ] && . "$D/settings"
    AUTHZ=${KWATCH_K8S_AUTHZ:-$AUTHZ}
    EXTRA_ARGS=${KWATCH_APISERVER_ARGS-$EXTRA_ARGS}
    SA_ADMISSION=${KWATCH_K8S_SA_ADMISSION:-$SA_ADMISSION}
    NO_CM=${KWATCH_K8S_NO_CM:-$NO_CM}
}

# The audit policy: the verbs list and watch, and writes (create, patch, update, delete) of
# configmaps, secrets and namespaces, at Metadata level (request URI, user, user agent, response
# code; no bodies), without the RequestReceived stage: one line per LIST or write and two per
# WATCH (ResponseStarted, ResponseComplete), so tests can read the exact URIs a client sent
# (e.g. that kwatch fell back from sendInitialEvents=true to LIST) and who sent a write (the
# role's own token, issue 32) at a negligible cost: the controllers write none of these often.
write_audit_policy() {
    cat >"$D/audit-policy.yaml.tmp" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["list", "watch"]
- level: Metadata
  verbs: ["create", "patch", "update", "delete"]
  resources:
  - group: ""
    resources: ["configmaps", "secrets", "namespaces"]
- level: None
EOF
    mv "$D/audit-policy.yaml.tmp" "$D/audit-policy.yaml"
}

# ------------------------------------------------------------------ commands
cmd_start() {
    local t0=$SECONDS
    ensure_packages
    ensure_binaries
    AUTHZ=${KWATCH_K8S_AUTHZ:-AlwaysAllow}
    EXTRA_ARGS=${KWATCH_APISERVER_ARGS:-}
    SA_ADMISSION=${KWATCH_K8S_SA_ADMISSION:-0}
    NO_CM=${KWATCH_K8S_NO_CM:-0}

    local all=1 c
    for c in etcd webhook apiserver controller-manager; do
        [ "$c" = controller-manager ] && [ "$NO_CM" = 1 ] && continue
        running_pid "$c" >/dev/null || all=0
    done
    if [ $all = 1 ]; then
        load_ports
        wait_apiserver_ready
        write_env
        say "already running: https://127.0.0.1:$API_PORT (source $D/env)"
        return 0
    fi
    save_settings

    gen_pki
    gen_webhook_secret
    # Ports: chosen once per DIR; re-chosen only if one was taken meanwhile by another process
    # (and none of ours is running).
    if [ -f "$D/ports" ]; then
        . "$D/ports"
        if ! running_pid etcd >/dev/null && ! running_pid apiserver >/dev/null && ! running_pid webhook >/dev/null; then
            if ! port_free "$ETCD_PORT" || ! port_free "$ETCD_PEER_PORT" || ! port_free "$API_PORT" ||
                { [ -n "${WEBHOOK_PORT:-}" ] && ! port_free "$WEBHOOK_PORT"; }; then
                rm -f "$D/ports"
            fi
        fi
    fi
    # a ports file from before the webhook: add its port
    if [ -f "$D/ports" ] && ! grep -q '^WEBHOOK_PORT=' "$D/ports"; then
        PICKED=$'\n'"$ETCD_PORT"$'\n'"$ETCD_PEER_PORT"$'\n'"$API_PORT"
        printf 'WEBHOOK_PORT=%s\n' "$(pick_port)" >>"$D/ports"
    fi
    if [ ! -f "$D/ports" ]; then
        PICKED=""
        ETCD_PORT=$(pick_port); PICKED+=$'\n'"$ETCD_PORT"
        ETCD_PEER_PORT=$(pick_port); PICKED+=$'\n'"$ETCD_PEER_PORT"
        API_PORT=$(pick_port); PICKED+=$'\n'"$API_PORT"
        WEBHOOK_PORT=$(pick_port)
        printf 'ETCD_PORT=%s\nETCD_PEER_PORT=%s\nAPI_PORT=%s\nWEBHOOK_PORT=%s\n' \
            "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" "$WEBHOOK_PORT" >"$D/ports"
    fi
    . "$D/ports"
    write_kubeconfig "$D/kubeconfig" admin
    write_webhook_kubeconfig
    write_kubeconfig "$D/controller-manager.kubeconfig" kube-controller-manager
    write_env

    say "starting etcd on 127.0.0.1:$ETCD_PORT..."
    start_etcd
    say "starting the token webhook authenticator on https://127.0.0.1:$WEBHOOK_PORT..."
    start_webhook
    say "starting kube-apiserver on https://127.0.0.1:$API_PORT..."
    start_apiserver
    if [ "$NO_CM" != 1 ]; then
        say "starting kube-controller-manager..."
        start_cm
        wait_cm_working
    fi
    say "cluster ready in $((SECONDS - t0)) s: https://127.0.0.1:$API_PORT (source $D/env; KUBECONFIG=$D/kubeconfig)"
}

cmd_stop() {
    local c
    for c in controller-manager apiserver webhook etcd; do
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
    running_pid etcd >/dev/null || say "warning: etcd is not running; the apiserver will not become ready"
    local t0=$SECONDS
    say "restarting kube-apiserver on https://127.0.0.1:$API_PORT..."
    halt apiserver
    if [ "${KWATCH_APISERVER_DOWN_S:-0}" != 0 ]; then
        say "kube-apiserver down for ${KWATCH_APISERVER_DOWN_S} s"
        sleep "$KWATCH_APISERVER_DOWN_S"
    fi
    # the port may linger briefly after exit
    for _ in $(seq 50); do port_free "$API_PORT" && break; sleep 0.1; done
    start_webhook
    start_apiserver
    say "kube-apiserver ready again in $((SECONDS - t0)) s"
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

cmd_compact() {
    load_ports
    local ep="http://127.0.0.1:$ETCD_PORT" rev out
    rev=$(ETCDCTL_API=3 etcdctl --endpoints="$ep" endpoint status --write-out=json |
          grep -o '"revision":[0-9]*' | head -n1 | cut -d: -f2)
    [ -n "$rev" ] || die "could not read the etcd revision from $ep"
    if out=$(ETCDCTL_API=3 etcdctl --endpoints="$ep" compact "$rev" 2>&1); then
        say "$out" >&2
    elif grep -q "required revision has been compacted" <<<"$out"; then
        say "already compacted at revision $rev" >&2
    else
        echo "$out" >&2
        die "compaction failed"
    fi
    echo "$rev"
}

cmd_status() {
    [ -f "$D/ports" ] || { echo "no cluster in $D"; return 1; }
    . "$D/ports"
    local c pid ready=1
    for c in etcd webhook apiserver controller-manager; do
        if pid=$(running_pid "$c"); then
            printf '%-19s running  pid %-7s rss %s\n' "$c" "$pid" \
                "$(awk '/VmRSS/ {printf "%d MB", $2/1024}' "/proc/$pid/status" 2>/dev/null)"
        else
            printf '%-19s stopped\n' "$c"
        fi
    done
    echo "etcd       http://127.0.0.1:$ETCD_PORT (peer $ETCD_PEER_PORT)$(etcd_healthy && echo ' healthy' || echo ' unreachable')"
    if [ "$(api_get /readyz 2>/dev/null)" = ok ]; then
        echo "apiserver  https://127.0.0.1:$API_PORT ready"
    else
        echo "apiserver  https://127.0.0.1:$API_PORT NOT ready"; ready=0
    fi
    if [ -n "${WEBHOOK_PORT:-}" ]; then
        echo "webhook    https://127.0.0.1:$WEBHOOK_PORT$(webhook_ready && echo ' ready' || echo ' NOT ready')"
    fi
    echo "env        $D/env"
    echo "kubeconfig $D/kubeconfig"
    [ $ready = 1 ]
}

# one command at a time per DIR
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
