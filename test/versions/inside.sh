#!/usr/bin/env bash
# test/versions/inside.sh VERSION SUMMARY TEST...: the part of
# test/versions/run.sh that runs inside a version's chroot, as root, from
# the copy of the tree in /build/kwatch:
#   1. builds kwatch warning-free (-Werror, the Makefile's PG_CFLAGS)
#      against /usr/lib/postgresql/VERSION's server headers and installs it
#      into that PostgreSQL;
#   2. runs pg_regress, every suite of the Makefile's REGRESS (the upgrade
#      path included), as test/packaging/package.sh does on the host
#      (run_regress in test/drivers/lib.sh, the server as `postgres`);
#   3. runs pytest on the TEST files or node ids (test/integration), which
#      start the 1.20 control plane (test/k8s/cluster.sh, binaries in
#      /var/cache/kwatch-k8s) and a PostgreSQL VERSION of their own.
# Writes one line per step to SUMMARY ("pg_regress: ...", "integration:
# ..."), and exits non-zero at the first failure.
set -euo pipefail
v=${1:?usage: inside.sh VERSION SUMMARY TEST...}; summary=${2:?summary file}; shift 2
cd /build/kwatch
bindir=/usr/lib/postgresql/$v/bin
[ -x "$bindir/pg_config" ] || { echo "inside: no $bindir/pg_config (postgresql-server-dev-$v)" >&2; exit 1; }
export PATH=$bindir:$PATH PG_CONFIG=$bindir/pg_config
export KWATCH_TEST_DIR=/var/tmp/kwatch-test
. test/drivers/lib.sh
: >"$summary"
note() { echo "$*" >>"$summary"; echo "[inside] $*"; }

echo "[inside] $(pg_config --version) on $(. /etc/os-release; echo "$PRETTY_NAME")"
make -s -j2 PG_CONFIG="$PG_CONFIG" >build.log 2>&1 || { cat build.log; note "build: FAILED"; exit 1; }
if [ -s build.log ]; then cat build.log; fi
make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
note "build: warning-free (-Werror) against $(pg_config --version)"

mkdir -p "$KWATCH_TEST_DIR"; chmod a+rx "$KWATCH_TEST_DIR"

# The Debian package of this version (debian/rules: one per installed
# server-dev), built by dpkg-buildpackage in a copy, installed over what
# make install wrote: the tests below run against the package's files.
deb=$KWATCH_TEST_DIR/deb
rm -rf "$deb"; mkdir -p "$deb/src"; cp -a . "$deb/src/kwatch"
if ! (cd "$deb/src/kwatch" && make -s clean && dpkg-buildpackage -us -uc -b) >"$deb/build.log" 2>&1; then
  tail -n 40 "$deb/build.log"; note "package: dpkg-buildpackage FAILED"; exit 1
fi
pkgs=$(cd "$deb/src" && ls postgresql-*-kwatch_*.deb | grep -v dbgsym)
ls "$deb/src"/postgresql-$v-kwatch_*.deb >/dev/null 2>&1 ||
  { note "package: no postgresql-$v-kwatch among: $pkgs FAILED"; exit 1; }
dpkg -i "$deb/src"/postgresql-$v-kwatch_*.deb >/dev/null || { note "package: dpkg -i FAILED"; exit 1; }
note "package: dpkg-buildpackage built $(echo $pkgs), installed with dpkg -i"
rc=0
run_regress "$KWATCH_TEST_DIR/regress" 2>&1 | tee "$KWATCH_TEST_DIR/regress.out" || rc=$?
line=$(grep -E 'tests? (passed|failed)|All [0-9]+ tests' "$KWATCH_TEST_DIR/regress.out" | tail -1 | tr -s ' ')
note "pg_regress ($(make -s print-regress)): ${line:-no result line} $([ $rc -eq 0 ] || echo FAILED)"
[ $rc -eq 0 ] || exit 1

[ $# -gt 0 ] || exit 0
rc=0
python3 -m pytest "$@" -v -p no:cacheprovider 2>&1 | tee "$KWATCH_TEST_DIR/pytest.out" || rc=$?
passed=$(grep -cE ' PASSED( |$)' "$KWATCH_TEST_DIR/pytest.out" || true)
result=$(grep -E '^=+ .*(passed|failed|error).* =+$' "$KWATCH_TEST_DIR/pytest.out" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')
note "integration ($*): ${result:-no pytest summary} $([ $rc -eq 0 ] || echo FAILED)"
note "integration tests passed: $(grep -E ' PASSED( |$)' "$KWATCH_TEST_DIR/pytest.out" | sed -E 's/^test\/integration\///; s/ PASSED.*//' | tr '\n' ' ')"
exit $rc
