#!/usr/bin/env bash
# test/versions/run.sh [VERSION...] -- `make test-versions`: kwatch built and
# tested against newer PostgreSQL majors (default: 17 18), each in a Debian
# chroot made from Debian's archive alone.
#
#   VERSION  Debian release   why that one
#   17       trixie (13)      the version Debian 13 ships
#   18       sid (unstable)   the newest major in Debian
#
# For each VERSION:
#   1. the chroot $KWATCH_PG_CACHE/<release> (default /var/cache/kwatch-pg,
#      outside the clone, like /var/cache/kwatch-k8s): made once with
#      debootstrap --variant=minbase from the archive this machine's apt uses
#      (/etc/apt/sources.list.d/*.sources), then postgresql-VERSION,
#      postgresql-server-dev-VERSION and the build and test dependencies
#      installed in it with its own apt-get.  Kept: a later run reuses it
#      (the stamp file .kwatch-ready lists the packages; a changed list makes
#      it again).  The first run of both takes a few minutes (README);
#   2. a copy of the work tree's files (as test/packaging/deb.sh takes them:
#      tracked and untracked-not-ignored, uncommitted changes included) in
#      the chroot's /build/kwatch -- the clone is never written to -- with
#      the host's etcd, etcdctl and kubectl copied into its /usr/local/bin
#      and /var/cache/kwatch-k8s (the 1.20 control plane's binaries)
#      bind-mounted read-only: the same control plane as on the host, on
#      loopback, which the chroot shares;
#   3. in the chroot (test/versions/inside.sh): build warning-free and
#      install into that PostgreSQL, build postgresql-VERSION-kwatch with
#      dpkg-buildpackage and install it over that, then pg_regress of every
#      suite (REGRESS, upgrade included) and the integration tests of
#      $KWATCH_VERSIONS_TESTS (default below), servers running as the
#      chroot's postgres user.
# Then prints, per version, the pg_regress result and the integration tests
# that ran.  A version whose chroot cannot be made (say, a release without
# that PostgreSQL) or whose tests fail is reported FAILED and the script
# exits 1 after trying the others: nothing is skipped silently.
#
# Needs root (debootstrap, chroot, mounts); installs debootstrap from the
# archive when missing (test/packaging/install-deps.sh).  Logs in
# $KWATCH_TEST_DIR/versions/<VERSION>.log (default /var/tmp/kwatch-test).
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
cache=${KWATCH_PG_CACHE:-/var/cache/kwatch-pg}
logdir=${KWATCH_TEST_DIR:-/var/tmp/kwatch-test}/versions
k8s_cache=${KWATCH_K8S_CACHE:-/var/cache/kwatch-k8s}
versions=("$@"); [ ${#versions[@]} -gt 0 ] || versions=(17 18)
# The worker end to end: initial sync and watch events against the real
# control plane (test_sync), relists after 410 and NOTIFY wake-ups
# (test_informer: client-go's informer contract), kwatch.events and its
# NOTIFY (test_events), live foreign tables with pushdown (test_live) and
# their writes (test_live_write: the FDW's write callbacks and the
# RTEPermissionInfo of 16+).
tests=${KWATCH_VERSIONS_TESTS:-test/integration/test_sync.py test/integration/test_informer.py test/integration/test_events.py test/integration/test_live.py test/integration/test_live_write.py}

[ "$(id -u)" -eq 0 ] || { echo "test-versions: needs root (debootstrap, chroot, mount)" >&2; exit 1; }

release_of() {
  case $1 in
    17) echo trixie ;;
    18) echo sid ;;
    *) echo "test-versions: no Debian release known for PostgreSQL $1 (17: trixie, 18: sid)" >&2; return 1 ;;
  esac
}

# What each chroot gets from its release's archive: the server and its
# headers, the build dependencies (debian/control's Build-Depends), and
# what the integration tests and test/k8s/cluster.sh run.
packages() {
  echo postgresql-$1 postgresql-server-dev-$1 libcurl4-openssl-dev libjson-c-dev libyaml-dev \
       pkg-config make gcc libc6-dev python3 python3-psycopg2 python3-pytest python3-prometheus-client \
       python3-yaml openssl curl ca-certificates procps build-essential debhelper dpkg-dev postgresql-server-dev-all
}

# The Debian archive this machine's apt uses (deb822 sources, else
# sources.list), as test/k8s/build.sh's sources would be
archive() {
  local uri
  uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v -- -security | head -1)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  echo "${uri:-http://deb.debian.org/debian}"
}

in_root() {  # in_root ROOT COMMAND...: COMMAND in ROOT, in a private mount namespace
  local root=$1; shift
  unshare --mount --propagation private bash "$top/test/versions/chroot.sh" "$root" "$@" {lock}>&-
}

