"""PostgreSQL instances of a test's own, for the scale-out tests (README
"Scaling out"): kwatch databases (preloaded, CREATE EXTENSION kwatch,
optionally wal_level = logical), hot standbys made with pg_basebackup and
promoted, and the steps a user takes for logical replication: the mirror
tables' DDL copied with pg_dump, publications, subscriptions, and waiting
for them.  The fixture `instances` starts them under
$KWATCH_TEST_DIR/replicas/<name> and stops them after the test."""
import functools
import shutil

import pytest
from psycopg2 import sql as pgsql

import cluster
from common import KEEP, TEST_DIR, free_port, run, wait_until
from postgres import PG_SH, Postgres, sql, sql_one

REPLICAS_DIR = TEST_DIR / "replicas"


@functools.lru_cache(maxsize=None)
def bindir():
    """PostgreSQL's bin directory (pg_dump, psql), as pg.sh finds it."""
    return run(["pg_config", "--bindir"]).stdout.strip()


class Standby(Postgres):
    """A hot standby of the running `primary` (a Postgres): pg.sh standby
    takes a pg_basebackup -R of it and starts it on its own port and socket
    directory, streaming from the primary's socket."""

    def __init__(self, directory, port, primary):
        super().__init__(directory, port, db=primary.db)
        self.primary = primary

    def start(self):
        """pg_basebackup (the first time), then start as a hot standby."""
        run(["bash", PG_SH, "standby", self.dir, self.port, self.primary.dir, self.primary.port])

    def promote(self):
        """pg_ctl promote: returns once the standby accepts writes."""
        run(["bash", PG_SH, "promote", self.dir])


class Instances:
    """The PostgreSQL instances one test starts, each in a fresh
    REPLICAS_DIR/<name>; stop() stops them all (and removes their
    directories unless KWATCH_KEEP=1)."""

    def __init__(self):
        self.started = []

    def _fresh(self, name):
        """The directory of instance `name`, emptied (a server left running
        there by an interrupted run is stopped first)."""
        d = REPLICAS_DIR / name
        if (d / "data" / "postmaster.pid").exists():
            run(["bash", PG_SH, "stop", d], check=False)
        shutil.rmtree(d, ignore_errors=True)
        REPLICAS_DIR.mkdir(parents=True, exist_ok=True)
        return d

    def plain(self, name, *conf):
        """A started PostgreSQL (pg.sh's configuration plus the lines `conf`),
        nothing done in it.  Its database is initdb's `postgres`, which
        kwatch.database names: the worker finds it at its first start (a
        database pg.sh creates after the start costs the worker's 5 s restart)."""
        pg = Postgres(self._fresh(name), free_port(), conf, db="postgres")
        self.started.append(pg)
        pg.start()
        return pg

    def kwatch_db(self, name, *conf):
        """plain(name, *conf) with CREATE EXTENSION kwatch done and its worker
        running (pg.sh preloads kwatch)."""
        pg = self.plain(name, *conf)
        sql("CREATE EXTENSION kwatch", conn=pg.conn)
        wait_worker(pg)
        return pg

    def standby(self, name, primary):
        """A hot standby of `primary`, started and streaming."""
        sb = Standby(self._fresh(name), free_port(), primary)
        self.started.append(sb)
        sb.start()
        return sb

    def logs(self):
        """The last lines of every instance's log, for a failing test's output."""
        return "\n".join("--- %s\n%s" % (pg.log_path, pg.log_since()[-3000:]) for pg in self.started)

    def stop(self):
        """Stops every instance started (never raising: a test's own failure
        must show), then removes their directories unless KWATCH_KEEP=1."""
        for pg in self.started:
            pg.close()
            run(["bash", PG_SH, "stop", pg.dir], check=False)
        if not KEEP:
            for pg in self.started:
                shutil.rmtree(pg.dir, ignore_errors=True)


@pytest.fixture
def instances():
    """An Instances for the test: its servers are stopped afterwards; their
    logs are printed (shown when the test fails)."""
    inst = Instances()
    try:
        yield inst
    finally:
        print(inst.logs())
        inst.stop()


def wait_worker(pg, timeout=30):
    """Waits until kwatch's worker runs on `pg`; returns its pid."""
    return wait_until(lambda: sql_one("SELECT kwatch.worker_pid()", conn=pg.conn), timeout,
                      "the kwatch worker on %s" % pg.dir)


def create_server(pg, name):
    """CREATE SERVER `name` (the `cluster` column of its rows) for the test
    cluster in `pg`; returns name."""
    sql(pgsql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig {})")
        .format(pgsql.Identifier(name), pgsql.Literal(cluster.CLUSTER.kubeconfig)), conn=pg.conn)
    return name


def copy_mirror_ddl(source, target, *tables):
    """What README "Scaling out" tells a user to do on a subscriber: the
    definitions of `source`'s mirror tables (`pg_dump --schema-only`, the
    whole schema k8s, or only `tables`: "k8s.services") run in `target`,
    stopping at the first error.  Gives the subscriber the same generated
    columns, primary keys and indexes."""
    which = ["--table=%s" % t for t in tables] if tables else ["--schema=k8s"]
    dump = run(["%s/pg_dump" % bindir(), "--schema-only", "--no-owner", "--no-privileges",
                "-h", source.dir, "-p", source.port, "-U", "postgres", *which, source.db]).stdout
    run(["%s/psql" % bindir(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", target.dir, "-p", target.port,
         "-U", "postgres", "-d", target.db], input=dump)


def publish(pg, name, tables):
    """CREATE PUBLICATION `name` FOR TABLE `tables` ("k8s.pods", ...) in `pg`."""
    sql(pgsql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
        pgsql.Identifier(name), pgsql.SQL(", ").join(pgsql.SQL(t) for t in tables)), conn=pg.conn)


