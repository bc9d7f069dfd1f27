/*-------------------------------------------------------------------------
 *
 * notify.c
 *		NOTIFY payloads for applied changes.
 *
 * One notification per row change, queued with Async_Notify() inside the
 * transaction that changes the row, so a listener is woken only after the
 * change committed and can already read it.  The payload is JSON:
 *
 *	 {"seq":1042,"type":"MODIFIED","cluster":"prod","namespace":"shop",
 *	  "name":"web-1","uid":"...","resource_version":"123",
 *	  "preexisting":false,"final_state_unknown":false,
 *	  "previous_resource_version":"120"}
 *
 * preexisting: the change was found by a LIST (initial sync or relist), not
 * a watch event; final_state_unknown: a DELETED inferred by a relist, so
 * the last state the row held may be stale; previous_resource_version (on
 * MODIFIED only): the row's resourceVersion before (KwChange, kw_common.h).
 *
 * `seq` is the change's number in the event stream (events.c), one
 * sequence for all watches: a listener whose last seen seq is not seq - 1
 * reads the events in between from kwatch.events (they may belong to other
 * watches, or be ones it missed while disconnected).  It is left out when
 * there is no event ring (kwatch not preloaded, which also means no worker).
 *
 * and always fits PostgreSQL's limit (NOTIFY_PAYLOAD_MAX_LENGTH, 8000 bytes
 * with the default block size): Kubernetes names are at most 253 bytes, but
 * a misbehaving server could send more, so each field is cut at
 * KW_FIELD_MAX bytes (on a UTF-8 character boundary) and the payload then
 * carries "truncated":true.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_policy.h"
#include "commands/async.h"
#include "mb/pg_wchar.h"
#include "utils/fmgroids.h"
#include "utils/json.h"
#include "utils/lsyscache.h"

#include "kw_common.h"
#include "kw_as_owner.h"

#define KW_FIELD_MAX 1000
/* PostgreSQL's limit, private to commands/async.c: keep in step with it. */
#define KW_NOTIFY_MAX (BLCKSZ - NAMEDATALEN - 128)

static bool
append_field(StringInfo buf, const char *key, const char *value, bool first)
{
	bool		truncated = false;

	if (!first)
		appendStringInfoChar(buf, ',');
	escape_json(buf, key);
	appendStringInfoChar(buf, ':');
	if (value == NULL)
	{
		appendStringInfoString(buf, "null");
		return false;
	}
	if (strlen(value) > KW_FIELD_MAX)
	{
		int			cut = pg_mbcliplen(value, strlen(value), KW_FIELD_MAX);
		char	   *v = pnstrdup(value, cut);

		escape_json(buf, v);
		pfree(v);
		truncated = true;
	}
	else
		escape_json(buf, value);
	return truncated;
}

/*
 * kw_notify_payload: the JSON payload for change `c` of cluster `cluster`
 * (palloc'd): seq (left out when 0), type, cluster, namespace, name, uid,
 * resource_version (namespace and name JSON null unless with_names), then
 * the origin flags preexisting and final_state_unknown, and for a MODIFIED
 * previous_resource_version (KwChange).  Fields longer than KW_FIELD_MAX
 * bytes are cut and the payload marked "truncated":true.
 */
char *
kw_notify_payload(int64 seq, const char *cluster, const KwChange *c,
				  bool with_names)
{
	StringInfoData buf;
	bool		truncated = false;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	if (seq > 0)
		appendStringInfo(&buf, "\"seq\":" INT64_FORMAT ",", seq);
	truncated |= append_field(&buf, "type", kw_event_type_name(c->type), true);
	truncated |= append_field(&buf, "cluster", cluster, false);
	truncated |= append_field(&buf, "namespace", with_names ? c->namespace : NULL, false);
	truncated |= append_field(&buf, "name", with_names ? c->name : NULL, false);
	truncated |= append_field(&buf, "uid", c->uid, false);
	truncated |= append_field(&buf, "resource_version", c->resource_version, false);
	appendStringInfo(&buf, ",\"preexisting\":%s,\"final_state_unknown\":%s",
					 c->preexisting ? "true" : "false",
					 c->final_state_unknown ? "true" : "false");
	if (c->type == KW_EV_MODIFIED)
		truncated |= append_field(&buf, "previous_resource_version",
								  c->previous_resource_version, false);
	if (truncated)
		appendStringInfoString(&buf, ",\"truncated\":true");
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * rows_follow_rbac: whether mirror table k8s.<table_name> carries the
 * policy kwatch_rbac (kwatch.enable_rbac_rows, sql/schema/functions/
 * rbac_rows.sql): then its readers see only the rows their own Kubernetes
 * identity may list, and a notification, which anyone may LISTEN to, names
 * no object (the minimal payload).  One index probe of pg_policy.
 */
static bool
rows_follow_rbac(const char *table_name)
{
	Oid			nsp = get_namespace_oid("k8s", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid(table_name, nsp) : InvalidOid;

	return OidIsValid(relid) && kw_has_rbac_policy(relid);
}

/*
 * kw_notify: queues the notification of applied change `c` on the watch's
 * channel, unless the watch was registered with notify => false; `seq` is
 * its number in the event stream (events.c, kw_events_checkpoint, which
 * calls this), 0 for none.  Must run in the transaction that made the
 * change.  A payload that would still exceed the limit (only with absurd control-character-laden names) is sent
 * with namespace and name left out rather than dropped.  A watch with
 * notify_payload 'minimal' sends {"seq":N,"type":"..."} only: anyone may
 * LISTEN on a channel, and names can be sensitive (a Secret's say); a
 * reader with the rights looks the change up in kwatch.events by seq.  So
 * does a table whose rows follow RBAC (rows_follow_rbac).
 */
void
kw_notify(KwRegistration *reg, const KwChange *c, int64 seq)
{
	char	   *payload;

	if (!reg->notify)
		return;
	if (reg->notify_minimal || rows_follow_rbac(reg->table_name))
	{
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfoChar(&buf, '{');
		if (seq > 0)
			appendStringInfo(&buf, "\"seq\":" INT64_FORMAT ",", seq);
		appendStringInfo(&buf, "\"type\":\"%s\"}", kw_event_type_name(c->type));
		Async_Notify(reg->channel, buf.data);
		pfree(buf.data);
		return;
	}
	payload = kw_notify_payload(seq, reg->server, c, true);
	if (strlen(payload) >= KW_NOTIFY_MAX)
	{
		pfree(payload);
		payload = kw_notify_payload(seq, reg->server, c, false);
	}
	Async_Notify(reg->channel, payload);
	pfree(payload);
}
