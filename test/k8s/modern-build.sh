#!/usr/bin/env bash
# Build the "modern" control plane offline from Debian unstable's .debs: a Kubernetes 1.36
# generic API server (k8s.io/apiextensions-apiserver 0.36.x, CustomResourceDefinitions and
# custom resources only: no /api, no pods, no aggregator) and etcd 3.5 (3.5.13+ is needed for
# WatchList: older etcd lacks RequestWatchProgress). The system stays Debian 12: the .debs are
# fetched with a private apt configuration and unpacked with dpkg-deb -x.
#
# Result: ${KWATCH_K8S_MODERN_CACHE:-/var/cache/kwatch-k8s-modern}/
#   bin/crd-apiserver   the API server (main.go beside it: the stock main with discovery on)
#   bin/etcd            etcd from Debian's etcd-server
#   debs/*.deb          every .deb the two came from (rebuild offline: KWATCH_K8S_MODERN_DEBS=<dir>)
#   VERSIONS            package versions used
# Idempotent: does nothing if the cached binaries run. The cache appears atomically: the
# build runs in a sibling temporary directory which is renamed into place at the end, so a
# concurrent reader never sees a half-built cache; concurrent builders wait on a lock.
#
# Env:
#   KWATCH_K8S_MODERN_CACHE  cache dir (default /var/cache/kwatch-k8s-modern)
#   KWATCH_K8S_MODERN_SUITE  Debian suite holding the packages (default sid)
#   KWATCH_K8S_MODERN_MIRROR archive URI (default: the machine's own Debian mirror); e.g. a
#                            snapshot.debian.org/archive/debian/<date>/ URI when unstable moved on
#   KWATCH_K8S_MODERN_DEBS   a directory of .debs to build from instead of downloading
#   KWATCH_K8S_MODERN_FORCE=1 rebuild even if the cache is complete
set -euo pipefail

CACHE="${KWATCH_K8S_MODERN_CACHE:-/var/cache/kwatch-k8s-modern}"
SUITE="${KWATCH_K8S_MODERN_SUITE:-sid}"
GOV=1.26                       # go.mod of apiextensions-apiserver 0.36 asks for Go 1.26
WANT_APIEXT=0.36               # the machinery version the tests are written for
ROOTPKG=golang-k8s-apiextensions-apiserver-dev

say() { echo "[k8s-modern] $*"; }

cache_ok() {
    [ -x "$CACHE/bin/crd-apiserver" ] && [ -x "$CACHE/bin/etcd" ] &&
        "$CACHE/bin/crd-apiserver" --help >/dev/null 2>&1 &&
        "$CACHE/bin/etcd" --version >/dev/null 2>&1
}

if [ "${KWATCH_K8S_MODERN_FORCE:-0}" != 1 ] && cache_ok; then
    say "present in $CACHE ($(head -n1 "$CACHE/VERSIONS" 2>/dev/null)); nothing to do"
    exit 0
fi

parent=$(dirname "$CACHE")
mkdir -p "$parent"
# one build at a time per cache dir; a waiting caller re-checks after the lock
exec 8>"$CACHE.lock"
if ! flock -n 8; then
    say "another build of $CACHE is running; waiting..."
    flock 8
fi
if [ "${KWATCH_K8S_MODERN_FORCE:-0}" != 1 ] && cache_ok; then
    say "present in $CACHE; nothing to do"
    exit 0
fi

T0=$(date +%s)
# A work dir beside the cache (same file system, so the final rename is atomic). Leftovers of a
# killed build are removed: we hold the lock, so nobody else is using them.
rm -rf "$CACHE".build.*
W=$(mktemp -d "$CACHE.build.XXXXXX")
chmod 755 "$W"
LOG="$W/build.log"
: >"$LOG"
OUT="$W/cache"                 # becomes $CACHE
mkdir -p "$OUT/bin" "$OUT/debs" "$W/root" "$W/etcdroot" "$W/gopath/src/crdserver" "$W/apt/lists/partial" \
         "$W/apt/cache/archives/partial"
GOCACHE_DIR="$CACHE.gocache"   # kept across builds: a rebuild compiles in seconds

fail() {
    local rc=$?
    echo "[k8s-modern] BUILD FAILED (exit $rc) during: ${STEP:-?}" >&2
    echo "[k8s-modern] last lines of $LOG:" >&2
    tail -n 30 "$LOG" >&2 || true
    exit 1
}
trap fail ERR
trap 'rm -rf "$W"' EXIT