def subscribe(sub, name, pub, publication):
    """CREATE SUBSCRIPTION `name` in `sub` to `publication` of `pub` (through
    its socket directory), copying the rows the tables hold now."""
    conninfo = "host=%s port=%s dbname=%s user=postgres" % (pub.dir, pub.port, pub.db)
    sql(pgsql.SQL("CREATE SUBSCRIPTION {} CONNECTION {} PUBLICATION {}").format(
        pgsql.Identifier(name), pgsql.Literal(conninfo), pgsql.Identifier(publication)), conn=sub.conn)


def wait_subscription_ready(sub, name, timeout=60):
    """Waits until every table of subscription `name` in `sub` has finished
    its initial copy (pg_subscription_rel state 'r', ready)."""
    def states():
        rows = sql("SELECT r.srrelid::regclass::text, r.srsubstate FROM pg_subscription_rel r"
                   " JOIN pg_subscription s ON s.oid = r.srsubid WHERE s.subname = %s", (name,),
                   conn=sub.conn)
        return rows if rows and all(s == "r" for _, s in rows) else False
    return wait_until(states, timeout, "subscription %s to be ready" % name)


def wait_replayed(primary, standby, timeout=30):
    """Waits until `standby` has replayed the WAL `primary` has written so far."""
    lsn = sql_one("SELECT pg_current_wal_lsn()", conn=primary.conn)
    wait_until(lambda: sql_one("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,),
                               conn=standby.conn), timeout,
               "the standby to replay up to %s" % lsn)


def replica_identities(pg, schema="k8s"):
    """{table: how its UPDATEs and DELETEs are identified to logical
    replication} for every table of `schema` in `pg`: "primary key (cols)",
    "index (cols)", "full" or "nothing" (a missing primary key shows as
    "nothing": PostgreSQL would then refuse UPDATE and DELETE on a
    published table)."""
    rows = sql("""
        SELECT c.oid::regclass::text,
               CASE c.relreplident
                 WHEN 'f' THEN 'full'
                 WHEN 'n' THEN 'nothing'
                 ELSE COALESCE((SELECT CASE WHEN i.indisprimary THEN 'primary key ' ELSE 'index ' END
                                       || '(' || string_agg(a.attname, ', ' ORDER BY k.n) || ')'
                                FROM pg_index i
                                CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, n)
                                JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                                WHERE i.indrelid = c.oid
                                  AND (CASE c.relreplident WHEN 'i' THEN i.indisreplident
                                            ELSE i.indisprimary END)
                                GROUP BY i.indisprimary), 'nothing')
               END
        FROM pg_class c
        WHERE c.relnamespace = %s::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
        ORDER BY 1""", (schema,), conn=pg.conn)
    return dict(rows)


def column_definitions(pg, table):
    """[(column, type, generation expression or None)] of `table` in `pg`, in
    column order: what a subscriber's copy of a mirror table must repeat."""
    return sql("""
        SELECT a.attname, format_type(a.atttypid, a.atttypmod),
               CASE WHEN a.attgenerated <> '' THEN pg_get_expr(d.adbin, d.adrelid) END
        FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY a.attnum""", (table,), conn=pg.conn)


def all_columns(pg, table, cluster_name):
    """Every column of `cluster_name`'s rows of `table` in `pg` (generated
    ones too), ordered by uid: what a subscriber's rows must equal."""
    return sql(pgsql.SQL("SELECT * FROM {} WHERE cluster = %s ORDER BY uid").format(pgsql.SQL(table)),
               (cluster_name,), conn=pg.conn)


def partition_by_cluster(pg, table, clusters):
    """README "Scaling out": turns the (empty) mirror table `table` ("pods") of
    a fleet database into a table partitioned by LIST (cluster), with one
    partition k8s_part.<table>_<n> per name in `clusters` and a DEFAULT
    partition for the rest; columns, generated columns, primary key and
    indexes as before (LIKE ... INCLUDING ALL).  Run before subscribing."""
    q = [pgsql.SQL("CREATE SCHEMA IF NOT EXISTS k8s_part"),
         # the view kubectl.<table> the dump brought reads the table it was made for
         pgsql.SQL("DROP VIEW IF EXISTS kubectl.{t}").format(t=pgsql.Identifier(table)),
         pgsql.SQL("ALTER TABLE k8s.{t} RENAME TO {old}").format(
             t=pgsql.Identifier(table), old=pgsql.Identifier(table + "_unpartitioned")),
         pgsql.SQL("CREATE TABLE k8s.{t} (LIKE k8s.{old} INCLUDING ALL) PARTITION BY LIST (cluster)").format(
             t=pgsql.Identifier(table), old=pgsql.Identifier(table + "_unpartitioned")),
         pgsql.SQL("DROP TABLE k8s.{old}").format(old=pgsql.Identifier(table + "_unpartitioned")),
         pgsql.SQL("CREATE TABLE k8s_part.{p} PARTITION OF k8s.{t} DEFAULT").format(
             p=pgsql.Identifier(table + "_default"), t=pgsql.Identifier(table))]
    for i, c in enumerate(clusters):
        q.append(pgsql.SQL("CREATE TABLE k8s_part.{p} PARTITION OF k8s.{t} FOR VALUES IN ({c})").format(
            p=pgsql.Identifier("%s_%d" % (table, i)), t=pgsql.Identifier(table), c=pgsql.Literal(c)))
    with pg.conn.cursor() as cur:   # one transaction
        cur.execute(pgsql.SQL("BEGIN; {}; COMMIT").format(pgsql.SQL("; ").join(q)))
