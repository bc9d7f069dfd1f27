/*-------------------------------------------------------------------------
 *
 * apply_message.c
 *		Apply requests and results as bytes: one shm_mq message each
 *		(kw_apply.h).
 *
 * Both ends are the same build of kwatch in the same server, so the
 * encoding is plain: integers in network order (libpq/pqformat.h), and
 * strings as a length (-1 for NULL) followed by their bytes, never
 * converted.  A decoder that finds a message cut short ERRORs
 * (pq_getmsg*: 08P01), which only a bug can cause.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq/pqformat.h"

#include "kw_common.h"
#include "kw_apply.h"

/* put_len_str: s[0..len) as a length and its bytes; NULL as length -1 */
static void
put_len_str(StringInfo buf, const char *s, int len)
{
	if (s == NULL)
	{
		pq_sendint32(buf, (uint32) -1);
		return;
	}
	pq_sendint32(buf, (uint32) len);
	pq_sendbytes(buf, s, len);
}

static void
put_str(StringInfo buf, const char *s)
{
	put_len_str(buf, s, s ? (int) strlen(s) : 0);
}

/* get_str: a string put_str wrote, palloc'd and NUL-terminated; *len its length */
static char *
get_str(StringInfo msg, int *len)
{
	int32		n = (int32) pq_getmsgint(msg, 4);
	char	   *s;

	if (len)
		*len = n < 0 ? 0 : n;
	if (n < 0)
		return NULL;
	s = palloc(n + 1);
	pq_copymsgbytes(msg, s, n);
	s[n] = '\0';
	return s;
}

static void
put_object(StringInfo buf, const KwObject *o)
{
	put_str(buf, o->uid);
	put_str(buf, o->namespace);
	put_str(buf, o->name);
	put_str(buf, o->resource_version);
	put_len_str(buf, o->json, o->json_len);
	put_str(buf, o->managers);
}

static void
get_object(StringInfo msg, KwObject *o)
{
	o->uid = get_str(msg, NULL);
	o->namespace = get_str(msg, NULL);
	o->name = get_str(msg, NULL);
	o->resource_version = get_str(msg, NULL);
	o->json = get_str(msg, &o->json_len);
	o->managers = get_str(msg, NULL);
}

static void
put_registration(StringInfo buf, const KwRegistration *r)
{
	pq_sendint32(buf, r->id);
	put_str(buf, r->server);
	put_str(buf, r->api_group);
	put_str(buf, r->api_version);
	put_str(buf, r->plural);
	put_str(buf, r->kind);
	pq_sendbyte(buf, r->namespaced);
	put_str(buf, r->namespace);
	put_str(buf, r->label_selector);
	put_str(buf, r->field_selector);
	put_str(buf, r->table_name);
	put_str(buf, r->channel);
	pq_sendbyte(buf, r->notify);
	pq_sendbyte(buf, r->secret_data);
	pq_sendbyte(buf, r->notify_minimal);
	for (int i = 0; i < lengthof(r->retry_ms); i++)
		pq_sendint32(buf, r->retry_ms[i]);
	pq_sendint32(buf, r->apply_timeout_ms);
	pq_sendint32(buf, r->owner);
	put_str(buf, r->resource_version);
	put_str(buf, r->created_at);
}

static void
get_registration(StringInfo msg, KwRegistration *r)
{
	r->id = (int32) pq_getmsgint(msg, 4);
	r->server = get_str(msg, NULL);
	r->api_group = get_str(msg, NULL);
	r->api_version = get_str(msg, NULL);
	r->plural = get_str(msg, NULL);
	r->kind = get_str(msg, NULL);
	r->namespaced = pq_getmsgbyte(msg);
	r->namespace = get_str(msg, NULL);
	r->label_selector = get_str(msg, NULL);
	r->field_selector = get_str(msg, NULL);
	r->table_name = get_str(msg, NULL);
	r->channel = get_str(msg, NULL);
	r->notify = pq_getmsgbyte(msg);
	r->secret_data = pq_getmsgbyte(msg);
	r->notify_minimal = pq_getmsgbyte(msg);
	for (int i = 0; i < lengthof(r->retry_ms); i++)
		r->retry_ms[i] = (int) pq_getmsgint(msg, 4);
	r->apply_timeout_ms = (int32) pq_getmsgint(msg, 4);
	r->owner = (Oid) pq_getmsgint(msg, 4);
	r->resource_version = get_str(msg, NULL);
	r->created_at = get_str(msg, NULL);
}

/*
 * kw_apply_request_encode: appends `req` to `buf` (one shm_mq message).
 * Only the fields its op uses are written.
 */
