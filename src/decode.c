/*-------------------------------------------------------------------------
 *
 * decode.c
 *		JSON from the API server -> Kubernetes objects ready to store.
 *
 * Two stream decoders, both fed raw bytes exactly as they arrive:
 *
 *	- the WATCH decoder runs json-c's incremental tokener over the body, so an
 *	  event split across chunks, or several events in one chunk, decode the
 *	  same way (PROTOCOL 12).  Malformed JSON or an unknown event type ends
 *	  the stream (PROTOCOL 13).
 *
 *	- the LIST decoder is a byte-level framer over the top-level
 *	  {"kind":..,"metadata":{..},"items":[..]} object: each element of
 *	  "items" is cut out and parsed on its own, so memory never depends on
 *	  the list's size, even when a cache-served list ignores `limit`
 *	  (PROTOCOL 5, 6).
 *
 * kw_decode_object() then extracts an object's identity, drops
 * metadata.managedFields and makes the text storable as jsonb.
 *
 * Limits (as PostgreSQL's own libcurl client bounds its inputs): one object
 * or event may be at most KW_MAX_OBJECT_BYTES and KW_MAX_DEPTH deep;
 * anything larger is a malformed stream.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <json-c/json.h>

#include "mb/pg_wchar.h"

#include "kwatch.h"

/* Kubernetes caps objects at 1.5 MB in etcd; leave room for large CRs. */
#define KW_MAX_OBJECT_BYTES (64 * 1024 * 1024)
/* Deep enough for CRD schemas; bounds json-c's parser stack. */
#define KW_MAX_DEPTH 256

/*
 * kw_event_type_name: "ADDED", "MODIFIED", ... as Kubernetes spells them.
 */
const char *
kw_event_type_name(KwEventType t)
{
	switch (t)
	{
		case KW_EV_ADDED:
			return "ADDED";
		case KW_EV_MODIFIED:
			return "MODIFIED";
		case KW_EV_DELETED:
			return "DELETED";
		case KW_EV_BOOKMARK:
			return "BOOKMARK";
		case KW_EV_ERROR:
			return "ERROR";
	}
	return "?";
}

static const char *
get_string(json_object *o, const char *key)
{
	json_object *v;

	if (o && json_object_object_get_ex(o, key, &v) &&
		json_object_is_type(v, json_type_string))
		return json_object_get_string(v);
	return NULL;
}

/*
 * escape_nul: rewrites every JSON escape \u0000 in `s` as the six literal
 * characters "\u0000" (the JSON text \\u0000), since jsonb cannot store NUL.
 * Returns a new palloc'd string, or NULL when there was none.
 */
static char *
escape_nul(const char *s, int len, int *newlen)
{
	StringInfoData out;
	bool		found = false;
	int			start = 0;

	for (int i = 0; i < len; i++)
	{
		if (s[i] != '\\')
			continue;
		if (i + 5 < len && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0)
		{
			if (!found)
			{
				initStringInfo(&out);
				found = true;
			}
			appendBinaryStringInfo(&out, s + start, i - start);
			appendStringInfoString(&out, "\\\\u0000");
			i += 5;
			start = i + 1;
		}
		else
			i++;				/* skip the escaped character */
	}
	if (!found)
		return NULL;
	appendBinaryStringInfo(&out, s + start, len - start);
	*newlen = out.len;
	return out.data;
}

/*
 * repair_utf8: replaces each invalid UTF-8 sequence in `s` by U+FFFD.
 * Returns a new palloc'd string, or NULL when `s` was valid.
 */