# prepare VERSION: the chroot for VERSION: debootstrapped unless it was
# (the stamp .kwatch-base), its packages installed unless the stamp
# .kwatch-ready lists the same ones; prints progress, fails with a message
prepare() {
  local v=$1 rel root want start
  rel=$(release_of "$v") || return 1
  root="$cache/$rel"
  want="$(packages "$v")"
  if [ -f "$root/.kwatch-ready" ] && [ "$(cat "$root/.kwatch-ready")" = "$want" ]; then
    echo "[versions] $v: reusing the $rel chroot $root"
    return 0
  fi
  start=$SECONDS
  : >"$logdir/$v-setup.log"
  if [ ! -f "$root/.kwatch-base" ]; then
    echo "[versions] $v: debootstrap $rel into $root from $(archive) (once; log $logdir/$v-setup.log)"
    rm -rf "$root" "$root.new"; mkdir -p "$cache"
    debootstrap --variant=minbase "$rel" "$root.new" "$(archive)" >>"$logdir/$v-setup.log" 2>&1 ||
      { tail -n 20 "$logdir/$v-setup.log" >&2; echo "[versions] $v: debootstrap $rel failed" >&2; return 1; }
    # no daemons started by package scripts, no cluster made by postgresql-common
    printf '#!/bin/sh\nexit 101\n' >"$root.new/usr/sbin/policy-rc.d"; chmod 755 "$root.new/usr/sbin/policy-rc.d"
    # The archive may be a frozen copy (a snapshot): a Release file past its
    # Valid-Until is still the archive's own, signed, and used.
    echo 'Acquire::Check-Valid-Until "false";' >"$root.new/etc/apt/apt.conf.d/99kwatch-snapshot"
    mkdir -p "$root.new/etc/postgresql-common/createcluster.d"
    echo "create_main_cluster = false" >"$root.new/etc/postgresql-common/createcluster.d/kwatch.conf"
    touch "$root.new/.kwatch-base"
    mv "$root.new" "$root"
  fi
  echo "[versions] $v: apt-get install in $rel: $want"
  rm -f "$root/.kwatch-ready"
  in_root "$root" bash -c "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
      apt-get install -y -qq --no-install-recommends $want && apt-get clean" >>"$logdir/$v-setup.log" 2>&1 ||
    { tail -n 20 "$logdir/$v-setup.log" >&2
      echo "[versions] $v: installing the packages in $rel failed (is postgresql-$v in $rel?)" >&2; return 1; }
  echo "$want" >"$root/.kwatch-ready"
  echo "[versions] $v: $rel chroot made in $((SECONDS - start)) s"
}

# copy_tree ROOT: the work tree's files into ROOT/build/kwatch (replaced),
# the control plane's client and etcd into ROOT/usr/local/bin
copy_tree() {
  local root=$1 dst="$1/build/kwatch"
  rm -rf "$dst"; mkdir -p "$dst"
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$dst"
  chmod -R a+rX "$root/build"
  local b
  for b in etcd etcdctl kubectl; do
    command -v "$b" >/dev/null || { echo "[versions] no $b on this machine (the control plane needs it)" >&2; return 1; }
    cp -L "$(command -v "$b")" "$root/usr/local/bin/$b"
  done
  [ -x "$k8s_cache/bin/kube-apiserver" ] ||
    { echo "[versions] no control plane binaries in $k8s_cache (bash test/k8s/build.sh)" >&2; return 1; }
}

mkdir -p "$logdir" "$cache"
# One run at a time uses the chroots (each run rebuilds /build in them).
exec {lock}>"$cache/.lock"
if ! flock -n "$lock"; then
  echo "[versions] another make test-versions holds $cache/.lock; waiting for it"
  flock "$lock"
fi
bash test/packaging/install-deps.sh
command -v debootstrap >/dev/null || { echo "test-versions: debootstrap is missing" >&2; exit 1; }

declare -A result
failed=0
for v in "${versions[@]}"; do
  start=$SECONDS
  echo; echo "== PostgreSQL $v"
  if ! prepare "$v"; then
    result[$v]="FAILED: no test environment for PostgreSQL $v (see $logdir/$v-setup.log)"; failed=1; continue
  fi
  root="$cache/$(release_of "$v")"
  if ! copy_tree "$root"; then result[$v]="FAILED: copying the tree into $root"; failed=1; continue; fi
  rm -f "$root/build/summary"
  rc=0
  in_root "$root" bash /build/kwatch/test/versions/inside.sh "$v" /build/summary $tests 2>&1 |
    tee "$logdir/$v.log" || rc=$?
  if [ $rc -ne 0 ]; then result[$v]="FAILED"; failed=1; else result[$v]="ok"; fi
  result[$v]+=" in $((SECONDS - start)) s (log $logdir/$v.log)"
  result[$v]+=$'\n'$(sed 's/^/    /' "$root/build/summary" 2>/dev/null || echo "    no summary")
done

echo; echo "== make test-versions: results"
for v in "${versions[@]}"; do
  printf 'PostgreSQL %s (Debian %s): %s\n' "$v" "$(release_of "$v" 2>/dev/null || echo '?')" "${result[$v]}"
done
exit $failed
