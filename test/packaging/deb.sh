#!/usr/bin/env bash
# test/packaging/deb.sh [OUTDIR] -- what `make deb` runs (and test/packaging/package.sh).
#
# Builds the Debian packages postgresql-NN-kwatch (one per installed
# postgresql-server-dev-NN, NN >= 15: debian/rules) with
# `dpkg-buildpackage -us -uc -b` and puts the .deb files (the package and
# its -dbgsym), .buildinfo and .changes into OUTDIR (default: the parent of
# the tree, where dpkg-buildpackage itself would put them).  The build runs
# in a copy of the work tree's files -- tracked ones and untracked ones git
# does not ignore, uncommitted changes included, exactly what `make install`
# builds -- under a temporary /var/tmp/kwatch-deb-XXXXXX, removed afterwards,
# so the tree is never written to.  First checks that META.json,
# kwatch.control and debian/changelog name the same version.
#
# Needs git (to list the tree's files) and the build dependencies of
# debian/control (test/packaging/install-deps.sh installs them); no root.  Errors: a
# version mismatch, a tree that is not a git work tree, or a failed
# dpkg-buildpackage (its output is on stdout), each with a message on
# stderr and exit status 1.
set -euo pipefail
out=${1:-}
top=$(cd "$(dirname "$0")/../.." && pwd)
[ -n "$out" ] || out=$(dirname "$top")
out=$(realpath -m -- "$out")     # relative to where we were called from
cd "$top"

die() { echo "deb: $*" >&2; exit 1; }

# One version everywhere: the extension's, PGXN's and the package's.
control=$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" kwatch.control)
changelog=$(dpkg-parsechangelog -S Version)
changelog=${changelog#*:}        # no epoch
changelog=${changelog%-*}        # no Debian revision (a native package has none)
read -r meta meta_ext meta_file < <(/usr/bin/python3 -c '
import json
m = json.load(open("META.json"))
print(m["version"], m["provides"]["kwatch"]["version"], m["provides"]["kwatch"]["file"])') ||
  die "META.json is not valid JSON or lacks version / provides.kwatch"
[ -f "$meta_file" ] || die "META.json: provides.kwatch.file $meta_file does not exist"
for v in "$changelog" "$meta" "$meta_ext"; do
  [ "$v" = "$control" ] ||
    die "versions differ: kwatch.control default_version $control, debian/changelog $changelog, META.json version $meta, provides.kwatch.version $meta_ext"
done

git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
  die "$top is not a git work tree; run dpkg-buildpackage -us -uc -b in it instead"

tmp=$(mktemp -d /var/tmp/kwatch-deb-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
src="$tmp/kwatch-$control"
mkdir "$src"
# tracked files deleted in the work tree are left out, as make install would
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$src"

echo "[deb] dpkg-buildpackage -us -uc -b in $src"
( cd "$src" && dpkg-buildpackage -us -uc -b ) || die "dpkg-buildpackage failed (output above)"
mkdir -p "$out"
mv "$tmp"/*.deb "$tmp"/*.buildinfo "$tmp"/*.changes "$out"/
ls "$out"/postgresql-*-kwatch_"$control"_*.deb
