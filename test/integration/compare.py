"""Table against server: objects as kwatch must store and show them
(normalise, shown: Secrets redacted) and the object-by-object comparison of
rows with the server's objects, for mirror tables (mirror_diff,
assert_table_matches_server), the fake server (faults_support.fake_diff),
live tables (live_support.live_diff) and the convergence engine."""
import copy
import hashlib
import hmac
import json
import time

import psycopg2.extras
import pytest

import postgres
from cluster import kubectl_json
from postgres import sql, sql_one


def normalise(obj, api_version=None, kind=None):
    """`obj` as kwatch stores it: without metadata.managedFields.  A server
    object without apiVersion/kind (a LIST item: only the list carries them)
    gets the resource's, which every mirrored and live object must carry."""
    o = copy.deepcopy(obj)
    o.get("metadata", {}).pop("managedFields", None)
    if api_version is not None:
        o.setdefault("apiVersion", api_version)
    if kind is not None:
        o.setdefault("kind", kind)
    return o


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def redact_secret(obj):
    """A Secret as kwatch shows it without secret_data (src/decode/redact.c): each
    value of data and stringData, and the last-applied annotation, replaced
    by "<redacted hmac-sha256:HEX>" under the server's key file: the HMAC
    of the Secret's uid, the field, the key and the value, each but the
    value NUL-terminated (0.7.0: keyed per object and key, issue 30)."""
    key = (postgres.PG.dir / "data" / "kwatch_secret.key").read_bytes()
    uid = (obj.get("metadata") or {}).get("uid") or ""

    def digest(field, k, v):
        b = v.encode() if isinstance(v, str) else json.dumps(v, separators=(",", ":")).encode()
        msg = b"\0".join(x.encode() for x in (uid, field, k or "")) + b"\0" + b
        return "<redacted hmac-sha256:%s>" % hmac.new(key, msg, hashlib.sha256).hexdigest()[:32]
    o = copy.deepcopy(obj)
    for field in ("data", "stringData"):
        if isinstance(o.get(field), dict):
            o[field] = {k: digest(field, k, v) for k, v in o[field].items()}
    ann = o.get("metadata", {}).get("annotations")
    if isinstance(ann, dict) and LAST_APPLIED in ann:
        ann[LAST_APPLIED] = digest(LAST_APPLIED, None, ann[LAST_APPLIED])
    return o


def shown(obj, secret_data=False):
    """The server's `obj` as kwatch must show it: Secrets redacted unless
    the watch or live table opted in with secret_data."""
    if obj.get("kind") == "Secret" and not secret_data:
        return redact_secret(obj)
    return obj


def table_secret_data(table, cluster, conn=None):
    """Whether the watch of `cluster` into mirror `table` opted into secret_data
    (registrations read on conn, default the session's PostgreSQL)."""
    return bool(sql_one("SELECT bool_or(secret_data) FROM kwatch.registrations"
                        " WHERE server = %s AND format('k8s.%%I', table_name) = %s",
                        (cluster, table), conn))


def mirror_rows(table, cluster, conn=None):
    """{uid: row dict} of the mirror table's rows for one cluster, read on conn
    (default the session's PostgreSQL; a replica's connection for the
    scale-out tests)."""
    with (conn or postgres.PG.conn).cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        cur.execute("SELECT uid, resource_version, namespace, name, labels, object FROM %s"
                    " WHERE cluster = %%s" % table, (cluster,))
        return {r["uid"]: dict(r) for r in cur.fetchall()}


def row_problems(rows, want, api_version=None, kind=None, columns=True):
    """How rows ({uid: row with resource_version, namespace, name, labels,
    object}) differ from the objects of want ({uid: object as kwatch must
    store it}) one by one: uids, resourceVersions, columns (unless
    columns=False) and whole objects (normalise; a server object without
    apiVersion/kind gets api_version/kind).  A list, empty when equal."""
    problems = []
    for u in sorted(set(want) - set(rows)):
        m = want[u]["metadata"]
        problems.append("missing row: %s/%s uid %s rv %s"
                        % (m.get("namespace"), m["name"], u, m["resourceVersion"]))
    for u in sorted(set(rows) - set(want)):
        r = rows[u]
        problems.append("extra row: %s/%s uid %s rv %s"
                        % (r["namespace"], r["name"], u, r["resource_version"]))
    for u in sorted(set(want) & set(rows)):
        s, r = want[u], rows[u]
        m = s["metadata"]
        what = "%s/%s" % (m.get("namespace"), m["name"])
        if r["resource_version"] != m["resourceVersion"]:
            problems.append("%s: resource_version %s, server %s"
                            % (what, r["resource_version"], m["resourceVersion"]))
            continue  # not converged yet; the rest would differ too
        for col, v in (("namespace", m.get("namespace")), ("name", m["name"]),
                       ("labels", m.get("labels") or {})):
            if columns and r[col] != v:
                problems.append("%s: column %s = %r, server %r" % (what, col, r[col], v))
        so, ro = normalise(s, api_version, kind), normalise(r["object"])
        if so != ro:
            keys = sorted(k for k in set(so) | set(ro) if so.get(k) != ro.get(k))
            problems.append("%s: object differs in %s: row %s vs server %s"
                            % (what, keys, json.dumps({k: ro.get(k) for k in keys})[:800],
                               json.dumps({k: so.get(k) for k in keys}, default=repr)[:800]))
    return problems


def rows_diff(rows, want, api_version=None, kind=None):
    """None when rows equal want (row_problems); else a description."""
    problems = row_problems(rows, want, api_version, kind)
    return "; ".join(problems) if problems else None


def mirror_diff(table, cluster, kubectl_get_args, conn=None, secret_data=None):
    """None when the rows of `cluster` in `table` (read on conn, default the
    session's PostgreSQL) equal, object by object, what `kubectl get
    <kubectl_get_args> -o json` returns; else a description.  Secrets are
    redacted unless the watch opted into secret_data (its registration, read
    on conn, unless secret_data is given: a replica without the watch)."""
    items = kubectl_json("get", *kubectl_get_args)["items"]
    if secret_data is None:
        secret_data = table_secret_data(table, cluster, conn)
    return rows_diff(mirror_rows(table, cluster, conn),
                     {i["metadata"]["uid"]: shown(i, secret_data) for i in items})


def wait_same(diff, timeout, interval, failure):
    """Polls diff() until it returns None; then fails the test with
    failure(last difference) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        last = diff()
        if last is None:
            return
        if time.monotonic() >= deadline:
            pytest.fail(failure(last), pytrace=False)
        time.sleep(interval)


def assert_table_matches_server(table, cluster, kubectl_get_args, timeout=30, conn=None,
                                secret_data=None):
    """Waits (up to timeout s) until the mirror rows of `cluster` equal the
    server's objects (mirror_diff; rows read on conn, default the session's
    PostgreSQL), failing with the last difference."""
    wait_same(lambda: mirror_diff(table, cluster, kubectl_get_args, conn, secret_data),
              timeout, 0.2,
              lambda last: "%s (cluster %s) does not match `kubectl get %s` after %ss: %s"
              % (table, cluster, " ".join(kubectl_get_args), timeout, last))


def row_uids(table, cluster, conn=None):
    """The uids of `cluster`'s rows in `table` (read on conn, default the session's)."""
    return {r[0] for r in sql("SELECT uid FROM %s WHERE cluster = %%s" % table, (cluster,), conn)}
