"""Helpers for the live foreign table tests (test_live.py).

live_diff() compares the rows of a query on a live table with what
`kubectl get ... -o json` returns, object by object (uid, resourceVersion,
namespace, name, labels and the whole object including apiVersion and
kind, managedFields aside) with compare.rows_diff, as mirror_diff does
for mirror tables.
"""
import json
import socket
import threading
import time

import psycopg2.extras
from psycopg2 import sql as pgsql

import postgres
from cluster import kubectl_json
from compare import rows_diff, shown
from postgres import sql


def live_rows(query, params=None):
    """{uid: row dict} of a query returning uid, resource_version, namespace, name, labels, object."""
    with postgres.PG.conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        cur.execute(query, params)
        rows = cur.fetchall()
    out = {}
    for r in rows:
        assert r["uid"] not in out, "uid %s returned twice" % r["uid"]
        out[r["uid"]] = dict(r)
    return out


def live_diff(rows, items, secret_data=False):
    """None when rows ({uid: row}) equal the server's items (a list of
    objects; Secrets redacted unless secret_data); else a description."""
    return rows_diff(rows, {i["metadata"]["uid"]: shown(i, secret_data) for i in items})


def assert_live_matches(table, where, params, kubectl_get_args, attempts=20, secret_data=False):
    """SELECT ... FROM table WHERE where equals `kubectl get <args> -o json`.
    Controllers may update an object between the two reads: a difference is
    re-checked a few times (0.3 s apart) before it fails."""
    q = "SELECT uid, resource_version, namespace, name, labels, object FROM %s" % table
    if where:
        q += " WHERE " + where
    for attempt in range(attempts):
        rows = live_rows(q, params)
        doc = kubectl_json("get", *kubectl_get_args)
        items = doc["items"] if "items" in doc else [doc]
        diff = live_diff(rows, items, secret_data)
        if diff is None:
            return rows
        time.sleep(0.3)
    raise AssertionError("%s WHERE %s vs kubectl get %s: %s" % (
        table, where, " ".join(kubectl_get_args), diff))


def explain(query, params=None, analyze=False):
    """EXPLAIN (FORMAT JSON) of query: the plan dict of the top node."""
    opts = "ANALYZE, " if analyze else ""
    return sql("EXPLAIN (%sFORMAT JSON) %s" % (opts, query), params)[0][0][0]["Plan"]


def foreign_scan(plan):
    """The first Foreign Scan node of a plan dict."""
    if plan.get("Node Type") == "Foreign Scan":
        return plan
    for p in plan.get("Plans", []):
        f = foreign_scan(p)
        if f:
            return f
    return None


def request_of(query, params=None):
    """The Kubernetes Request EXPLAIN shows for query's foreign scan."""
    return foreign_scan(explain(query, params))["Kubernetes Request"]


def import_schema(server, schema, clause=""):
    sql(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))
    sql(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(schema)))
    sql(pgsql.SQL("IMPORT FOREIGN SCHEMA k8s {} FROM SERVER {} INTO {}").format(
        pgsql.SQL(clause), pgsql.Identifier(server), pgsql.Identifier(schema)))


def foreign_tables(schema):
    """{table name: {option: value}} of the foreign tables in schema."""
    rows = sql("SELECT c.relname, t.ftoptions FROM pg_foreign_table t"
               " JOIN pg_class c ON c.oid = t.ftrelid"
               " WHERE c.relnamespace = %s::regnamespace", (schema,))
    return {name: dict(o.split("=", 1) for o in opts) for name, opts in rows}


class _Listener:
    """A TCP server on 127.0.0.1 whose thread hands every connection to
    self.serve(conn); close() closes them all."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def _run(self):
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted.append(c)
            self.serve(c)

    def serve(self, conn):
        pass

    def close(self):
        self._stop = True
        self.thread.join(timeout=5)
        for c in self.accepted:
            c.close()
        self.sock.close()


class StalledServer(_Listener):
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""


class FakeApiServer:
    """An HTTP server answering requests with scripted responses, in order:
    each is (status, headers dict, body bytes or str).  `requests` records
    the paths asked for.  For failure cases a real API server won't produce
    on demand (429 with Retry-After, 410 on a continue, malformed JSON)."""

    def __init__(self, responses):
        import http.server

        self.responses = list(responses)
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests.append(self.path)
                if outer.responses:
                    status, headers, body = outer.responses.pop(0)
                else:
                    status, headers, body = 500, {}, "no more scripted responses"
                if isinstance(body, str):
                    body = body.encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def pod_list(names, cont=None, rv="100"):
    """A PodList page as the API server writes it (PROTOCOL 6)."""
    meta = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": [
        {"metadata": {"name": n, "namespace": "ns", "uid": "uid-" + n, "resourceVersion": "9",
                      "labels": {"app": "web"},
                      "managedFields": [{"manager": "kubectl"}]},
         "spec": {}, "status": {"phase": "Pending"}} for n in names]})


class HalfPageServer(_Listener):
    """An HTTP server that answers each request with 200, a Content-Length
    far beyond what it sends, the first `prefix` bytes of `body`, and then
    nothing: a LIST page cut off in the middle, the connection left open."""

    def __init__(self, body, prefix):
        self.data = body.encode()[:prefix]
        super().__init__()

    def serve(self, c):
        c.settimeout(5)
        try:
            req = b""
            while b"\r\n\r\n" not in req:
                chunk = c.recv(4096)
                if not chunk:
                    break
                req += chunk
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % (len(self.data) + 1000000) + self.data)
        except OSError:
            pass
