#!/usr/bin/env python3
"""test/printers/check.py: run every case of cases.py against the kwatch
printer functions in the PostgreSQL that PGHOST/PGPORT name (run.sh starts
one), print a summary per kind and exit 1 on any mismatch.

A case is {"kind", "test", "object", "at"?, "expect": {call: value}}.  `call`
is a function name in schema kwatch, called as kwatch.<name>(object), or
"<name>(<extra SQL arguments>)", called as kwatch.<name>(object, <extra>);
"@at" in the extra arguments stands for the case's "at" timestamp (the
instant the upstream test's time.Now() is replaced by).  The value is
compared in SQL with IS NOT DISTINCT FROM after a cast to the function's
result type (None = SQL NULL), so a timestamptz compares as a time.
The upstream cells kubectl prints as "<none>" are kept as written in
cases.py and compared as SQL NULL: the printer functions return NULL for
that empty cell (sql/schema/printers/helpers.sql), and nothing else.
"""
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import CASES  # noqa: E402

PSQL = os.environ.get("PSQL", "psql")
FS, RS = "\x1f", "\x1e"


def lit(s):
    return "'" + s.replace("'", "''") + "'"


def psql(sql):
    r = subprocess.run([PSQL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                        "-F", FS, "-R", RS, "-P", "null=\\N"],
                       input=sql, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        sys.exit(2)
    return [row.split(FS) for row in r.stdout.split(RS) if row.strip("\n")]


def main():
    rettype = {name: t for name, t in psql(
        "SELECT proname, pg_get_function_result(oid) FROM pg_proc "
        "WHERE pronamespace = 'kwatch'::regnamespace;")}
    # Every function of the file is IMMUTABLE PARALLEL SAFE, commented, and
    # pins search_path (its body runs as whoever reads a view: issue 35's
    # review).
    bad = psql("SELECT p.oid::regprocedure, p.provolatile, p.proparallel, "
               "obj_description(p.oid, 'pg_proc') IS NOT NULL, "
               "COALESCE('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false) FROM pg_proc p "
               "WHERE p.pronamespace = 'kwatch'::regnamespace "
               "AND (p.provolatile <> 'i' OR p.proparallel <> 's' "
               "OR obj_description(p.oid, 'pg_proc') IS NULL "
               "OR NOT COALESCE('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false));")
    for fn, vol, par, commented, pinned in bad:
        print("FAIL %s: volatility %s, parallel %s, comment %s, search_path pinned %s"
              % (fn, vol, par, commented, pinned))
    checks = []
    stmts = ["SET TimeZone = 'UTC';"]
    for n, case in enumerate(CASES):
        if not case["expect"]:
            sys.exit("case %s asserts nothing" % case["test"])
        obj = lit(json.dumps(case["object"])) + "::jsonb"
        for call, want in case["expect"].items():
            name, _, extra = call.partition("(")
            if name not in rettype:
                sys.exit("case %s: no function kwatch.%s" % (case["test"], name))
            args = obj
            if extra:
                extra = extra[:-1].replace("@at", lit(case["at"]) + "::timestamptz")
                args += ", " + extra
            expr = "kwatch.%s(%s)" % (name, args)
            # kubectl's empty cell "<none>" is NULL in SQL
            want_sql = "NULL" if want is None or want == "<none>" else lit(str(want))
            stmts.append("SELECT %d, (%s) IS NOT DISTINCT FROM %s::%s, (%s)::text"
                         % (len(checks), expr, want_sql, rettype[name], expr))
            checks.append((case, call, want))
    rows = psql(stmts[0] + "\n" + "\nUNION ALL ".join(stmts[1:]) + "\nORDER BY 1;\n")
    if len(rows) != len(checks):
        sys.exit("expected %d result rows, got %d" % (len(checks), len(rows)))

    per_kind = collections.OrderedDict()
    failed = 0
    for (case, call, want), (idx, ok, got) in zip(checks, rows):
        k = per_kind.setdefault(case["kind"], {"cases": set(), "added": set(), "checks": 0, "failed": 0})
        (k["added"] if case["test"].startswith("kwatch:") else k["cases"]).add(case["test"])
        k["checks"] += 1
        if ok != "t":
            failed += 1
            k["failed"] += 1
            print("FAIL %s: %s = %r, want %r" % (case["test"], call,
                                               None if got == "\\N" else got, want))
    print("%-24s %8s %6s %7s %7s" % ("kind", "upstream", "added", "checks", "failed"))
    for kind, k in per_kind.items():
        print("%-24s %8d %6d %7d %7d" % (kind, len(k["cases"]), len(k["added"]), k["checks"], k["failed"]))
    upstream = sum(len(k["cases"]) for k in per_kind.values())
    added = sum(len(k["added"]) for k in per_kind.values())
    print("%d upstream cases + %d added, %d checks, %d passed, %d failed"
          % (upstream, added, len(checks), len(checks) - failed, failed))
    sys.exit(1 if failed or bad else 0)


if __name__ == "__main__":
    main()