q() { "$@" >>"$LOG" 2>&1; }
# the archive does not have what we need: say what and how to go on, then stop
archive_gone() {
    trap - ERR
    echo "[k8s-modern] Debian's archive no longer has what this build needs:" >&2
    echo "[k8s-modern]   $*" >&2
    echo "[k8s-modern]   archive: ${uri:-?} suite $SUITE" >&2
    echo "[k8s-modern] Debian unstable replaces packages without notice. Either build from saved .debs" >&2
    echo "[k8s-modern] (KWATCH_K8S_MODERN_DEBS=<dir>, e.g. the debs/ of an old $CACHE), or point at a" >&2
    echo "[k8s-modern] snapshot of the archive: KWATCH_K8S_MODERN_MIRROR=https://snapshot.debian.org/archive/debian/20261120T000000Z/" >&2
    exit 2
}

for tool in dpkg-deb apt-get apt-cache flock; do
    command -v "$tool" >/dev/null || { say "needs $tool"; exit 1; }
done

# ---------------------------------------------------------------- .debs
if [ -n "${KWATCH_K8S_MODERN_DEBS:-}" ]; then
    STEP="copying .debs from $KWATCH_K8S_MODERN_DEBS"
    say "building from saved .debs in $KWATCH_K8S_MODERN_DEBS"
    cp "$KWATCH_K8S_MODERN_DEBS"/*.deb "$OUT/debs/"
else
    STEP="reading the $SUITE package lists"
    uri="${KWATCH_K8S_MODERN_MIRROR:-}"
    if [ -z "$uri" ]; then
        uri=$(awk 'tolower($1)=="uris:" {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
        [ -n "$uri" ] || uri=$(awk '$1=="deb" && $2 !~ /^\[/ {print $2; exit} $1=="deb" {for(i=2;i<=NF;i++) if ($i ~ /\]$/) {print $(i+1); exit}}' \
                                   /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
        [ -n "$uri" ] || uri=http://deb.debian.org/debian
    fi
    echo "deb $uri $SUITE main" >"$W/apt/sources.list"
    APTOPTS=(-o "Dir::Etc::SourceList=$W/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$W/apt/lists" -o "Dir::Cache=$W/apt/cache"
             -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=")
    say "reading $SUITE package lists from $uri..."
    q apt-get "${APTOPTS[@]}" update

    candidate() { apt-cache "${APTOPTS[@]}" policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}'; }
    STEP="checking package versions"
    v=$(candidate "$ROOTPKG")
    case "$v" in
        "" | "(none)") archive_gone "no package $ROOTPKG" ;;
        "$WANT_APIEXT".*) ;;
        *) archive_gone "$ROOTPKG is $v, the tests are written for $WANT_APIEXT.x (set WANT_APIEXT in $0 to try it)" ;;
    esac
    for p in golang-$GOV-go golang-$GOV-src etcd-server; do
        pv=$(candidate "$p")
        case "$pv" in "" | "(none)") archive_gone "no package $p" ;; esac
    done
    ev=$(candidate etcd-server)
    case "$ev" in
        3.5.1[3-9]* | 3.5.[2-9][0-9]* | 3.[6-9].* ) ;;
        *) archive_gone "etcd-server is $ev; WatchList needs etcd 3.5.13 or later" ;;
    esac
    say "$ROOTPKG $v, golang-$GOV-go $(candidate golang-$GOV-go), etcd-server $ev"

    STEP="resolving the golang-*-dev closure"
    # every golang-*-dev package reachable from the library (Depends only)
    apt-cache "${APTOPTS[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances --no-pre-depends "$ROOTPKG" 2>>"$LOG" |
        grep -E '^golang-.*-dev$' | sort -u >"$W/golang-devs.txt"
    n=$(wc -l <"$W/golang-devs.txt")
    [ "$n" -gt 50 ] || archive_gone "the dependency closure of $ROOTPKG has only $n golang-*-dev packages"

    STEP="downloading .debs"
    say "downloading $n golang-*-dev packages + Go $GOV + etcd-server (~275 MB)..."
    chown _apt "$OUT/debs" 2>/dev/null || true   # lets apt download sandboxed
    t=$(date +%s)
    if ! (cd "$OUT/debs" && q apt-get "${APTOPTS[@]}" download $(cat "$W/golang-devs.txt") \
              "golang-$GOV-go" "golang-$GOV-src" etcd-server); then
        archive_gone "apt-get download failed (a package of the closure vanished mid-update?); see $LOG"
    fi
    chown -R root "$OUT/debs" 2>/dev/null || true
    chmod 755 "$OUT/debs"
    say "  downloaded $(ls "$OUT/debs" | wc -l) .debs ($(du -sh "$OUT/debs" | cut -f1)) in $(( $(date +%s) - t )) s"
fi

STEP="unpacking .debs"
say "unpacking..."
t=$(date +%s)
for f in "$OUT"/debs/*.deb; do
    case "$(basename "$f")" in
        etcd-server_*) dpkg-deb -x "$f" "$W/etcdroot" ;;
        golang-*) dpkg-deb -x "$f" "$W/root" ;;
    esac
done
for f in "$OUT"/debs/*.deb; do dpkg-deb -W --showformat='${Package} ${Version}\n' "$f"; done | sort >"$OUT/VERSIONS.debs"
say "  unpacked in $(( $(date +%s) - t )) s"
GOROOT="$W/root/usr/lib/go-$GOV"
[ -x "$GOROOT/bin/go" ] || { echo "no $GOROOT/bin/go after unpacking (golang-$GOV-go missing?)" >>"$LOG"; false; }
[ -x "$W/etcdroot/usr/bin/etcd" ] || { echo "no usr/bin/etcd in etcd-server" >>"$LOG"; false; }

# ---------------------------------------------------------------- main.go
# The stock cmd/apiextensions-apiserver main sets EnableDiscovery=false (kube-aggregator serves
# /apis in a real kube-apiserver): this one turns discovery on (legacy /apis and the aggregated
# form) and sets the OpenAPI v2/v3 config, as the package's own test/integration/fixtures and
# testserver.go do.
cat >"$W/gopath/src/crdserver/main.go" <<'GO'
// crd-apiserver: k8s.io/apiextensions-apiserver's generic API server, standalone, with /apis
// discovery and /openapi enabled (normally provided by kube-aggregator in kube-apiserver).
package main

import (
	"os"

	"github.com/spf13/cobra"
	extensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/component-base/cli"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	o := options.NewCustomResourceDefinitionsServerOptions(os.Stdout, os.Stderr)
	cmd := &cobra.Command{
		Use: "crd-apiserver",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return o.ServerRunOptions.ComponentGlobalsRegistry.Set()
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			config, err := o.Config()
			if err != nil {
				return err
			}
			defs := openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)
			namer := openapinamer.NewDefinitionNamer(extensionsapiserver.Scheme)
			config.GenericConfig.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(defs, namer)
			config.GenericConfig.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(defs, namer)
			cc := config.Complete()
			cc.GenericConfig.EnableDiscovery = true
			s, err := cc.New(genericapiserver.NewEmptyDelegate())
			if err != nil {
				return err
			}
			return s.GenericAPIServer.PrepareRun().RunWithContext(c.Context())
		},
	}
	cmd.SetContext(ctx)
	o.AddFlags(cmd.Flags())
	os.Exit(cli.Run(cmd))
}
GO
cp "$W/gopath/src/crdserver/main.go" "$OUT/bin/main.go"

# ---------------------------------------------------------------- build
STEP="building crd-apiserver"
export GOROOT PATH="$GOROOT/bin:$PATH" GO111MODULE=off GOPATH="$W/gopath:$W/root/usr/share/gocode" \
       GOCACHE="$GOCACHE_DIR" GOFLAGS=-trimpath GOTOOLCHAIN=local GOPROXY=off CGO_ENABLED=0
mkdir -p "$GOCACHE"
go version >>"$LOG"
say "building crd-apiserver with $(go version | awk '{print $3}') (~3-5 min cold on 2 cores, seconds warm)..."
t=$(date +%s)
q go build -ldflags=-s -o "$OUT/bin/crd-apiserver" crdserver
say "  built in $(( $(date +%s) - t )) s"
cp "$W/etcdroot/usr/bin/etcd" "$OUT/bin/etcd"
[ -x "$W/etcdroot/usr/bin/etcdctl" ] && cp "$W/etcdroot/usr/bin/etcdctl" "$OUT/bin/etcdctl"

STEP="checking binaries"
{
    echo "k8s.io/apiextensions-apiserver $(grep "^$ROOTPKG " "$OUT/VERSIONS.debs" | cut -d' ' -f2), $(go version | awk '{print $3}'), etcd $(grep '^etcd-server ' "$OUT/VERSIONS.debs" | cut -d' ' -f2)"
    "$OUT/bin/etcd" --version 2>&1 | head -n1
} >"$OUT/VERSIONS"
"$OUT/bin/crd-apiserver" --help >/dev/null 2>>"$LOG"
"$OUT/bin/etcd" --version >>"$LOG" 2>&1
cp "$LOG" "$OUT/build.log"

# ---------------------------------------------------------------- publish
STEP="publishing $CACHE"
if [ -e "$CACHE" ]; then
    mv "$CACHE" "$W/old"        # only on FORCE or a broken cache; readers hold no lock
fi
mv "$OUT" "$CACHE"
trap - ERR
say "done in $(( $(date +%s) - T0 )) s: $CACHE/bin/{crd-apiserver,etcd} ($(du -sh "$CACHE" | cut -f1); $(head -n1 "$CACHE/VERSIONS"))"
