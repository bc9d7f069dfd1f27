"""kwatch.metrics() in Prometheus' text exposition format (issue 9): parsed
with the Prometheus client library's own parser (Debian's
python3-prometheus-client), its counters equal to kwatch.watches', label
values escaped; and doc/postgres_exporter.yaml's queries run as written."""
import os

import yaml
from prometheus_client.parser import text_string_to_metric_families

import conftest
from conftest import kubectl, sql, sql_one, wait_until, wait_watching, watch, watch_status


def families():
    text = sql_one("SELECT kwatch.metrics()")
    return {f.name: f for f in text_string_to_metric_families(text)}, text


def samples(fams, name, **labels):
    """{extra label values: value} of metric `name` restricted to **labels."""
    for fam in fams.values():
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                yield s


def test_metrics_parse_and_match_the_watches(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    kubectl("create", "configmap", "m0", "-n", ns, "--from-literal=a=b")
    watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
    kubectl("create", "configmap", "m1", "-n", ns, "--from-literal=a=b")
    wait_until(lambda: watch_status(srv, "configmaps")["added"] >= 3, 30, "three adds")
    sql("SELECT kwatch.relist('configmaps', server => %s, wait => true, timeout => '60s')", (srv,))
    # relist(wait) returns once the LIST committed; the WATCH after it then
    # counts a call: compare once the watch streams again
    st = wait_watching(srv, "configmaps")

    fams, text = families()
    mine = dict(server=srv, resource="configmaps", namespace=ns)
    # every family has HELP and TYPE; counters end in _total (and the
    # parser strips the suffix from the family name)
    for name, typ in (("kwatch_client_calls", "counter"), ("kwatch_relist_requests", "counter"),
                      ("kwatch_relists", "counter"), ("kwatch_events", "counter"),
                      ("kwatch_errors", "counter"), ("kwatch_alive_current", "gauge"),
                      ("kwatch_failing_current", "gauge"), ("kwatch_synced", "gauge"),
                      ("kwatch_objects", "gauge"), ("kwatch_sync_lag_seconds", "gauge"),
                      ("kwatch_event_ring_oldest_seq", "gauge")):
        assert name in fams and fams[name].type == typ and fams[name].documentation, (name, text)
    assert "# TYPE kwatch_events_total counter" in text

    def one(name, **extra):
        got = list(samples(fams, name, **mine, **extra))
        assert len(got) == 1, (name, extra, got)
        return got[0].value

    assert one("kwatch_client_calls_total", verb="list") == st["list_calls"]
    assert one("kwatch_client_calls_total", verb="watch") == st["watch_calls"]
    assert one("kwatch_relist_requests_total") == st["relist_requests"] == 1
    assert one("kwatch_relists_total") == st["relists"] >= 1
    assert one("kwatch_events_total", type="ADDED") == st["added"]
    assert one("kwatch_events_total", type="DELETED") == st["deleted"]
    assert one("kwatch_errors_total", source="http") == st["http_errors"]
    assert one("kwatch_alive_current") == 1 and one("kwatch_failing_current") == 0
    assert one("kwatch_synced") == 1
    assert one("kwatch_objects") == st["objects"] == 3
    assert 0 <= one("kwatch_sync_lag_seconds") < 120
    oldest = list(samples(fams, "kwatch_event_ring_oldest_seq"))[0].value
    assert oldest == sql_one("SELECT kwatch.events_oldest_seq()")


def test_label_values_are_escaped(ctx):
    """A server name with a quote, a backslash and a line feed (legal in
    PostgreSQL) comes back from the parser as written."""
    ns = ctx.namespace()
    srv = ctx.server(suffix=' "odd"\\x\nend')
    watch("configmaps", srv, namespace=ns)
    wait_watching(srv, "configmaps")
    fams, text = families()
    got = [s for s in samples(fams, "kwatch_objects") if s.labels.get("namespace") == ns]
    assert [s.labels["server"] for s in got] == [srv], text


def test_postgres_exporter_queries_run(ctx):
    ns = ctx.namespace()
    srv = ctx.server()
    watch("configmaps", srv, namespace=ns)
    sql("SELECT kwatch.wait_synced('configmaps', server => %s, timeout => '60s')", (srv,))
    path = os.path.join(os.path.dirname(__file__), "..", "..", "doc", "postgres_exporter.yaml")
    with open(path) as f:
        spec = yaml.safe_load(f)
    for qname, q in spec.items():
        conn = conftest.PG.connect()
        try:
            cur = conn.cursor()
            cur.execute(q["query"])
            cols = [d.name for d in cur.description]
            rows = cur.fetchall()
        finally:
            conn.close()
        declared = [list(m)[0] for m in q["metrics"]]
        assert declared == cols, (qname, declared, cols)
        assert rows, qname
        if qname == "kwatch_watch":
            row = [dict(zip(cols, r)) for r in rows if r[0] == srv][0]
            assert row["synced"] == 1 and row["alive"] == 1 and row["namespace"] == ns
            assert row["list_calls"] == watch_status(srv, "configmaps")["list_calls"]
