#!/usr/bin/python3
"""LISTEN on a kwatch channel and print each change it announces.

usage: listen.py CHANNEL SECONDS      (connection from PG* environment variables;
                                      reads kwatch.events: superuser or granted SELECT)

A notification is only a wake-up (README "NOTIFY payload"): channels are
public, so any role may send one with any payload.  What is printed comes
from kwatch.events, which only kwatch writes: every change of the channel's
table after the last one printed, up to kwatch.events_last_seq().  Since
kwatch commits the row before the notification is delivered, the row is
visible at once; each line says so.
"""
import select
import sys
import time

import psycopg2
import psycopg2.extensions

channel, seconds = sys.argv[1], float(sys.argv[2])
conn = psycopg2.connect("")
conn.autocommit = True
cur = conn.cursor()
cur.execute("LISTEN " + psycopg2.extensions.quote_ident(channel, cur))
# kwatch.watches shows k8s.<table>; kwatch.events the table's own name
cur.execute("SELECT w.table_name, c.relname FROM kwatch.watches w"
            " JOIN pg_class c ON c.oid = to_regclass(w.table_name) WHERE w.channel = %s LIMIT 1", (channel,))
row = cur.fetchone()
qualified, table = row if row else (None, None)
cur.execute("SELECT kwatch.events_last_seq()")
last = cur.fetchone()[0] or 0
end = time.time() + seconds
count = 0
while time.time() < end:
    if select.select([conn], [], [], 0.2) == ([], [], []):
        continue
    conn.poll()
    if not conn.notifies:
        continue
    del conn.notifies[:]            # wake-ups: their payloads are not trusted
    if table is None:
        continue
    cur.execute("SELECT kwatch.events_last_seq()")
    upto = cur.fetchone()[0] or 0
    cur.execute("SELECT seq, type, cluster, namespace, name, uid, resource_version FROM kwatch.events"
                " WHERE seq > %s AND seq <= %s AND table_name = %s ORDER BY seq", (last, upto, table))
    rows = cur.fetchall()
    cur.execute("SELECT kwatch.events_oldest_seq()")
    oldest = cur.fetchone()[0] or 0
    if oldest > last + 1:
        print(f"  (events {last + 1}..{oldest - 1} were overwritten before they were read)", flush=True)
    for seq, type_, cluster, ns, name, uid, rv in rows:
        visible = ""
        if type_ != "DELETED":
            cur.execute(f"SELECT resource_version FROM {qualified} WHERE cluster = %s AND uid = %s",
                        (cluster, uid))
            r = cur.fetchone()
            if r is None:
                visible = "  (row already deleted by a later change)"
            elif r[0] == rv:
                visible = "  (row visible)"
            else:
                visible = f"  (row already at newer rv {r[0]})"
        print(f"  {type_:<8} {ns}/{name} rv={rv}{visible}", flush=True)
        count += 1
    last = max(last, upto)
print(f"  {count} changes on {channel}")
