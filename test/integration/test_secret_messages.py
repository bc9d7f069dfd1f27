"""A refused write of a Secret never shows the Secret's values.

When a merge patch makes an object invalid, the API server's 422 quotes the
patched object (values included) in its message and in its causes; kwatch
copied that into the ERROR, its DETAIL, the server log and
kwatch.applies.message/detail.  The fault proxy, forwarding everything else
to the real API server, answers the writes of one Secret with such a 422 (as
the API server words it: apimachinery's field.Invalid quotes the value);
every path reports the reason and the causes' fields only: apply at once, at
commit (the request sender's stored outcome), a live table's UPDATE.
"""
import json

import psycopg2
import pytest
from psycopg2 import sql as pgsql

import conftest
from conftest import sql, sql_one
from fakeapi.proxy import FaultProxy

VALUE = "c3VwZXItc2VjcmV0LXZhbHVl"     # base64 of the Secret's value
PLAIN = "super-secret-value"


def invalid(name):
    """The 422 Status the API server sends for an invalid Secret, values quoted."""
    msg = ('Secret "%s" is invalid: data[token]: Invalid value: v1.Secret{Data:map[string][]byte{'
           '"token":[]byte("%s")}, StringData:map[string]string{"token":"%s"}}: a field is wrong'
           % (name, PLAIN, VALUE))
    return dict(code=422, reason="Invalid", message=msg,
                details={"name": name, "kind": "Secret",
                         "causes": [{"reason": "FieldValueInvalid", "field": "data[token]",
                                     "message": 'Invalid value: "%s": a field is wrong' % VALUE}]})


def secret(ns, name):
    return json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
                       "data": {"token": VALUE}})


def no_value(*texts):
    joined = "\n".join(t or "" for t in texts)
    assert VALUE not in joined and PLAIN not in joined, joined
    return joined


def test_a_refused_secret_write_shows_no_value(ctx):
    cl = conftest.CLUSTER
    px = FaultProxy.for_cluster(cl.server, cl.dir / "pki").start()
    log_start = conftest.PG.log_size()
    try:
        srv = ctx.base + "-px"
        s = pgsql.Identifier(srv)
        sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (api_server {}, certificate_authority {})")
            .format(s, pgsql.Literal(px.url), pgsql.Literal(cl.ca)))
        ctx.servers.append(srv)
        sql(pgsql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (token {})")
            .format(s, pgsql.Literal(cl.token)))
        ns = ctx.namespace()

        # at once: the dry run is refused
        f = px.inject("status", on="write", times=None, when=lambda r: "/secrets/" in r.path, **invalid("s1"))
        with pytest.raises(psycopg2.Error) as e:
            sql("SELECT kwatch.apply(%s::jsonb, server => %s, at => 'now')", (secret(ns, "s1"), srv))
        assert e.value.pgcode == "22023", e.value.pgerror
        text = no_value(e.value.pgerror, e.value.diag.message_detail)
        assert "Invalid" in e.value.diag.message_primary and "data[token]: FieldValueInvalid" in text, text

        # at commit: the dry run passes, the send is refused; the stored outcome
        f.when = lambda r: "/secrets/" in r.path and "dryRun" not in r.query
        aid = sql_one("SELECT (kwatch.apply(%s::jsonb, server => %s)).id", (secret(ns, "s2"), srv))
        with pytest.raises(psycopg2.Error) as e:
            sql("SELECT kwatch.wait_apply(%s, '1 min')", (aid,))
        assert e.value.pgcode == "22023", e.value.pgerror
        no_value(e.value.pgerror, e.value.diag.message_detail)
        row = sql("SELECT state, message, detail FROM kwatch.applies WHERE id = %s", (aid,))[0]
        assert row[0] == "failed", row
        no_value(row[1], row[2])

        # a live table's UPDATE of a Secret (the row read through the proxy)
        f.times = 0
        px.clear_faults()
        sql("SELECT kwatch.apply(%s::jsonb, server => %s, at => 'now')", (secret(ns, "s3"), srv))
        schema = ("kwsm_" + ctx.base.replace("-", "_"))[:60]
        sql(pgsql.SQL("CREATE SCHEMA {0}; CREATE FOREIGN TABLE {0}.secrets (namespace text, name text,"
                      " labels jsonb, object jsonb) SERVER {1} OPTIONS (resource 'secrets', namespace {2},"
                      " use_remote_estimate 'false')")
            .format(pgsql.Identifier(schema), s, pgsql.Literal(ns)))
        try:
            px.inject("status", on="write", times=None, when=lambda r: "/secrets/" in r.path, **invalid("s3"))
            with pytest.raises(psycopg2.Error) as e:
                sql("UPDATE %s.secrets SET labels = '{\"a\": \"b\"}' WHERE name = 's3'" % schema)
            assert e.value.pgcode == "22023", e.value.pgerror
            no_value(e.value.pgerror, e.value.diag.message_detail)
        finally:
            sql(pgsql.SQL("DROP SCHEMA {} CASCADE").format(pgsql.Identifier(schema)))

        # nor the server log (but the STATEMENT lines PostgreSQL logs with an
        # error: the caller's own SQL text, which holds the values it sent)
        no_value("\n".join(line for line in conftest.PG.log_since(log_start).splitlines()
                           if "STATEMENT:" not in line))
    finally:
        px.stop()
