#!/usr/bin/env bash
# Build a real kube-apiserver and kube-controller-manager (Kubernetes 1.20) offline
# from Debian's `kubernetes` source package, with Debian's Go 1.19.
#
# Result: ${KWATCH_K8S_CACHE:-/var/cache/kwatch-k8s}/bin/{kube-apiserver,kube-controller-manager}
# Idempotent: does nothing if both binaries exist and answer --version.
# Needs root (apt-get install) unless the packages are already installed.
#
# Env:
#   KWATCH_K8S_CACHE   cache dir (default /var/cache/kwatch-k8s)
#   KWATCH_K8S_SUITE   Debian suite holding the source package (default bookworm)
#   KWATCH_K8S_KEEP_SRC=0  delete the unpacked source tree after a successful build
#   KWATCH_K8S_FORCE=1 rebuild even if the binaries exist
set -euo pipefail

CACHE="${KWATCH_K8S_CACHE:-/var/cache/kwatch-k8s}"
SUITE="${KWATCH_K8S_SUITE:-bookworm}"
BIN="$CACHE/bin"
LOG="$CACHE/build.log"
GO_PKGS=(golang-1.19-go etcd-server etcd-client dpkg-dev openssl)
GOROOT_BIN=/usr/lib/go-1.19/bin

say() { echo "[k8s] $*"; }

binaries_ok() {
    [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ] &&
        "$BIN/kube-apiserver" --version >/dev/null 2>&1 &&
        "$BIN/kube-controller-manager" --version >/dev/null 2>&1
}

if [ "${KWATCH_K8S_FORCE:-0}" != 1 ] && binaries_ok; then
    say "binaries present in $BIN ($("$BIN/kube-apiserver" --version 2>/dev/null)); nothing to do"
    exit 0
fi

mkdir -p "$CACHE" "$BIN"
# one build at a time per cache dir; a waiting caller re-checks after the lock
exec 8>"$CACHE/.lock"
if ! flock -n 8; then
    say "another build is running in $CACHE; waiting..."
    flock 8
fi
if [ "${KWATCH_K8S_FORCE:-0}" != 1 ] && binaries_ok; then
    say "binaries present in $BIN; nothing to do"
    exit 0
fi
: >"$LOG"
T0=$(date +%s)

fail() {
    local rc=$?
    echo "[k8s] BUILD FAILED (exit $rc) during: ${STEP:-?}" >&2
    echo "[k8s] last lines of $LOG:" >&2
    tail -n 40 "$LOG" >&2 || true
    exit 1
}
trap fail ERR

# run CMD... with output to the log
q() { "$@" >>"$LOG" 2>&1; }

# ---------------------------------------------------------------- packages
STEP="installing packages"
missing=()
for p in "${GO_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! q apt-get install -y --no-install-recommends "${missing[@]}"; then
        q apt-get update
        q apt-get install -y --no-install-recommends "${missing[@]}"
    fi
fi
[ -x "$GOROOT_BIN/go" ] || { echo "no $GOROOT_BIN/go" >>"$LOG"; false; }

# ---------------------------------------------------------------- apt source
# The mirror URI of the machine's own Debian sources (deb822 *.sources or one-line *.list),
# together with its Signed-By keyring if any. Prints "URI<TAB>KEYRING".
mirror_of_machine() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v suite="$SUITE" '
            function flush() {
                if (uri != "" && ok_type && ok_suite) { print uri "\t" key; found=1; exit }
                uri=""; key=""; ok_type=0; ok_suite=0
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            {
                line=$0; field=tolower(line); sub(/:.*/, "", field); sub(/^[^:]*:[ \t]*/, "", line)
                if (field == "types") { n=split(line, a, /[ \t]+/); for (i=1;i<=n;i++) if (a[i]=="deb"||a[i]=="deb-src") ok_type=1 }
                else if (field == "uris") { split(line, a, /[ \t]+/); uri=a[1] }
                else if (field == "suites") { n=split(line, a, /[ \t]+/); for (i=1;i<=n;i++) if (a[i]==suite) ok_suite=1 }
                else if (field == "signed-by") { key=line }
                else if (field == "enabled" && tolower(line) == "no") { ok_type=0 }
            }
            END { if (!found) flush() }
        ' "$f"
    done | awk 'NR == 1 { print; found = 1 } END { exit !found }' && return 0  # reads all: no SIGPIPE under pipefail
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v suite="$SUITE" '
            /^[ \t]*#/ { next }
            $1 == "deb" || $1 == "deb-src" {
                key=""; i=2
                if ($2 ~ /^\[/) {
                    opts=""
                    for (; i<=NF; i++) { opts=opts " " $i; if ($i ~ /\]$/) { i++; break } }
                    if (match(opts, /signed-by=[^] ]+/)) key=substr(opts, RSTART+10, RLENGTH-10)
                }
                if ($(i+1) == suite) { print $i "\t" key; exit }
            }' "$f"
    done | awk 'NR == 1 { print; found = 1 } END { exit !found }'
}

