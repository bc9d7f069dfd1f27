#!/bin/bash
# test/sql_sources/public_functions.sh DB: every function of extension
# kwatch that PUBLIC may execute (no ACL, or an ACL granting EXECUTE to
# PUBLIC) in database DB is named in doc/reference.md, as `kwatch.name(`,
# `name(` or `name` in backquotes: the API in its sections, the helpers the
# generated columns, the views and the history trigger call in "Helper
# functions PUBLIC may execute".  A function of kwatch's own use only has
# its EXECUTE revoked from PUBLIC instead (sql/schema/).  compare_install.sh
# runs it on its fresh install; psql's connection comes from the
# environment (PGHOST, PGPORT, PGUSER) and PGBIN.
# Exit 0 when every one is named; else lists the others and exits 1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
reference="$here/../../doc/reference.md"
bin=${PGBIN:-$(pg_config --bindir)}
db=${1:?usage: public_functions.sh DB}

names=$("$bin/psql" -X -At -v ON_ERROR_STOP=1 -d "$db" -c "
  SELECT DISTINCT p.proname
    FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
         AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'kwatch'
   WHERE p.proacl IS NULL
      OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(p.proacl) a
                  WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
   ORDER BY 1")
[ -n "$names" ] || { echo "public_functions: no function of kwatch found in $db" >&2; exit 2; }
missing=()
n=0
for name in $names; do
  n=$((n + 1))
  grep -qE "(kwatch\.|\`)${name}(\(|\`)" "$reference" || missing+=("$name")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "public_functions: PUBLIC may execute these functions of kwatch, which doc/reference.md does not name;" >&2
  echo "document each (\"Helper functions PUBLIC may execute\" for a helper) or REVOKE its EXECUTE from PUBLIC:" >&2
  printf '  kwatch.%s\n' "${missing[@]}" >&2
  exit 1
fi
echo "public_functions: the $n functions PUBLIC may execute are named in doc/reference.md"