static char *
repair_utf8(const char *s, int len, int *newlen)
{
	StringInfoData out;
	int			i = 0;
	int			start = 0;
	bool		found = false;

	while (i < len)
	{
		int			l = pg_utf_mblen((const unsigned char *) s + i);

		if ((unsigned char) s[i] < 0x80)
		{
			i++;
			continue;
		}
		if (i + l <= len && pg_utf8_islegal((const unsigned char *) s + i, l))
		{
			i += l;
			continue;
		}
		if (!found)
		{
			initStringInfo(&out);
			found = true;
		}
		appendBinaryStringInfo(&out, s + start, i - start);
		appendStringInfoString(&out, "\xEF\xBF\xBD");
		i++;
		start = i;
	}
	if (!found)
		return NULL;
	appendBinaryStringInfo(&out, s + start, len - start);
	*newlen = out.len;
	return out.data;
}

/*
 * kw_decode_object: fills `out` (palloc'd strings) from a json-c object
 * `jobj` (a json_object *).  Removes metadata.managedFields from jobj.
 * Returns KW_DECODE_OK; KW_DECODE_SANITIZED when \u0000 escapes or invalid
 * UTF-8 had to be rewritten (see README "Objects PostgreSQL cannot store");
 * KW_DECODE_SKIP with a reason in *why when the object lacks metadata.uid,
 * metadata.name or metadata.resourceVersion.
 */
KwDecodeResult
kw_decode_object(void *jobj, KwObject *out, char **why)
{
	json_object *o = (json_object *) jobj;
	json_object *meta;
	const char *uid,
			   *name,
			   *ns,
			   *rv;
	const char *text;
	size_t		textlen;
	char	   *fixed;
	int			fixedlen;
	KwDecodeResult result = KW_DECODE_OK;

	memset(out, 0, sizeof(*out));
	if (!json_object_is_type(o, json_type_object) ||
		!json_object_object_get_ex(o, "metadata", &meta) ||
		!json_object_is_type(meta, json_type_object))
	{
		*why = "object has no metadata";
		return KW_DECODE_SKIP;
	}
	uid = get_string(meta, "uid");
	name = get_string(meta, "name");
	ns = get_string(meta, "namespace");
	rv = get_string(meta, "resourceVersion");
	if (uid == NULL || name == NULL || rv == NULL)
	{
		*why = psprintf("object %s%s%s has no %s",
						ns ? ns : "", ns ? "/" : "", name ? name : "(unnamed)",
						uid == NULL ? "metadata.uid" : name == NULL ? "metadata.name" :
						"metadata.resourceVersion");
		return KW_DECODE_SKIP;
	}
	out->uid = pstrdup(uid);
	out->name = pstrdup(name);
	out->namespace = (ns && ns[0]) ? pstrdup(ns) : NULL;
	out->resource_version = pstrdup(rv);

	json_object_object_del(meta, "managedFields");
	text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
											 JSON_C_TO_STRING_NOSLASHESCAPE,
											 &textlen);
	out->json = pnstrdup(text, textlen);
	out->json_len = (int) textlen;

	if ((fixed = escape_nul(out->json, out->json_len, &fixedlen)) != NULL)
	{
		pfree(out->json);
		out->json = fixed;
		out->json_len = fixedlen;
		result = KW_DECODE_SANITIZED;
	}
	if ((fixed = repair_utf8(out->json, out->json_len, &fixedlen)) != NULL)
	{
		pfree(out->json);
		out->json = fixed;
		out->json_len = fixedlen;
		result = KW_DECODE_SANITIZED;
	}
	return result;
}

/* ---------------------------------------------------------------------
 * WATCH stream
 * ---------------------------------------------------------------------
 */
struct KwWatchDecoder
{
	json_tokener *tok;
	size_t		pending_bytes;	/* bytes fed into the unfinished event */
};

/*
 * kw_watch_decoder_create: a decoder for one WATCH response body.  Uses
 * malloc'd json-c state: free it with kw_watch_decoder_free.
 */
