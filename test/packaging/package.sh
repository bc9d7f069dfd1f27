#!/usr/bin/env bash
# test/packaging/package.sh -- the Debian package test; `make test` runs it right
# after building and installing kwatch, before the integration tests.
#
#   1. builds postgresql-<major>-kwatch (pg_config's major) with
#      test/packaging/deb.sh from the work tree's files (what `make install`
#      just built, uncommitted changes included)
#      into $KWATCH_TEST_DIR/deb, the build's output in build.log there;
#   2. installs it with dpkg -i: it replaces the files `make install` wrote
#      with ones built from the same sources;
#   3. checks that dpkg -L lists kwatch.so, kwatch.control and every
#      extension script (`make print-scripts`: the released
#      sql/kwatch--*.sql and those sql/build.sh generates), and that
#      dpkg -V finds the installed files to be the package's;
#   4. runs the pg_regress suites against the installed package
#      (run_regress in test/drivers/lib.sh), in $KWATCH_TEST_DIR/regress.
#
# Installs what is missing first (test/packaging/install-deps.sh).  Needs root (or
# sudo) for apt-get and dpkg -i.  Test state lives in $KWATCH_TEST_DIR
# (default /var/tmp/kwatch-test), which the postgres user must be able to
# reach.  Never removes the package.  The first failure stops it with
# "package: <what failed>" on stderr and status 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
export KWATCH_TEST_DIR=${KWATCH_TEST_DIR:-/var/tmp/kwatch-test}
. test/drivers/lib.sh

die() { echo "package: $*" >&2; exit 1; }

bash test/packaging/install-deps.sh
mkdir -p "$KWATCH_TEST_DIR"; chmod a+rx "$KWATCH_TEST_DIR"

major=$(pg_config --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
pkg=postgresql-$major-kwatch
out="$KWATCH_TEST_DIR/deb"
rm -rf "$out"; mkdir -p "$out"

echo "[package] building $pkg (log: $out/build.log)"
start=$SECONDS
if ! bash test/packaging/deb.sh "$out" >"$out/build.log" 2>&1; then
  echo "--- last lines of $out/build.log:" >&2
  tail -n 40 "$out/build.log" >&2
  die "building the Debian package failed"
fi
deb=$(ls "$out/${pkg}"_*.deb 2>/dev/null) ||
  die "the build made no $pkg (debian/pgversions has no PostgreSQL $major?): $(ls "$out")"
echo "[package] built $(basename "$deb") in $((SECONDS - start)) s"

$SUDO dpkg -i "$deb" || die "dpkg -i $deb failed"

listed=$(dpkg -L "$pkg") || die "dpkg -L $pkg failed"
expect=("$(pg_config --pkglibdir)/kwatch.so" "$(pg_config --sharedir)/extension/kwatch.control")
# the released scripts and the generated ones (the Makefile's DATA, DATA_built)
for f in $(make -s print-scripts); do expect+=("$(pg_config --sharedir)/extension/$f"); done
for f in "${expect[@]}"; do
  grep -qxF "$f" <<<"$listed" || die "dpkg -L $pkg does not list $f"
done
changed=$(dpkg -V "$pkg") || true
[ -z "$changed" ] || die "installed files differ from the package's (dpkg -V $pkg): $changed"
echo "[package] $pkg installed: dpkg -L lists ${#expect[@]} expected files, dpkg -V clean"

echo "[package] pg_regress against the installed package"
run_regress "$KWATCH_TEST_DIR/regress" || die "pg_regress against the installed $pkg failed"