void
kw_apply_request_encode(StringInfo buf, const KwApplyRequest *req)
{
	pq_sendbyte(buf, (int) req->op);
	pq_sendint32(buf, req->timeout_ms);
	pq_sendbyte(buf, req->direct);
	pq_sendbyte(buf, req->allow_direct);
	pq_sendbyte(buf, req->forget_checkpoint);
	put_str(buf, req->rv);
	if (req->op != KW_APPLY_PRUNE_HISTORY)
		put_registration(buf, &req->reg);
	else
		pq_sendint32(buf, req->history_oid);
	if (req->op == KW_APPLY_EVENTS || req->op == KW_APPLY_RELIST_FINISH)
	{
		pq_sendint32(buf, req->nevents);
		for (int i = 0; i < req->nevents; i++)
		{
			pq_sendbyte(buf, (int) req->events[i].type);
			put_object(buf, &req->events[i].obj);
		}
	}
	else if (req->op == KW_APPLY_RELIST_STAGE)
	{
		pq_sendint32(buf, req->nobjs);
		for (int i = 0; i < req->nobjs; i++)
			put_object(buf, &req->objs[i]);
	}
}

/*
 * kw_apply_request_decode: the request kw_apply_request_encode wrote into
 * data[0..len), allocated in the current memory context.  ERRORs (08P01)
 * on a message cut short.
 */
void
kw_apply_request_decode(const char *data, Size len, KwApplyRequest *req)
{
	StringInfoData msg = {.data = (char *) data, .len = (int) len, .maxlen = (int) len};

	memset(req, 0, sizeof(*req));
	req->op = (KwApplyOp) pq_getmsgbyte(&msg);
	req->timeout_ms = (int) pq_getmsgint(&msg, 4);
	req->direct = pq_getmsgbyte(&msg);
	req->allow_direct = pq_getmsgbyte(&msg);
	req->forget_checkpoint = pq_getmsgbyte(&msg);
	req->rv = get_str(&msg, NULL);
	if (req->op != KW_APPLY_PRUNE_HISTORY)
		get_registration(&msg, &req->reg);
	else
		req->history_oid = (Oid) pq_getmsgint(&msg, 4);
	if (req->op == KW_APPLY_EVENTS || req->op == KW_APPLY_RELIST_FINISH)
	{
		req->nevents = (int) pq_getmsgint(&msg, 4);
		req->events = palloc(sizeof(KwEvent) * Max(req->nevents, 1));
		for (int i = 0; i < req->nevents; i++)
		{
			req->events[i].type = (KwEventType) pq_getmsgbyte(&msg);
			get_object(&msg, &req->events[i].obj);
		}
	}
	else if (req->op == KW_APPLY_RELIST_STAGE)
	{
		req->nobjs = (int) pq_getmsgint(&msg, 4);
		req->objs = palloc(sizeof(KwObject) * Max(req->nobjs, 1));
		for (int i = 0; i < req->nobjs; i++)
			get_object(&msg, &req->objs[i]);
	}
	pq_getmsgend(&msg);
}

/* kw_apply_result_encode: appends `res` to `buf` (one shm_mq message). */
void
kw_apply_result_encode(StringInfo buf, const KwApplyResult *res)
{
	pq_sendbyte(buf, res->ok);
	pq_sendint32(buf, res->sqlstate);
	put_str(buf, res->error);
	pq_sendint64(buf, res->counts.added);
	pq_sendint64(buf, res->counts.modified);
	pq_sendint64(buf, res->counts.deleted);
	pq_sendint64(buf, res->counts.notified);
	pq_sendint32(buf, res->skipped);
	pq_sendbyte(buf, res->direct);
	pq_sendbyte(buf, res->behind);
	pq_sendint64(buf, res->rows);
	pq_sendint32(buf, res->nknown);
	for (int i = 0; i < res->nknown; i++)
	{
		put_str(buf, res->known_uids[i]);
		put_str(buf, res->known_rvs[i]);
	}
}

/*
 * kw_apply_result_decode: the result kw_apply_result_encode wrote into
 * data[0..len), allocated in the current memory context.  ERRORs (08P01)
 * on a message cut short.
 */
void
kw_apply_result_decode(const char *data, Size len, KwApplyResult *res)
{
	StringInfoData msg = {.data = (char *) data, .len = (int) len, .maxlen = (int) len};

	memset(res, 0, sizeof(*res));
	res->ok = pq_getmsgbyte(&msg);
	res->sqlstate = (int) pq_getmsgint(&msg, 4);
	res->error = get_str(&msg, NULL);
	res->counts.added = pq_getmsgint64(&msg);
	res->counts.modified = pq_getmsgint64(&msg);
	res->counts.deleted = pq_getmsgint64(&msg);
	res->counts.notified = pq_getmsgint64(&msg);
	res->skipped = (int) pq_getmsgint(&msg, 4);
	res->direct = pq_getmsgbyte(&msg);
	res->behind = pq_getmsgbyte(&msg);
	res->rows = pq_getmsgint64(&msg);
	res->nknown = (int) pq_getmsgint(&msg, 4);
	if (res->nknown > 0)
	{
		res->known_uids = palloc(sizeof(char *) * res->nknown);
		res->known_rvs = palloc(sizeof(char *) * res->nknown);
	}
	for (int i = 0; i < res->nknown; i++)
	{
		res->known_uids[i] = get_str(&msg, NULL);
		res->known_rvs[i] = get_str(&msg, NULL);
	}
	pq_getmsgend(&msg);
}