KwWatchDecoder *
kw_watch_decoder_create(void)
{
	KwWatchDecoder *dec = palloc0(sizeof(KwWatchDecoder));

	dec->tok = json_tokener_new_ex(KW_MAX_DEPTH);
	if (dec->tok == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	return dec;
}

/*
 * kw_watch_decoder_free: frees a decoder; accepts NULL.
 */
void
kw_watch_decoder_free(KwWatchDecoder *dec)
{
	if (dec == NULL)
		return;
	json_tokener_free(dec->tok);
	pfree(dec);
}

static bool
parse_event_type(const char *s, KwEventType *t)
{
	if (strcmp(s, "ADDED") == 0)
		*t = KW_EV_ADDED;
	else if (strcmp(s, "MODIFIED") == 0)
		*t = KW_EV_MODIFIED;
	else if (strcmp(s, "DELETED") == 0)
		*t = KW_EV_DELETED;
	else if (strcmp(s, "BOOKMARK") == 0)
		*t = KW_EV_BOOKMARK;
	else if (strcmp(s, "ERROR") == 0)
		*t = KW_EV_ERROR;
	else
		return false;
	return true;
}

/* deliver_event: cb(arg, t, obj), then frees the event `ev` holding obj, even on ERROR. */
static void
deliver_event(KwWatchEventCallback cb, void *arg, KwEventType t,
			  json_object *obj, json_object *ev)
{
	PG_TRY();
	{
		cb(arg, t, obj);
	}
	PG_FINALLY();
	{
		json_object_put(ev);
	}
	PG_END_TRY();
}

/*
 * kw_watch_decoder_feed: decodes the next `len` bytes of a watch stream,
 * calling cb(arg, type, object) for each complete event in order; the
 * object (a json_object *) is only valid during the call.  Returns false
 * with a palloc'd *error when the stream is malformed (bad JSON, an event
 * without type/object, an unknown type, an event over the size limit): the
 * caller must abandon the stream (PROTOCOL 13).
 */
bool
kw_watch_decoder_feed(KwWatchDecoder *dec, const char *data, size_t len,
					  KwWatchEventCallback cb, void *arg, char **error)
{
	size_t		off = 0;

	while (off < len)
	{
		json_object *ev;
		enum json_tokener_error jerr;
		size_t		used;
		json_object *typ,
				   *obj;
		KwEventType t = KW_EV_ERROR;

		/* whitespace between events must not start a new value */
		if (dec->pending_bytes == 0)
		{
			while (off < len && (data[off] == '\n' || data[off] == '\r' ||
								 data[off] == ' ' || data[off] == '\t'))
				off++;
			if (off == len)
				break;
		}

		ev = json_tokener_parse_ex(dec->tok, data + off, (int) (len - off));
		jerr = json_tokener_get_error(dec->tok);
		used = json_tokener_get_parse_end(dec->tok);
		if (ev == NULL)
		{
			if (jerr == json_tokener_continue)
			{
				dec->pending_bytes += len - off;
				if (dec->pending_bytes > KW_MAX_OBJECT_BYTES)
				{
					*error = psprintf("watch event larger than %d MB",
									  KW_MAX_OBJECT_BYTES / (1024 * 1024));
					return false;
				}
				return true;
			}
			*error = psprintf("malformed JSON in watch stream: %s",
							  json_tokener_error_desc(jerr));
			return false;
		}
		off += used;
		dec->pending_bytes = 0;
		json_tokener_reset(dec->tok);

		if (!json_object_is_type(ev, json_type_object) ||
			!json_object_object_get_ex(ev, "type", &typ) ||
			!json_object_is_type(typ, json_type_string) ||
			!json_object_object_get_ex(ev, "object", &obj) ||
			!json_object_is_type(obj, json_type_object))
		{
			json_object_put(ev);
			*error = pstrdup("watch event without \"type\" and \"object\"");
			return false;
		}
		if (!parse_event_type(json_object_get_string(typ), &t))
		{
			*error = psprintf("unknown watch event type \"%.40s\"",
							  json_object_get_string(typ));
			json_object_put(ev);
			return false;
		}
		deliver_event(cb, arg, t, obj, ev);
	}
	return true;
}

/* ---------------------------------------------------------------------
 * LIST response
 * ---------------------------------------------------------------------
 */
struct KwListDecoder
{
	int			depth;			/* nesting depth before the current byte */
	bool		in_string;
	bool		escape;
	bool		expect_key;		/* at depth 1: next string is a key */
	bool		in_items;		/* inside the top-level "items" array */
	StringInfoData key;			/* last depth-1 key */
	StringInfoData str;			/* depth-1 string being read */
	bool		capture_str;
	StringInfoData capture;		/* current item or metadata value */
	bool		capturing;
	bool		capturing_meta;
	StringInfoData meta;		/* the top-level "metadata" object */
	StringInfoData kind;
	json_tokener *tok;
	int64		items;
};

/*
 * kw_list_decoder_create: a decoder for one LIST response body (one page).
 * Free with kw_list_decoder_free.
 */
KwListDecoder *
kw_list_decoder_create(void)
{
	KwListDecoder *dec = palloc0(sizeof(KwListDecoder));

	initStringInfo(&dec->key);
	initStringInfo(&dec->str);
	initStringInfo(&dec->capture);
	initStringInfo(&dec->meta);
	initStringInfo(&dec->kind);
	dec->tok = json_tokener_new_ex(KW_MAX_DEPTH);
	if (dec->tok == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	return dec;
}

/*
 * kw_list_decoder_free: frees a decoder; accepts NULL.
 */
void
kw_list_decoder_free(KwListDecoder *dec)
{
	if (dec == NULL)
		return;
	json_tokener_free(dec->tok);
	pfree(dec->key.data);
	pfree(dec->str.data);
	pfree(dec->capture.data);
	pfree(dec->meta.data);
	pfree(dec->kind.data);
	pfree(dec);
}

static bool
emit_item(KwListDecoder *dec, KwListItemCallback cb, void *arg, char **error)
{
	json_object *obj;
	enum json_tokener_error jerr;

	json_tokener_reset(dec->tok);
	obj = json_tokener_parse_ex(dec->tok, dec->capture.data, dec->capture.len);
	jerr = json_tokener_get_error(dec->tok);
	if (obj == NULL || jerr != json_tokener_success)
	{
		if (obj)
			json_object_put(obj);
		*error = psprintf("malformed list item %lld: %s", (long long) dec->items,
						  json_tokener_error_desc(jerr == json_tokener_success ?
												  json_tokener_error_parse_eof : jerr));
		return false;
	}
	dec->items++;
	PG_TRY();
	{
		cb(arg, obj);
	}
	PG_FINALLY();
	{
		json_object_put(obj);
	}
	PG_END_TRY();
	resetStringInfo(&dec->capture);
	return true;
}

/*
 * kw_list_decoder_feed: scans the next `len` bytes of a LIST body, calling
 * cb(arg, item) for each complete element of "items" (a json_object *,
 * valid during the call).  Returns false with a palloc'd *error when the
 * body is not a JSON object or an item is malformed or over the limits.
 */
bool
kw_list_decoder_feed(KwListDecoder *dec, const char *data, size_t len,
					 KwListItemCallback cb, void *arg, char **error)
{
	for (size_t i = 0; i < len; i++)
	{
		char		c = data[i];

		if (dec->capturing)
			appendStringInfoChar(&dec->capture, c);

		if (dec->in_string)
		{
			if (dec->escape)
				dec->escape = false;
			else if (c == '\\')
				dec->escape = true;
			else if (c == '"')
			{
				dec->in_string = false;
				if (dec->capture_str)
				{
					dec->capture_str = false;
					if (dec->expect_key)
					{
						resetStringInfo(&dec->key);
						appendBinaryStringInfo(&dec->key, dec->str.data, dec->str.len);
					}
					else if (strcmp(dec->key.data, "kind") == 0)
					{
						resetStringInfo(&dec->kind);
						appendBinaryStringInfo(&dec->kind, dec->str.data, dec->str.len);
					}
				}
				continue;
			}
			if (dec->capture_str && dec->str.len < 256)
				appendStringInfoChar(&dec->str, c);
			continue;
		}

		switch (c)
		{
			case '"':
				dec->in_string = true;
				if (dec->depth == 1)
				{
					dec->capture_str = true;
					resetStringInfo(&dec->str);
				}
				break;
			case '{':
			case '[':
				if (dec->depth == 0 && c != '{')
				{
					*error = pstrdup("list response is not a JSON object");
					return false;
				}
				if (dec->depth == 0)
					dec->expect_key = true;
				else if (dec->depth == 1 && c == '[' &&
						 strcmp(dec->key.data, "items") == 0)
					dec->in_items = true;
				else if (dec->depth == 1 && c == '{' &&
						 strcmp(dec->key.data, "metadata") == 0)
				{
					dec->capturing = dec->capturing_meta = true;
					resetStringInfo(&dec->capture);
					appendStringInfoChar(&dec->capture, c);
				}
				else if (dec->depth == 2 && dec->in_items)
				{
					if (c != '{')
					{
						*error = pstrdup("list item is not a JSON object");
						return false;
					}
					dec->capturing = true;
					resetStringInfo(&dec->capture);
					appendStringInfoChar(&dec->capture, c);
				}
				dec->depth++;
				if (dec->depth > KW_MAX_DEPTH)
				{
					*error = psprintf("list response nested deeper than %d levels",
									  KW_MAX_DEPTH);
					return false;
				}
				break;
			case '}':
			case ']':
				dec->depth--;
				if (dec->depth < 0)
				{
					*error = pstrdup("unbalanced list response");
					return false;
				}
				if (dec->depth == 2 && dec->capturing && !dec->capturing_meta)
				{
					dec->capturing = false;
					if (!emit_item(dec, cb, arg, error))
						return false;
				}
				else if (dec->depth == 1 && dec->capturing_meta)
				{
					dec->capturing = dec->capturing_meta = false;
					resetStringInfo(&dec->meta);
					appendBinaryStringInfo(&dec->meta, dec->capture.data, dec->capture.len);
					resetStringInfo(&dec->capture);
				}
				else if (dec->depth == 1 && dec->in_items)
					dec->in_items = false;
				break;
			case ':':
				if (dec->depth == 1)
					dec->expect_key = false;
				break;
			case ',':
				if (dec->depth == 1)
					dec->expect_key = true;
				break;
			default:
				break;
		}
		if (dec->capturing && dec->capture.len > KW_MAX_OBJECT_BYTES)
		{
			*error = psprintf("list item larger than %d MB",
							  KW_MAX_OBJECT_BYTES / (1024 * 1024));
			return false;
		}
	}
	return true;
}

/*
 * kw_list_decoder_finish: after the whole body was fed, returns the list's
 * metadata.resourceVersion (the snapshot RV, PROTOCOL 4) and
 * metadata.continue (NULL when empty or absent, PROTOCOL 3), palloc'd.
 * Returns false with *error when the body was truncated, was a Status, or
 * carried no resourceVersion.
 */
bool
kw_list_decoder_finish(KwListDecoder *dec, char **resource_version,
					   char **continue_token, char **error)
{
	json_object *meta;
	const char *rv,
			   *cont;

	*resource_version = *continue_token = NULL;
	if (dec->depth != 0 || dec->in_string)
	{
		*error = pstrdup("list response truncated");
		return false;
	}
	if (strcmp(dec->kind.data, "Status") == 0)
	{
		*error = pstrdup("list response is a Status object");
		return false;
	}
	meta = json_tokener_parse(dec->meta.data);
	rv = get_string(meta, "resourceVersion");
	cont = get_string(meta, "continue");
	if (rv == NULL || rv[0] == '\0')
	{
		if (meta)
			json_object_put(meta);
		*error = pstrdup("list response has no metadata.resourceVersion");
		return false;
	}
	*resource_version = pstrdup(rv);
	if (cont && cont[0])
		*continue_token = pstrdup(cont);
	json_object_put(meta);
	return true;
}
