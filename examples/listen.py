#!/usr/bin/python3
"""LISTEN on a kwatch channel and print each notification with its delay.

usage: listen.py CHANNEL SECONDS      (connection from PG* environment variables)

For every notification, prints the payload and, since kwatch commits the row
before the notification is delivered, confirms the row is visible at once.
"""
import json
import select
import sys
import time

import psycopg2

channel, seconds = sys.argv[1], float(sys.argv[2])
conn = psycopg2.connect("")
conn.autocommit = True
cur = conn.cursor()
cur.execute("LISTEN " + channel)
cur.execute("SELECT table_name FROM kwatch.watches WHERE channel = %s LIMIT 1", (channel,))
row = cur.fetchone()
table = row[0] if row else None
end = time.time() + seconds
count = 0
while time.time() < end:
    if select.select([conn], [], [], 0.2) == ([], [], []):
        continue
    conn.poll()
    while conn.notifies:
        n = conn.notifies.pop(0)
        p = json.loads(n.payload)
        visible = ""
        if table and p["type"] != "DELETED":
            cur.execute(f"SELECT resource_version FROM {table} WHERE cluster = %s AND uid = %s",
                        (p["cluster"], p["uid"]))
            r = cur.fetchone()
            if r is None:
                visible = "  (row already deleted by a later change)"
            elif r[0] == p["resource_version"]:
                visible = "  (row visible)"
            else:
                visible = f"  (row already at newer rv {r[0]})"
        print(f"  {p['type']:<8} {p['namespace']}/{p['name']} rv={p['resource_version']}{visible}", flush=True)
        count += 1
print(f"  {count} notifications on {channel}")
