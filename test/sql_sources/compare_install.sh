#!/bin/bash
# test/sql_sources/compare_install.sh: a fresh install of kwatch's current
# version (sql/kwatch--<version>.sql, built from sql/schema/) must leave the
# same catalog as installing 0.1.0 and updating through every update script
# to that version (the released ones, then the generated
# sql/kwatch--0.7.0--0.8.0.sql ...).  make test runs it right after
# building and installing kwatch (test/drivers/run.sh); it tests the
# installed scripts and library.
#
# Starts a throwaway PostgreSQL in a fresh directory under /tmp (as the
# postgres user when run as root), unix socket in that directory only,
# preloading kwatch with its worker pointed at a database that does not
# exist (it only logs that, once a minute); creates two databases, runs
# CREATE EXTENSION kwatch in one and CREATE EXTENSION kwatch VERSION
# '0.1.0' + ALTER EXTENSION kwatch UPDATE in the other, writes the catalog
# description of each (test/sql_sources/catalog.sql: functions with their
# bodies and privileges, relations, columns in attnum order without
# dropped ones, indexes, constraints, triggers, views, types, casts,
# wrappers, servers, comments, the extension's members, configuration
# tables and initial privileges) and diffs them.  Then, in both, leaves
# mirror tables behind with DROP EXTENSION and installs again the same
# way: both must take back the same tables (sql/schema/reinstall.sql).
# On the fresh install, public_functions.sh checks that every function
# PUBLIC may execute is named in doc/reference.md.
# Exit 0 when all is equal; else the diff (updated -> fresh) on stdout and
# exit 1; exit 2 when the instance or an install fails.  Removes the
# instance.
#
# Environment: PGBIN (default: pg_config --bindir), COMPARE_PGPORT (5497;
# the socket is in the instance's own directory, so any number works),
# KWATCH_COMPARE_KEEP=DIR to keep both descriptions in DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${PGBIN:-$(pg_config --bindir)}
port=${COMPARE_PGPORT:-5497}

dir=$(mktemp -d /tmp/kwatch-compare.XXXXXX)
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
cleanup() {
  as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

# one line: pg_ctl hands -o to a shell
preload="-c shared_preload_libraries=kwatch -c kwatch.database=kwatch_compare_no_worker"
as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log"; exit 2; }
as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
  -o "-p $port -k $dir -c listen_addresses= -c fsync=off -c max_connections=10 -c shared_buffers=16MB $preload" \
  start >/dev/null \
  || { cat "$dir/server.log"; exit 2; }

export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
psql() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
psql -c 'CREATE DATABASE fresh' -c 'CREATE DATABASE updated'
version=$(psql -At -c "SELECT default_version FROM pg_available_extensions WHERE name = 'kwatch'")
[ -n "$version" ] || { echo "compare_install: kwatch is not installed ($bin)" >&2; exit 2; }

psql -d fresh -c 'CREATE EXTENSION kwatch' >"$dir/fresh.log" 2>&1 \
  || { echo "compare_install: CREATE EXTENSION kwatch ($version) failed:" >&2; cat "$dir/fresh.log" >&2; exit 2; }
psql -d updated -c "CREATE EXTENSION kwatch VERSION '0.1.0'" -c 'ALTER EXTENSION kwatch UPDATE' \
  >"$dir/updated.log" 2>&1 \
  || { echo "compare_install: installing 0.1.0 and updating to $version failed:" >&2; cat "$dir/updated.log" >&2; exit 2; }

for db in fresh updated; do
  psql -d "$db" -f "$here/catalog.sql" >"$dir/$db.txt"
done
if [ -n "${KWATCH_COMPARE_KEEP:-}" ]; then
  mkdir -p "$KWATCH_COMPARE_KEEP"; cp "$dir/fresh.txt" "$dir/updated.txt" "$KWATCH_COMPARE_KEEP/"
fi
n=$(wc -l <"$dir/fresh.txt")
if ! diff -u --label "0.1.0 updated to $version" --label "fresh $version" "$dir/updated.txt" "$dir/fresh.txt"; then
  echo "compare_install: the catalog after CREATE EXTENSION kwatch ($version) differs from 0.1.0 updated to $version (diff above)" >&2
  exit 1
fi
echo "compare_install: a fresh $version and 0.1.0 updated to $version have the same catalog ($n lines)"
# every function PUBLIC may execute is documented (public_functions.sh)
bash "$here/public_functions.sh" fresh || exit 1

# CREATE EXTENSION after DROP EXTENSION: the mirror tables are left behind
# (the user's data), and both ways of installing take back the same ones
# (sql/schema/reinstall.sql; the update scripts did it as they ran): a
# superuser's, with its labels index rebuilt with jsonb_path_ops when it
# was jsonb_ops, not a tenant's
leftovers="SELECT kwatch.create_mirror_table('pods', '', 'v1', 'pods');
  SELECT kwatch.create_mirror_table('crontabs', 'stable.example.com', 'v1', 'crontabs');
  SELECT kwatch.create_mirror_table('configmaps', '', 'v1', 'configmaps');
  ALTER TABLE k8s.configmaps OWNER TO kw_compare_tenant;
  DROP INDEX k8s.pods_labels_idx;
  CREATE INDEX pods_labels_idx ON k8s.pods USING gin (labels);
  DROP EXTENSION kwatch CASCADE;"
taken="SELECT format('taken back: %s %s %s %s', relid, relname, api_group, plural) FROM kwatch.tables
  UNION ALL SELECT format('index: %s', pg_get_indexdef(i.indexrelid)) FROM pg_index i
   WHERE i.indrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'k8s'::regnamespace)
  UNION ALL SELECT format('member: %s', pg_describe_object(classid, objid, objsubid)) FROM pg_depend
   WHERE deptype = 'e' AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'kwatch')
  ORDER BY 1"
psql -c 'CREATE ROLE kw_compare_tenant'
psql -d fresh -c "$leftovers" -c 'CREATE EXTENSION kwatch' >>"$dir/fresh.log" 2>&1 \
  || { echo "compare_install: CREATE EXTENSION after DROP EXTENSION failed:" >&2; cat "$dir/fresh.log" >&2; exit 2; }
psql -d updated -c "$leftovers" -c "CREATE EXTENSION kwatch VERSION '0.1.0'" -c 'ALTER EXTENSION kwatch UPDATE' \
  >>"$dir/updated.log" 2>&1 \
  || { echo "compare_install: 0.1.0 + updates after DROP EXTENSION failed:" >&2; cat "$dir/updated.log" >&2; exit 2; }
for db in fresh updated; do
  psql -d "$db" -At -c "$taken" >"$dir/$db-again.txt"
done
grep -q '^taken back: k8s.pods ' "$dir/fresh-again.txt" \
  || { echo "compare_install: CREATE EXTENSION did not take back k8s.pods:" >&2; cat "$dir/fresh-again.txt" >&2; exit 1; }
if ! diff -u --label "0.1.0 updated to $version, again" --label "fresh $version, again" \
     "$dir/updated-again.txt" "$dir/fresh-again.txt"; then
  echo "compare_install: after DROP EXTENSION, CREATE EXTENSION kwatch ($version) takes back other tables than 0.1.0 updated to $version (diff above)" >&2
  exit 1
fi
echo "compare_install: after DROP EXTENSION both take back the same mirror tables ($(grep -c '^taken back' "$dir/fresh-again.txt"))"
