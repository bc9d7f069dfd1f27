"""Helpers of test_events.py: bulk ConfigMap changes, event reads, a polling
reader thread, the example client (examples/events_client.py), ring resizing."""
import json

import postgres
from cluster import json_documents, kubectl
from common import wait_until
from events_client import EventClient  # the README's example client (common puts examples/ on the path)
from postgres import Reader, sql, sql_one

COLUMNS = ("seq, at, cluster, resource, table_name, type, namespace, name, uid,"
           " resource_version, truncated")


def create_configmaps(ns, prefix, count, labels=None):
    """Creates `count` ConfigMaps prefix-0..N-1 in one `kubectl create` of a List;
    returns {name: (uid, resourceVersion)}."""
    items = [{"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "%s-%d" % (prefix, i), "namespace": ns,
                           "labels": dict(labels or {}, bulk=prefix)},
              "data": {"i": str(i)}} for i in range(count)]
    out = kubectl("create", "-f", "-", "-o", "json",
                  input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    objs = json_documents(out)
    return {o["metadata"]["name"]: (o["metadata"]["uid"], o["metadata"]["resourceVersion"])
            for o in objs}


def delete_collection(ns, selector):
    """Deletes the namespace's ConfigMaps matching `selector` with one
    deletecollection request (kubectl delete -l sends one DELETE per object)."""
    kubectl("delete", "--raw", "/api/v1/namespaces/%s/configmaps?labelSelector=%s"
            % (ns, selector.replace("=", "%3D")))


def events_after(seq, conn=None, **eq):
    """Rows of kwatch.events with seq > `seq` (and column = value for **eq) as dicts."""
    where = "".join(" AND %s = %%s" % k for k in eq)
    rows = sql("SELECT " + COLUMNS + " FROM kwatch.events WHERE seq > %s" + where +
               " ORDER BY seq", [seq, *eq.values()], conn)
    names = [c.strip() for c in COLUMNS.split(",")]
    return [dict(zip(names, r)) for r in rows]


def last_seq():
    """kwatch.events_last_seq(), waiting for the worker to restore it after a start."""
    return wait_until(lambda: sql_one("SELECT kwatch.events_last_seq()") is not None
                      and [sql_one("SELECT kwatch.events_last_seq()")], 30,
                      "the event stream to be available")[0]


def oldest_seq():
    return sql_one("SELECT kwatch.events_oldest_seq()")


def mirror_cache(table):
    """The mirror table as the example client caches it."""
    return {(c, u): (ns, n, rv) for c, u, ns, n, rv in
            sql("SELECT cluster, uid, namespace, name, resource_version FROM k8s.%s" % table)}


def new_client(table):
    return EventClient(" ".join("%s=%s" % kv for kv in postgres.PG.dsn().items()), table)


def well_formed(row):
    """Why a kwatch.events row is malformed, or None."""
    if row["type"] not in ("ADDED", "MODIFIED", "DELETED"):
        return "type %r" % row["type"]
    for k in ("cluster", "resource", "table_name", "name", "uid", "resource_version"):
        if not row[k]:
            return "empty " + k
    if len(row["uid"]) != 36 or not row["resource_version"].isdigit():
        return "uid/resource_version %r/%r" % (row["uid"], row["resource_version"])
    if row["truncated"] or row["at"] is None:
        return "truncated or no time"
    return None


class SeqReader(Reader):
    """Polls `SELECT ... WHERE seq > last ORDER BY seq` in its own connection
    (a server-side prepared statement when `prepared`: seq > $1 pushed down as
    a Param), checking that every batch continues at last + 1 with strictly
    increasing, consecutive, well-formed rows."""

    interval = 0.002
    final_read = True
    join_timeout = 30

    def __init__(self, start_after, prepared=False):
        super().__init__()
        self.last = start_after
        self.prepared = prepared
        self.rows = []
        self.problems = []
        self.reads = 0
        if prepared:
            sql("SET plan_cache_mode = force_generic_plan", conn=self.conn)
            sql("PREPARE since(bigint) AS SELECT " + COLUMNS +
                " FROM kwatch.events WHERE seq > $1 ORDER BY seq", conn=self.conn)

    def read_once(self):
        if self.prepared:
            got = sql("EXECUTE since(%s)", (self.last,), self.conn)
            names = [c.strip() for c in COLUMNS.split(",")]
            got = [dict(zip(names, r)) for r in got]
        else:
            got = events_after(self.last, self.conn)
        self.reads += 1
        for r in got:
            if r["seq"] != self.last + 1:
                self.problems.append("seq %d after %d" % (r["seq"], self.last))
            why = well_formed(r)
            if why:
                self.problems.append("seq %d: %s" % (r["seq"], why))
            self.last = r["seq"]
            self.rows.append(r)

    def finish(self):
        super().finish()
        return self.rows


def set_ring_size(slots):
    """Sets kwatch.event_buffer (postmaster) and restarts PostgreSQL; None resets it."""
    if slots is None:
        sql("ALTER SYSTEM RESET kwatch.event_buffer")
    else:
        sql("ALTER SYSTEM SET kwatch.event_buffer = %s", (str(slots),))
    postgres.PG.restart()
    last_seq()
