# Shared by cluster.sh and modern-cluster.sh (sourced, not run): the processes of a control plane
# in one directory, and the loopback ports they listen on.  The sourcing script defines first:
#   TAG               the prefix of its messages ("k8s", "k8s-modern")
#   D                 the cluster directory (NAME.pid, NAME.log, ports)
#   APISERVER_GRACE   tenths of a second the API server gets between SIGTERM and SIGKILL
#   bin_of NAME       the program a process NAME runs (to tell a reused pid apart)

say() { echo "[$TAG] $*"; }
die() { echo "[$TAG] ERROR: $*" >&2; exit 1; }

# running_pid NAME: the pid of NAME if it runs (from DIR/NAME.pid), else fails
running_pid() {
    local f="$D/$1.pid" pid
    [ -f "$f" ] || return 1
    pid=$(cat "$f")
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    # make sure the pid was not reused by something else
    # (the program, or for a script the interpreter's first argument)
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n2 | grep -q "$(bin_of "$1")\$" || return 1
    # a zombie is not running
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
    echo "$pid"
}

# start NAME BINARY ARGS...: background, own session, log to DIR/NAME.log, pid to DIR/NAME.pid
launch() {
    local name=$1; shift
    echo "=== $(date -u +%FT%TZ) starting: $*" >>"$D/$name.log"
    rm -f "$D/$name.pid"
    # The daemon keeps only stdin/stdout/stderr: no inherited pipe of the caller (a test
    # runner waiting for EOF) and not fd 9, which holds the DIR lock.
    setsid bash -c '
        echo $$ >"$0"
        for fd in $(ls /proc/$$/fd); do case $fd in 0|1|2) ;; *) eval "exec $fd>&-" ;; esac; done
        exec "$@"' "$D/$name.pid" "$@" </dev/null >>"$D/$name.log" 2>&1 9>&- &
    for _ in $(seq 100); do running_pid "$name" >/dev/null && return 0; sleep 0.05; done
    log_tail "$name"
    die "$name did not start"
}

# stop NAME: TERM, wait (20 s; APISERVER_GRACE for the API server), then KILL
halt() {
    local name=$1 pid grace=200
    [ "$name" = apiserver ] && grace=$APISERVER_GRACE
    pid=$(running_pid "$name") || { rm -f "$D/$name.pid"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $grace); do
        running_pid "$name" >/dev/null || break
        sleep 0.1
    done
    if running_pid "$name" >/dev/null; then
        echo "=== $(date -u +%FT%TZ) $TAG: no exit $((grace / 10)) s after SIGTERM: SIGKILL" >>"$D/$name.log"
        [ "$name" = apiserver ] || say "$name (pid $pid) did not exit after $((grace / 10)) s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 50); do running_pid "$name" >/dev/null || break; sleep 0.1; done
    fi
    rm -f "$D/$name.pid"
}

log_tail() {
    echo "[$TAG] --- last lines of $D/$1.log ---" >&2
    tail -n "${2:-30}" "$D/$1.log" >&2 2>/dev/null || true
    echo "[$TAG] ---" >&2
}

# Local TCP ports in use on this machine, from /proc/net/tcp{,6}. With "all", every socket
# state counts (for picking new ports); otherwise only listening sockets count, since a Go
# listener (SO_REUSEADDR) binds over the connections a killed server leaves behind in
# TIME_WAIT, FIN_WAIT or CLOSE_WAIT while its clients have not closed them yet (for
# re-using our own ports after a stop or restart).
used_ports() {
    awk -v all="${1:-}" '
        function hex(h,   i, n) { n = 0; for (i = 1; i <= length(h); i++) n = n * 16 + index("0123456789ABCDEF", toupper(substr(h, i, 1))) - 1; return n }
        FNR > 1 && (all != "" || $4 == "0A") { n = split($2, a, ":"); print hex(a[n]) }
    ' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -un
}
port_free() { ! used_ports | grep -qx "$1"; }
# a random port below the kernel's ephemeral range (32768+), so that no outgoing
# connection can be holding it
pick_port() {
    local used p
    used=$(used_ports all)
    for _ in $(seq 500); do
        p=$(( 20000 + RANDOM % 12000 ))
        grep -qx "$p" <<<"$used" && continue
        grep -qx "$p" <<<"${PICKED:-}" && continue
        echo "$p"; return 0
    done
    die "could not find a free port"
}

load_ports() {
    [ -f "$D/ports" ] || die "$D is not a cluster dir of $(basename "$0") (no $D/ports); run: $0 start $D"
    # shellcheck disable=SC1091
    . "$D/ports"
}
