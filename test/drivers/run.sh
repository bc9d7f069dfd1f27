#!/usr/bin/env bash
# make test: installs what is missing, builds and installs kwatch, checks
# that a fresh install of the extension leaves the catalog an update from
# 0.1.0 does (test/sql_sources/compare_install.sh), the layout of src/
# (test/layout/check_layout.py) and the printer functions
# (test/printers/run.sh), then
#   1. the Debian package (test/packaging/package.sh): builds postgresql-15-kwatch from
#      the same sources, installs it with dpkg -i over what make install
#      wrote, and runs pg_regress (the SQL surface, on a temp instance
#      preloading kwatch) against the installed package;
#   2. builds (or reuses) the real Kubernetes control plane (1.20) and the
#      modern one (the 1.36 generic API server, custom resources only) and
#      runs pytest: the worker against them (test/integration);
#   3. `make test-versions` (test/versions/run.sh): the same sources built,
#      packaged and tested (pg_regress, the worker's integration tests)
#      against PostgreSQL 17 and 18 in Debian 13 and unstable chroots,
#      made once from Debian's archive and cached in /var/cache/kwatch-pg.
# Stops at the first failure, saying which step failed.
# Test state lives in $KWATCH_TEST_DIR (default /var/tmp/kwatch-test): the
# servers run as the `postgres` user when we are root, and must be able to
# reach it, which a clone under /root would not allow.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
export KWATCH_TEST_DIR=${KWATCH_TEST_DIR:-/var/tmp/kwatch-test}
. test/drivers/lib.sh

# Each step's wall time, printed at the end (and on a failure, up to the
# failing step): the budget per stage is in test/integration/README.md.
stage_names=() stage_secs=() stage_start=$SECONDS stage_name=
step() {
  [ -n "$stage_name" ] && { stage_names+=("$stage_name"); stage_secs+=($((SECONDS - stage_start))); }
  stage_name=$1 stage_start=$SECONDS
  echo; echo "== $*"
}
print_stages() {
  [ -n "$stage_name" ] && { stage_names+=("$stage_name"); stage_secs+=($((SECONDS - stage_start))); }
  stage_name=
  echo; echo "== time per stage (s)"
  for i in "${!stage_names[@]}"; do printf '%6d  %s\n' "${stage_secs[$i]}" "${stage_names[$i]%% (*}"; done
  printf '%6d  total\n' "$SECONDS"
}
trap print_stages EXIT

step "dependencies, build and install"
build_and_install

step "fresh install equals 0.1.0 updated to the current version: the catalogs diffed (test/sql_sources/compare_install.sh)"
bash test/sql_sources/compare_install.sh

step "layout of src/: include rules, header sizes, no cycle between files, one file changes a watch's state (test/layout/check_layout.py)"
python3 test/layout/check_layout.py

step "printer functions against the ported upstream printer tests (test/printers/run.sh)"
bash test/printers/run.sh

# The tests' servers run as postgres and must reach everything in it.
mkdir -p "$KWATCH_TEST_DIR"; chmod -R a+rX "$KWATCH_TEST_DIR"

step "Debian package: build, dpkg -i, pg_regress against the installed package"
bash test/packaging/package.sh || { echo "make test: the Debian package step failed (test/packaging/package.sh, above)" >&2; exit 1; }

step "Kubernetes control plane (built once, cached in ${KWATCH_K8S_CACHE:-/var/cache/kwatch-k8s})"
$SUDO bash test/k8s/build.sh

step "modern control plane: Kubernetes 1.36 generic API server + etcd 3.5 from Debian unstable (built once, cached in ${KWATCH_K8S_MODERN_CACHE:-/var/cache/kwatch-k8s-modern})"
$SUDO bash test/k8s/modern-build.sh || { echo "make test: the modern control plane step failed (test/k8s/modern-build.sh, above; exit 2: Debian's archive no longer has what it needs, and how to go on)" >&2; exit 1; }

step "integration tests against the real control planes (1.20 and 1.36)"
# PYTEST_ARGS: more pytest options, e.g. --random-order (python3-pytest-random-order,
# whose plugin needs the cache provider: hence a cache_dir, not -p no:cacheprovider)
/usr/bin/python3 -m pytest test/integration -v -o cache_dir="$KWATCH_TEST_DIR/pytest-cache" ${PYTEST_ARGS:-}

step "PostgreSQL 17 and 18: make test-versions (chroots cached in ${KWATCH_PG_CACHE:-/var/cache/kwatch-pg})"
$SUDO bash test/versions/run.sh || { echo "make test: the PostgreSQL versions step failed (test/versions/run.sh, above)" >&2; exit 1; }