SRCROOT="$CACHE/src"
STEP="fetching source"
ksrc=$(ls -d "$SRCROOT"/kubernetes-*/ 2>/dev/null | head -n1 || true)
if [ -z "$ksrc" ] || [ ! -f "$SRCROOT/.unpacked" ]; then
    say "fetching source: apt-get source kubernetes ($SUITE)..."
    mirror=$(mirror_of_machine) || { echo "no '$SUITE' entry in /etc/apt/sources.list{,.d}" >>"$LOG"; false; }
    uri=${mirror%%$'\t'*}
    key=${mirror#*$'\t'}
    APTDIR="$CACHE/apt"
    rm -rf "$APTDIR" "$SRCROOT"
    mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$SRCROOT"
    if [ -n "$key" ]; then
        echo "deb-src [signed-by=$key] $uri $SUITE main" >"$APTDIR/sources.list"
    else
        echo "deb-src $uri $SUITE main" >"$APTDIR/sources.list"
    fi
    echo "private sources.list: $(cat "$APTDIR/sources.list")" >>"$LOG"
    APTOPTS=(-o "Dir::Etc::SourceList=$APTDIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$APTDIR/lists" -o "Dir::Cache=$APTDIR/cache"
             -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=")
    q apt-get "${APTOPTS[@]}" update
    chmod 755 "$SRCROOT"
    (cd "$SRCROOT" && q apt-get "${APTOPTS[@]}" source kubernetes)
    ksrc=$(ls -d "$SRCROOT"/kubernetes-*/ | head -n1)
    touch "$SRCROOT/.unpacked"
fi
ksrc=${ksrc%/}
echo "source tree: $ksrc" >>"$LOG"

# upstream version: "1.20.5+really1.20.2" -> 1.20.2
debver=$(cd "$ksrc" && dpkg-parsechangelog -S Version)
upver=${debver%%-*}
upver=${upver##*really}
upver=${upver#*:}
case "$upver" in
    1.20.*) ;;
    *) echo "unexpected kubernetes source version $debver (want 1.20.x)" >>"$LOG"; false ;;
esac
major=${upver%%.*}; rest=${upver#*.}; minor=${rest%%.*}
say "kubernetes source $debver (building v$upver)"

# ---------------------------------------------------------------- go env
export GOPATH="$CACHE/gopath"
export GOCACHE="$CACHE/gocache"
export GO111MODULE=off GOPROXY=off GOFLAGS='' CGO_ENABLED=0
export PATH="$GOROOT_BIN:$PATH"
unset GOROOT
mkdir -p "$GOPATH/src/k8s.io" "$GOCACHE"
ln -sfn "$ksrc" "$GOPATH/src/k8s.io/kubernetes"
KDIR="$GOPATH/src/k8s.io/kubernetes"
go version >>"$LOG"

# ---------------------------------------------------------------- reflect2 1.0.2
STEP="replacing vendored reflect2"
R2="$KDIR/vendor/github.com/modern-go/reflect2"
if [ ! -f "$R2/.debian-1.0.2" ]; then
    say "replacing vendored modern-go/reflect2 with Debian's 1.0.2..."
    tmp=$(mktemp -d)
    chmod 755 "$tmp"
    chown _apt "$tmp" 2>/dev/null || true   # lets apt download sandboxed
    if ! (cd "$tmp" && q apt-get download golang-github-modern-go-reflect2-dev); then
        q apt-get update
        (cd "$tmp" && q apt-get download golang-github-modern-go-reflect2-dev)
    fi
    q dpkg-deb -x "$tmp"/golang-github-modern-go-reflect2-dev_*.deb "$tmp/x"
    src2="$tmp/x/usr/share/gocode/src/github.com/modern-go/reflect2"
    ls "$src2"/*.go >/dev/null
    rm -f "$R2"/*.go "$R2"/*.s
    for f in "$src2"/*.go "$src2"/*.s; do
        [ -f "$f" ] || continue
        case "$f" in *_test.go) continue ;; esac
        cp "$f" "$R2/"
    done
    echo "$(basename "$tmp"/golang-github-modern-go-reflect2-dev_*.deb)" >"$R2/.debian-1.0.2"
    rm -rf "$tmp"
fi

# ---------------------------------------------------------------- openapi
STEP="generating openapi"
OPENAPI="$KDIR/pkg/generated/openapi/zz_generated.openapi.go"
if [ ! -s "$OPENAPI" ]; then
    say "generating pkg/generated/openapi (~30 s)..."
    cd "$KDIR"
    q go build -o "$CACHE/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
    # Inputs as in build/root/Makefile.generated_files: every package directory with a
    # +k8s:openapi-gen= tag; staging/src/k8s.io/X is the vendored k8s.io/X.
    dirs=$(grep -rl --include='*.go' --exclude-dir=.git --exclude-dir=_output \
               --exclude-dir=third_party --exclude-dir=vendor --exclude-dir=debian \
               -e '+k8s:openapi-gen=' . |
           xargs -n1 dirname | sed 's|^\./||' | LC_ALL=C sort -u |
           grep -v -e '^staging/src/k8s.io/code-generator' -e '^staging/src/k8s.io/sample-apiserver' |
           sed -e 's|^staging/src/|k8s.io/kubernetes/vendor/|' -e 't' -e 's|^|k8s.io/kubernetes/|')
    echo "openapi-gen inputs: $(echo "$dirs" | wc -l) packages" >>"$LOG"
    report="$CACHE/openapi-violations.list"
    q "$CACHE/openapi-gen" --logtostderr \
        -i "$(echo "$dirs" | paste -sd, -)" \
        -p k8s.io/kubernetes/pkg/generated/openapi \
        -O zz_generated.openapi \
        -h "$KDIR/vendor/k8s.io/code-generator/hack/boilerplate.go.txt" \
        -r "$report"
    [ -s "$OPENAPI" ]
    if diff -q <(LC_ALL=C sort "$report") <(LC_ALL=C sort api/api-rules/violation_exceptions.list) >/dev/null 2>&1; then
        echo "openapi violation report matches api/api-rules/violation_exceptions.list" >>"$LOG"
    else
        say "warning: openapi violation report differs from api/api-rules/violation_exceptions.list (see $report)"
    fi
fi

# ---------------------------------------------------------------- build
cd "$KDIR"
V=k8s.io/kubernetes/vendor/k8s.io
builddate=$(date -u -d "@$(dpkg-parsechangelog -S Timestamp)" +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS="-s -w"
for pkg in component-base/version client-go/pkg/version; do
    LDFLAGS+=" -X $V/$pkg.gitVersion=v$upver -X $V/$pkg.gitMajor=$major -X $V/$pkg.gitMinor=$minor"
    LDFLAGS+=" -X $V/$pkg.gitTreeState=clean -X $V/$pkg.buildDate=$builddate"
    LDFLAGS+=" -X $V/$pkg.gitCommit=debian-$debver"
done

for cmd in kube-apiserver kube-controller-manager; do
    STEP="building $cmd"
    if [ -x "$BIN/$cmd" ] && "$BIN/$cmd" --version >/dev/null 2>&1 && [ "${KWATCH_K8S_FORCE:-0}" != 1 ]; then
        continue
    fi
    if [ "$cmd" = kube-apiserver ]; then say "building $cmd (~3 min on 2 cores)..."; else say "building $cmd (~1-2 min)..."; fi
    t=$(date +%s)
    q go build -tags selinux,notest -trimpath -ldflags "$LDFLAGS" -o "$BIN/$cmd.tmp" "./cmd/$cmd"
    mv "$BIN/$cmd.tmp" "$BIN/$cmd"
    say "  $cmd built in $(( $(date +%s) - t )) s: $("$BIN/$cmd" --version)"
done

STEP="checking binaries"
binaries_ok

if [ "${KWATCH_K8S_KEEP_SRC:-1}" = 0 ]; then
    # Safe: the next build (e.g. after deleting a binary) fetches the source again.
    rm -rf "$SRCROOT" "$CACHE/apt" "$GOPATH" "$CACHE/openapi-gen"
fi
trap - ERR
say "done in $(( $(date +%s) - T0 )) s: $BIN/kube-apiserver, $BIN/kube-controller-manager (log: $LOG)"
