#!/usr/bin/env bash
# make test: installs what is missing, builds and installs kwatch, builds (or
# reuses) the real Kubernetes control plane, then runs
#   1. pg_regress: the SQL surface, on a temp instance preloading kwatch;
#   2. pytest: the worker against the real control plane (test/integration).
# Test state lives in $KWATCH_TEST_DIR (default /var/tmp/kwatch-test): the
# servers run as the `postgres` user when we are root, and must be able to
# reach it, which a clone under /root would not allow.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
export KWATCH_TEST_DIR=${KWATCH_TEST_DIR:-/var/tmp/kwatch-test}
. test/lib.sh

step() { echo; echo "== $*"; }

step "dependencies, build and install"
build_and_install

step "Kubernetes control plane (built once, cached in ${KWATCH_K8S_CACHE:-/var/cache/kwatch-k8s})"
$SUDO bash test/k8s/build.sh

as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

step "pg_regress"
rdir="$KWATCH_TEST_DIR/regress"
rm -rf "$rdir"; mkdir -p "$rdir"
cp -r test "$rdir/"
chmod -R a+rX "$KWATCH_TEST_DIR"
[ "$(id -u)" -eq 0 ] && chown -R postgres: "$rdir"
pgxs=$(dirname "$(pg_config --pgxs)")
tests=$(make -s print-regress)
set +e
( cd "$rdir" && as_pg "$pgxs/../../src/test/regress/pg_regress" \
    --temp-instance="$rdir/tmp_check" --temp-config="$rdir/test/regress.conf" \
    --inputdir="$rdir/test" --outputdir="$rdir" --bindir="$(pg_config --bindir)" \
    --dbname=contrib_regression $tests )
rc=$?
set -e
if [ $rc -ne 0 ]; then
  [ -f "$rdir/regression.diffs" ] && cat "$rdir/regression.diffs"
  echo "pg_regress failed" >&2
  exit $rc
fi

step "integration tests against the real control plane"
/usr/bin/python3 -m pytest test/integration -v -p no:cacheprovider
