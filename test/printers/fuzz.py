#!/usr/bin/env python3
"""test/printers/fuzz.py: no printer function fails on a malformed object.

A row a user wrote by hand (or a future API field of another type) must not
make a query of a kubectl.<t> view fail, nor an expression index on a
printer function, which the worker maintains on every write.  For every
case object of cases.py, every value in it (each field, each array element,
recursively) is replaced in turn by each of a few values of the wrong kind
(text, a fraction, a huge number, an object, an array, a boolean, null),
and every printer function that takes the object is called on every such
object; any error fails the run with the function and the object.  Prints
how many objects and calls were checked.  Run by run.sh after check.py.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import CASES  # noqa: E402

PSQL = os.environ.get("PSQL", "psql")
WRONG = ["many", 1.5, 1e30, {}, {"a": 1}, [], True, None, -1, "2024-13-45T99:00:00Z",
         "2024-01-01T00:00:00+16:00", 2147483647, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]


def mutations(obj):
    """Every object made from obj by replacing one value (at any depth)."""
    def walk(node, path):
        yield path
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, path + [i])

    def replaced(node, path, value):
        if not path:
            return value
        copy = dict(node) if isinstance(node, dict) else list(node)
        copy[path[0]] = replaced(node[path[0]], path[1:], value)
        return copy

    for path in walk(obj, []):
        if not path:
            continue
        for value in WRONG:
            yield replaced(obj, path, value)


def psql(sql):
    return subprocess.run([PSQL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"],
                          input=sql, capture_output=True, text=True)


def main():
    r = psql("SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = 'kwatch'::regnamespace "
             "AND p.proargtypes[0] = 'jsonb'::regtype AND p.proname NOT LIKE '\\_%' "
             "AND p.proname NOT IN ('human_duration', 'translate_timestamp_since') ORDER BY 1;")
    if r.returncode != 0:
        sys.exit(r.stderr)
    calls = []
    for sig in r.stdout.splitlines():
        name, args = sig.split("(", 1)
        args = args.rstrip(")").split(",")
        extra = {"jsonb": "", "jsonb,timestamp with time zone": ", now()",
                 "jsonb,boolean": ", false"}.get(",".join(a.strip() for a in args))
        if extra is None:
            continue
        calls.append("%s(o%s)" % (name, extra))
    objects, seen = [], set()
    for case in CASES:
        for m in mutations(case["object"]):
            text = json.dumps(m, sort_keys=True)
            if text not in seen:
                seen.add(text)
                objects.append(text)
    lines = ["CREATE TEMP TABLE fuzz (n int, o jsonb);", "COPY fuzz FROM STDIN;"]
    for n, text in enumerate(objects):
        lines.append("%d\t%s" % (n, text.replace("\\", "\\\\")))
    lines.append("\\.")
    # one statement per function: an error names it; then the object
    for call in calls:
        lines.append("SELECT count(%s) >= 0 FROM fuzz;" % call)
    r = psql("\n".join(lines) + "\n")
    if r.returncode != 0:
        print("FAIL: a printer function raised an error on a malformed object:")
        print(r.stderr[-2000:])
        sys.exit(1)
    print("fuzz: %d malformed objects x %d functions = %d calls, no error"
          % (len(objects), len(calls), len(objects) * len(calls)))


if __name__ == "__main__":
    main()
