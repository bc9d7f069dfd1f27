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
 * or event may be at most KW_MAX_OBJECT_BYTES and KW_MAX_DEPTH deep.  A
 * LIST item over a limit is skipped (KwListItem.skip_reason); a watch event
 * over a limit makes the stream malformed.
 *
 * The JSON escape \u0000 is rewritten to the six characters \u0000 (JSON
 * text \\u0000) before json-c sees a watch stream, since json-c keeps
 * object keys as C strings and would cut a key at the NUL; LIST items and
 * serialized watch objects go through kw_sanitize_json.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <json-c/json.h>

#include "mb/pg_wchar.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "kw_common.h"
#include "kw_decode.h"

/* Kubernetes caps objects at 1.5 MB in etcd; leave room for large CRs. */
#define KW_MAX_OBJECT_BYTES (64 * 1024 * 1024)
/*
 * Nesting depth: Go's encoding/json, which writes every object the API
 * server serves, refuses values nested deeper than 10000 levels
 * (maxNestingDepth in src/encoding/json/scanner.go), so any object fits,
 * inside a watch event or a list.  json-c's tokener callocs its stack for
 * this depth (32 bytes a level, pages touched only as deep as a document
 * goes); PostgreSQL's jsonb input stores 10000 levels within the default
 * max_stack_depth.
 */
#define KW_MAX_DEPTH (10000 + 16)

/* hex4: the value of 4 hex digits (0x10000 when they are not hex digits). */
static unsigned int
hex4(const char *s)
{
	unsigned int v = 0;

	for (int i = 0; i < 4; i++)
	{
		char		c = s[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return 0x10000;
	}
	return v;
}

/*
 * A rewritten copy of a text `s`, made at the first replacement only, so
 * that a text with nothing to rewrite is never copied.
 */
typedef struct Rewrite
{
	const char *s;
	StringInfoData out;
	bool		found;			/* out holds a copy */
	int			start;			/* s's bytes from here are not copied yet */
} Rewrite;

/* replace_at: copies s up to `at`, then `with` instead of its `n` bytes there. */
static void
replace_at(Rewrite *rw, int at, int n, const char *with)
{
	if (!rw->found)
	{
		initStringInfo(&rw->out);
		rw->found = true;
	}
	appendBinaryStringInfo(&rw->out, rw->s + rw->start, at - rw->start);
	appendStringInfoString(&rw->out, with);
	rw->start = at + n;
}

/*
 * rewrite_result: the rewritten text of `len` bytes of s (palloc'd; its
 * length in *newlen), or NULL when nothing was replaced.
 */
static char *
rewrite_result(Rewrite *rw, int len, int *newlen)
{
	if (!rw->found)
		return NULL;
	appendBinaryStringInfo(&rw->out, rw->s + rw->start, len - rw->start);
	*newlen = rw->out.len;
	return rw->out.data;
}

/*
 * escape_nul: rewrites every JSON escape \u0000 in `s` as the six literal
 * characters "\u0000" (the JSON text \\u0000), since jsonb cannot store NUL.
 * Returns a new palloc'd string, or NULL when there was none.
 */
static char *
escape_nul(const char *s, int len, int *newlen)
{
	Rewrite		rw = {.s = s};

	for (int i = 0; i < len; i++)
	{
		const char *bs = memchr(s + i, '\\', len - i);

		if (bs == NULL)
			break;
		i = bs - s;
		if (i + 5 < len && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0)
		{
			replace_at(&rw, i, 6, "\\\\u0000");
			i += 5;
		}
		else
			i++;				/* skip the escaped character */
	}
	return rewrite_result(&rw, len, newlen);
}

/*
 * repair_utf8: replaces each invalid UTF-8 sequence in `s` by U+FFFD.
 * Returns a new palloc'd string, or NULL when `s` was valid.
 */
static char *
repair_utf8(const char *s, int len, int *newlen)
{
	Rewrite		rw = {.s = s};
	int			i = 0;

	while (i < len)
	{
		int			l;
		uint64		w;

		/* ASCII, the usual text, eight bytes at a time */
		while (i + 8 <= len && (memcpy(&w, s + i, 8), (w & UINT64CONST(0x8080808080808080)) == 0))
			i += 8;
		if (i >= len)
			break;
		if ((unsigned char) s[i] < 0x80)
		{
			i++;
			continue;
		}
		l = pg_utf_mblen((const unsigned char *) s + i);
		if (i + l <= len && pg_utf8_islegal((const unsigned char *) s + i, l))
		{
			i += l;
			continue;
		}
		replace_at(&rw, i, 1, "\xEF\xBF\xBD");
		i++;
	}
	return rewrite_result(&rw, len, newlen);
}

/*
 * fix_surrogates: replaces each lone UTF-16 surrogate escape (\ud800 not
 * followed by a low one, or a lone \udc00) by \ufffd, as json-c and Go's
 * encoding/json decode them; jsonb rejects them.  Returns a new palloc'd
 * string, or NULL when there was none.
 */
static char *
fix_surrogates(const char *s, int len, int *newlen)
{
	Rewrite		rw = {.s = s};

	for (int i = 0; i < len; i++)
	{
		unsigned int v;
		const char *bs = memchr(s + i, '\\', len - i);

		if (bs == NULL)
			break;
		i = bs - s;
		if (!(i + 5 < len && s[i + 1] == 'u'))
		{
			i++;				/* skip the escaped character */
			continue;
		}
		v = hex4(s + i + 2);
		if (v >= 0xD800 && v <= 0xDBFF && i + 11 < len && s[i + 6] == '\\' &&
			s[i + 7] == 'u' && hex4(s + i + 8) >= 0xDC00 && hex4(s + i + 8) <= 0xDFFF)
		{
			i += 11;			/* a valid pair */
			continue;
		}
		if (v < 0xD800 || v > 0xDFFF)
		{
			i += 5;
			continue;
		}
		replace_at(&rw, i, 6, "\\ufffd");
		i += 5;
	}
	return rewrite_result(&rw, len, newlen);
}

/*
 * kw_sanitize_json: makes object text storable as jsonb: \u0000 escapes
 * written out literally, lone surrogate escapes and invalid UTF-8 replaced
 * by U+FFFD (see README "Faults and bad input").  Returns true when it
 * changed the text, replacing *json (palloc'd) and *len.
 */
bool
kw_sanitize_json(char **json, int *len)
{
	char	   *fixed;
	int			fixedlen;
	bool		changed = false;

	if ((fixed = escape_nul(*json, *len, &fixedlen)) != NULL)
	{
		*json = fixed;
		*len = fixedlen;
		changed = true;
	}
	if ((fixed = fix_surrogates(*json, *len, &fixedlen)) != NULL)
	{
		*json = fixed;
		*len = fixedlen;
		changed = true;
	}
	if ((fixed = repair_utf8(*json, *len, &fixedlen)) != NULL)
	{
		*json = fixed;
		*len = fixedlen;
		changed = true;
	}
	return changed;
}

/*
 * kw_valid_identity: whether `s` (NUL-terminated) is valid UTF-8, as an
 * object's uid, name, namespace and resourceVersion must be to be stored in
 * text columns and NOTIFY payloads (Kubernetes validation never lets others
 * through; a proxy or a broken server might).
 */
bool
kw_valid_identity(const char *s)
{
	int			len = (int) strlen(s);

	return pg_encoding_verifymbstr(PG_UTF8, s, len) == len;
}

/*
 * kw_decode_object: fills `out` (palloc'd strings) from a json-c object
 * `jobj` (a json_object *).  Removes metadata.managedFields from jobj, and
 * adds `apiVersion` and `kind` (the watch's resolved resource, see
 * kw_api_version_string) when the object lacks them; the server's values
 * win when present (Kubernetes writes them on watch events,
 * k8s.io/apimachinery/pkg/runtime/serializer/versioning).  Either may be
 * NULL: nothing is added.
 * Returns KW_DECODE_OK; KW_DECODE_SANITIZED when \u0000 escapes or invalid
 * UTF-8 had to be rewritten (see README "Faults and bad input");
 * KW_DECODE_SKIP with a reason in *why when the object lacks metadata.uid,
 * metadata.name or metadata.resourceVersion, or one of them (or the
 * namespace) is not valid UTF-8.
 */
KwDecodeResult
kw_decode_object(void *jobj, const char *api_version, const char *kind,
				 KwObject *out, char **why)
{
	json_object *o = (json_object *) jobj;
	json_object *meta;
	const char *uid,
			   *name,
			   *ns,
			   *rv;
	const char *text;
	size_t		textlen;
	KwDecodeResult result = KW_DECODE_OK;

	memset(out, 0, sizeof(*out));
	if (!json_object_is_type(o, json_type_object) ||
		!json_object_object_get_ex(o, "metadata", &meta) ||
		!json_object_is_type(meta, json_type_object))
	{
		*why = "object has no metadata";
		return KW_DECODE_SKIP;
	}
	uid = kw_json_get_string(meta, "uid");
	name = kw_json_get_string(meta, "name");
	ns = kw_json_get_string(meta, "namespace");
	rv = kw_json_get_string(meta, "resourceVersion");
	if (uid == NULL || name == NULL || rv == NULL)
	{
		*why = psprintf("object %s%s%s has no %s",
						ns ? ns : "", ns ? "/" : "", name ? name : "(unnamed)",
						uid == NULL ? "metadata.uid" : name == NULL ? "metadata.name" :
						"metadata.resourceVersion");
		return KW_DECODE_SKIP;
	}
	if (!kw_valid_identity(uid) || !kw_valid_identity(name) ||
		(ns && !kw_valid_identity(ns)) || !kw_valid_identity(rv))
	{
		*why = psprintf("object %s%s%s has an identity field (metadata.uid, name, namespace or resourceVersion) that is not valid UTF-8",
						ns && kw_valid_identity(ns) ? ns : "", ns ? "/" : "",
						kw_valid_identity(name) ? name : "(invalid name)");
		return KW_DECODE_SKIP;
	}
	out->uid = pstrdup(uid);
	out->name = pstrdup(name);
	out->namespace = (ns && ns[0]) ? pstrdup(ns) : NULL;
	out->resource_version = pstrdup(rv);

	json_object_object_del(meta, "managedFields");
	if (api_version && !json_object_object_get_ex(o, "apiVersion", NULL))
		json_object_object_add(o, "apiVersion", json_object_new_string(api_version));
	if (kind && !json_object_object_get_ex(o, "kind", NULL))
		json_object_object_add(o, "kind", json_object_new_string(kind));
	text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
											 JSON_C_TO_STRING_NOSLASHESCAPE,
											 &textlen);
	out->json = pnstrdup(text, textlen);
	out->json_len = (int) textlen;
	if (kw_sanitize_json(&out->json, &out->json_len))
		result = KW_DECODE_SANITIZED;
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
	/* the \u0000 rewriter (see rewrite_nul) */
	StringInfoData buf;			/* the current chunk, rewritten */
	bool		in_string;
	bool		escape;			/* a backslash in a string is held */
	char		hold[6];		/* a held "\uXXXX" escape, so far */
	int			nhold;
	bool		pending_high;	/* the last escape was a high surrogate */
	int		   *nul_at;			/* offsets in buf of a \u0000 rewritten or a
								 * lone surrogate escape (json-c makes it
								 * U+FFFD) */
	int			n_nul;
	int			max_nul;
	MemoryContext cxt;			/* the decoder's (nul_at grows there) */
	bool		event_nul;		/* the unfinished event had one */
	bool		delivered_nul;	/* the event being delivered had one */
};

/*
 * kw_watch_decoder_create: a decoder for one WATCH response body.  Uses
 * malloc'd json-c state: free it with kw_watch_decoder_free.  Its memory
 * lives in CurrentMemoryContext, which must outlive the transfer.
 */
KwWatchDecoder *
kw_watch_decoder_create(void)
{
	KwWatchDecoder *dec = palloc0(sizeof(KwWatchDecoder));

	dec->tok = json_tokener_new_ex(KW_MAX_DEPTH);
	if (dec->tok == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	initStringInfo(&dec->buf);
	dec->cxt = CurrentMemoryContext;
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
	pfree(dec->buf.data);
	if (dec->nul_at)
		pfree(dec->nul_at);
	pfree(dec);
}

/*
 * kw_watch_decoder_finish: after the server ended the stream cleanly,
 * whether it ended between events.  Returns false with a palloc'd *error
 * when an event was cut short (a truncated body: PROTOCOL 13).
 */
bool
kw_watch_decoder_finish(KwWatchDecoder *dec, char **error)
{
	if (dec->pending_bytes > 0 || dec->nhold > 0 || dec->escape)
	{
		*error = psprintf("watch stream ended inside an event (%zu bytes of it received)",
						  dec->pending_bytes + dec->nhold);
		return false;
	}
	return true;
}

/*
 * kw_watch_decoder_event_sanitized: whether the event being delivered to
 * the callback contained the JSON escape \u0000 (rewritten) or a lone
 * surrogate escape (decoded by json-c as U+FFFD), so that the object is
 * stored sanitized (README "Faults and bad input").
 */
bool
kw_watch_decoder_event_sanitized(KwWatchDecoder *dec)
{
	return dec->delivered_nul;
}

/* note_fix: remembers that the text at the end of dec->buf was sanitized. */
static void
note_fix(KwWatchDecoder *dec)
{
	if (dec->n_nul == dec->max_nul)
	{
		dec->max_nul = Max(8, dec->max_nul * 2);
		/* feed runs in the batch's context, reset at every flush */
		dec->nul_at = dec->nul_at ?
			repalloc(dec->nul_at, sizeof(int) * dec->max_nul) :
			MemoryContextAlloc(dec->cxt, sizeof(int) * dec->max_nul);
	}
	dec->nul_at[dec->n_nul++] = dec->buf.len;
}

/*
 * rewrite_nul: copies `len` bytes of the stream into dec->buf, rewriting
 * each JSON escape \u0000 inside a string as \\u0000 (the six characters
 * \u0000) and noting where, and noting lone surrogate escapes (json-c
 * decodes them as U+FFFD).  An escape split across chunks is held until
 * its end arrives.  Everything else passes unchanged; malformed JSON is
 * left for json-c to reject.
 */
static void
rewrite_nul(KwWatchDecoder *dec, const char *data, size_t len)
{
	size_t		run = 0;		/* start of the bytes not copied yet */

#define COPY_RUN(upto) \
	do { \
		if ((upto) > run) \
			appendBinaryStringInfo(&dec->buf, data + run, (upto) - run); \
		run = (upto); \
	} while (0)

	resetStringInfo(&dec->buf);
	dec->n_nul = 0;
	for (size_t i = 0; i < len; i++)
	{
		char		c = data[i];

		/* the common case: a byte that changes no state is copied in a run */
		if (dec->nhold == 0 && !dec->escape && !dec->pending_high &&
			c != '"' && c != '\\')
			continue;

		if (dec->nhold > 0)
		{
			dec->hold[dec->nhold++] = c;
			run = i + 1;
			if (dec->nhold == 6)
			{
				unsigned int v = hex4(dec->hold + 2);

				if (v >= 0xDC00 && v <= 0xDFFF && dec->pending_high)
					dec->pending_high = false;	/* a valid pair */
				else
				{
					if (dec->pending_high ||
						(v >= 0xDC00 && v <= 0xDFFF))
						note_fix(dec);	/* a lone surrogate */
					dec->pending_high = (v >= 0xD800 && v <= 0xDBFF);
				}
				if (v == 0)
				{
					note_fix(dec);
					appendBinaryStringInfo(&dec->buf, "\\\\u0000", 7);
				}
				else
					appendBinaryStringInfo(&dec->buf, dec->hold, 6);
				dec->nhold = 0;
			}
			continue;
		}
		if (dec->pending_high && !(dec->escape && c == 'u') &&
			!(dec->in_string && c == '\\' && !dec->escape))
		{
			COPY_RUN(i);
			note_fix(dec);		/* a high surrogate not followed by an escape */
			dec->pending_high = false;
		}
		if (!dec->in_string)
		{
			if (c == '"')
				dec->in_string = true;
			continue;
		}
		if (dec->escape)
		{
			dec->escape = false;
			if (c == 'u')
			{
				dec->hold[0] = '\\';
				dec->hold[1] = 'u';
				dec->nhold = 2;
				run = i + 1;
			}
			else
			{
				/* the held backslash, then this byte in the next run */
				appendStringInfoChar(&dec->buf, '\\');
				run = i;
			}
			continue;
		}
		if (c == '\\')
		{
			COPY_RUN(i);
			dec->escape = true;	/* held until the next byte says what it is */
			run = i + 1;
			continue;
		}
		if (c == '"')
			dec->in_string = false;
	}
	COPY_RUN(len);
#undef COPY_RUN
}

/* nul_between: whether a rewrite happened at an offset of buf in [from, to). */
static bool
nul_between(KwWatchDecoder *dec, size_t from, size_t to)
{
	for (int i = 0; i < dec->n_nul; i++)
		if ((size_t) dec->nul_at[i] >= from && (size_t) dec->nul_at[i] < to)
			return true;
	return false;
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
 * kw_watch_decoder_feed: decodes the next `inlen` bytes `in` of a watch
 * stream (after rewrite_nul), calling cb(arg, type, object) for each
 * complete event in order; the object (a json_object *) is only valid
 * during the call, kw_watch_decoder_event_sanitized tells whether it was
 * sanitized.  Returns false with a palloc'd *error when the stream is
 * malformed (bad JSON, an event without type/object, an unknown type, an
 * event over the limits): the caller must abandon the stream (PROTOCOL 13).
 */
bool
kw_watch_decoder_feed(KwWatchDecoder *dec, const char *in, size_t inlen,
					  KwWatchEventCallback cb, void *arg, char **error)
{
	size_t		off = 0;
	const char *data;
	size_t		len;

	rewrite_nul(dec, in, inlen);
	data = dec->buf.data;
	len = dec->buf.len;

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
				dec->event_nul |= nul_between(dec, off, len);
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
		dec->delivered_nul = dec->event_nul || nul_between(dec, off, off + used);
		dec->event_nul = false;
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
 *
 * A byte-level scanner over {"kind":..,"metadata":{..},"items":[{..},..]}.
 * It tracks nesting and strings only; each item's bytes are copied in runs
 * (not byte by byte) into `capture`, with the item's metadata.managedFields
 * member cut out on the way, and the item's identity (metadata.uid, name,
 * namespace, resourceVersion) picked up as it passes.  No JSON tree is ever
 * built for an item: PostgreSQL's jsonb input parses the text once, and
 * rejects what it cannot store (the caller handles that per item).
 *
 * Depths: 1 = the list object, 2 = the items array, 3 = an item,
 * 4 = the item's metadata object.
 * ---------------------------------------------------------------------
 */
#define KW_KEY_MAX 64

struct KwListDecoder
{
	int			depth;			/* nesting depth after the current byte */
	bool		in_string;
	bool		escape;
	bool		is_obj[KW_MAX_DEPTH + 2];	/* container at depth is an object */
	bool		expect_key[KW_MAX_DEPTH + 2];
	char		item_skip[80];	/* non-empty: the current item is skipped */
	char		key1[KW_KEY_MAX];	/* last key at depth 1 */
	char		key3[KW_KEY_MAX];	/* last key in the item */
	char		key4[KW_KEY_MAX];	/* last key in the item's metadata */
	StringInfoData str;			/* string being collected (keys, ids) */
	int			str_depth;		/* depth of that string; 0 = not collecting */
	bool		str_is_key;
	bool		in_items;
	bool		capturing;		/* inside an item */
	bool		capturing_meta; /* inside the list's metadata */
	bool		skipping;		/* inside metadata.managedFields */
	int			member_start;	/* capture length at the current depth-4 member */
	StringInfoData capture;
	StringInfoData meta;
	StringInfoData kind;
	/* the current item's identity; owned here, since an item may span chunks */
	StringInfoData id[4];		/* uid, name, namespace, resourceVersion */
	bool		has_id[4];
	int64		items;
	/* '{"apiVersion":..,"kind":..,' written before each item's members */
	char	   *type_prefix;
	int			type_prefix_len;
	char	   *api_version;	/* NULL: items are left as they are */
};

/*
 * kw_api_version_string: an object's apiVersion for a resource of
 * `api_group` ("" for the core group) at `version`: "group/version", or
 * "version" for the core group (k8s.io/apimachinery/pkg/runtime/schema
 * GroupVersion.String).  palloc'd.
 */
char *
kw_api_version_string(const char *api_group, const char *version)
{
	return api_group[0] ? psprintf("%s/%s", api_group, version) : pstrdup(version);
}

/* set_type_prefix: '{"apiVersion":..,"kind":..,' for each item. */
static void
set_type_prefix(KwListDecoder *dec, const char *kind)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(dec));
	StringInfoData p;

	initStringInfo(&p);
	appendStringInfoString(&p, "{\"apiVersion\":");
	escape_json(&p, dec->api_version);
	appendStringInfoString(&p, ",\"kind\":");
	escape_json(&p, kind);
	appendStringInfoChar(&p, ',');
	dec->type_prefix = p.data;
	dec->type_prefix_len = p.len;
	MemoryContextSwitchTo(old);
}

/*
 * kw_list_decoder_create: a decoder for one LIST response body (one page).
 * A LIST carries apiVersion and kind once, on the list, and none on its
 * items (k8s.io/apimachinery/pkg/runtime/serializer/versioning writes them
 * only on top-level objects): with `api_version` non-NULL, each item gets
 * it and `kind` as its first members, so that listed and watched objects
 * have one shape.  A NULL `kind` is taken from the list's own kind
 * ("PodList" -> "Pod": k8s.io/apimachinery/pkg/runtime/scheme.go names
 * every list type <Kind>List), for live tables whose kind nobody recorded.
 * Members the item carries itself come later and win (a later duplicate
 * key wins in jsonb, PostgreSQL docs 8.14).  Free with kw_list_decoder_free.
 */
KwListDecoder *
kw_list_decoder_create(const char *api_version, const char *kind)
{
	KwListDecoder *dec = palloc0(sizeof(KwListDecoder));

	if (api_version && api_version[0])
	{
		dec->api_version = pstrdup(api_version);
		if (kind && kind[0])
			set_type_prefix(dec, kind);
	}

	initStringInfo(&dec->str);
	initStringInfo(&dec->capture);
	initStringInfo(&dec->meta);
	initStringInfo(&dec->kind);
	for (int i = 0; i < 4; i++)
		initStringInfo(&dec->id[i]);
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
	pfree(dec->str.data);
	pfree(dec->capture.data);
	pfree(dec->meta.data);
	pfree(dec->kind.data);
	for (int i = 0; i < 4; i++)
		pfree(dec->id[i].data);
	if (dec->type_prefix)
		pfree(dec->type_prefix);
	if (dec->api_version)
		pfree(dec->api_version);
	pfree(dec);
}

/* string_done: a string at str_depth ended; file it as a key or a value. */
static void
string_done(KwListDecoder *dec)
{
	const char *s = dec->str.data;
	int			d = dec->str_depth;

	if (dec->str_is_key)
	{
		char	   *dst = d == 1 ? dec->key1 : d == 3 ? dec->key3 : d == 4 ? dec->key4 : NULL;

		if (dst)
			strlcpy(dst, s, KW_KEY_MAX);
		return;
	}
	if (d == 1 && strcmp(dec->key1, "kind") == 0)
	{
		resetStringInfo(&dec->kind);
		appendStringInfoString(&dec->kind, s);
	}
	else if (d == 4 && dec->capturing && strcmp(dec->key3, "metadata") == 0)
	{
		static const char *const names[4] = {"uid", "name", "namespace", "resourceVersion"};

		for (int k = 0; k < 4; k++)
		{
			if (strcmp(dec->key4, names[k]) == 0)
			{
				resetStringInfo(&dec->id[k]);
				appendStringInfoString(&dec->id[k], s);
				dec->has_id[k] = true;
			}
		}
	}
}

/* emit_item: hands the captured item to cb; pointers valid during the call. */
static bool
emit_item(KwListDecoder *dec, KwListItemCallback cb, void *arg)
{
	KwListItem	item;

	dec->items++;
	if (dec->type_prefix && !dec->item_skip[0])
	{
		/* an item without members: the prefix's comma must go */
		int			at = dec->type_prefix_len;

		while (at < dec->capture.len && strchr(" \t\r\n", dec->capture.data[at]))
			at++;
		if (at < dec->capture.len && dec->capture.data[at] == '}')
		{
			dec->capture.len = dec->type_prefix_len - 1;
			appendStringInfoChar(&dec->capture, '}');
		}
	}
	item.uid = dec->has_id[0] ? dec->id[0].data : NULL;
	item.name = dec->has_id[1] ? dec->id[1].data : NULL;
	item.namespace = dec->has_id[2] && dec->id[2].len > 0 ? dec->id[2].data : NULL;
	item.resource_version = dec->has_id[3] ? dec->id[3].data : NULL;
	item.json = dec->capture.data;
	item.json_len = dec->capture.len;
	item.skip_reason = dec->item_skip[0] ? dec->item_skip : NULL;
	cb(arg, &item);
	resetStringInfo(&dec->capture);
	return true;
}

/*
 * The chunk being fed: its bytes, and the start of those not yet copied.
 * Bytes are copied into capture (or meta) in runs, not byte by byte: a run
 * is flushed where the framer's state changes what happens to the bytes
 * after it, and restarts past bytes that are dropped.
 */
typedef struct ListChunk
{
	const char *data;
	size_t		run;			/* start of the bytes not yet copied */
} ListChunk;

/*
 * flush_run: copies the run up to `upto` (exclusive) into the item being
 * captured (unless inside managedFields or a skipped item) or into the
 * list's metadata, and starts the next run there.
 */
static inline void
flush_run(KwListDecoder *dec, ListChunk *ch, size_t upto)
{
	if (dec->capturing && !dec->skipping && !dec->item_skip[0] && upto > ch->run)
		appendBinaryStringInfo(&dec->capture, ch->data + ch->run, upto - ch->run);
	else if (dec->capturing_meta && upto > ch->run)
		appendBinaryStringInfo(&dec->meta, ch->data + ch->run, upto - ch->run);
	ch->run = upto;
}

/*
 * skip_item: the current item cannot be stored; drops what was captured of
 * it, so that it is handed over with the reason (KwListItem.skip_reason) and
 * no text, and the list goes on.
 */
static void skip_item(KwListDecoder *dec, const char *fmt,...) pg_attribute_printf(2, 3);

static void
skip_item(KwListDecoder *dec, const char *fmt,...)
{
	va_list		ap;

	resetStringInfo(&dec->capture);
	dec->member_start = 0;
	va_start(ap, fmt);
	vsnprintf(dec->item_skip, sizeof(dec->item_skip), fmt, ap);
	va_end(ap);
}

/*
 * string_start: an opening quote at depth d (di: d capped for the arrays).
 * Keys are collected at depths 1/3/4 and values at 1 and 4.
 */
static inline void
string_start(KwListDecoder *dec, int d, int di)
{
	dec->in_string = true;
	dec->str_is_key = dec->is_obj[di] && dec->expect_key[di];
	if (d == 1 || (dec->capturing && d == 3 && dec->str_is_key) ||
		(dec->capturing && d == 4 && strcmp(dec->key3, "metadata") == 0))
	{
		dec->str_depth = d;
		resetStringInfo(&dec->str);
	}
}

/*
 * string_end: the closing quote at i, depth d.  A collected string is filed
 * (string_done); when it was the key of the item's metadata.managedFields,
 * the member is cut out of the capture from its start, and the bytes up to
 * its end are skipped (see member_end and close_container).
 */
static void
string_end(KwListDecoder *dec, ListChunk *ch, size_t i, int d)
{
	dec->in_string = false;
	if (dec->str_depth == 0)
		return;
	string_done(dec);
	dec->str_depth = 0;
	/* the key of the managedFields member: cut it out */
	if (dec->str_is_key && d == 4 && dec->capturing &&
		!dec->item_skip[0] &&
		strcmp(dec->key3, "metadata") == 0 &&
		strcmp(dec->key4, "managedFields") == 0)
	{
		flush_run(dec, ch, i + 1);
		dec->capture.len = dec->member_start;
		dec->capture.data[dec->capture.len] = '\0';
		dec->skipping = true;
	}
}

/*
 * item_begin: an element of "items" opens at i: its capture starts there,
 * with the type prefix in place of its opening brace, and its identity is
 * forgotten.
 */
static void
item_begin(KwListDecoder *dec, ListChunk *ch, size_t i)
{
	flush_run(dec, ch, i);
	dec->capturing = true;
	dec->item_skip[0] = '\0';
	resetStringInfo(&dec->capture);
	/* no kind given: the list's, less "List" (read before "items") */
	if (dec->api_version && !dec->type_prefix &&
		dec->kind.len > 4 &&
		strcmp(dec->kind.data + dec->kind.len - 4, "List") == 0)
		set_type_prefix(dec, pnstrdup(dec->kind.data, dec->kind.len - 4));
	if (dec->type_prefix)
	{
		/* the prefix replaces the item's opening brace */
		appendBinaryStringInfo(&dec->capture, dec->type_prefix,
							   dec->type_prefix_len);
		ch->run = i + 1;
	}
	memset(dec->has_id, 0, sizeof(dec->has_id));
	dec->key3[0] = '\0';
}

/*
 * open_container: '{' or '[' (c) at i, depth d.  Inside an item, one at
 * KW_MAX_DEPTH makes the item skipped, and below it only depth is counted;
 * elsewhere the list is too deep.  The list's "items" array, its
 * "metadata" object (captured for kw_list_decoder_finish) and each item
 * are noted as they open; so is the first member of an item's metadata.
 * Returns false with a palloc'd *error when the body is not a JSON object,
 * an item is an array, or the list itself is too deep.
 */
static bool
open_container(KwListDecoder *dec, ListChunk *ch, size_t i, char c, int d,
			   char **error)
{
	if (d == 0 && c != '{')
	{
		*error = pstrdup("list response is not a JSON object");
		return false;
	}
	if (d >= KW_MAX_DEPTH)
	{
		if (!dec->capturing)
		{
			*error = psprintf("list response nested deeper than %d levels",
							  KW_MAX_DEPTH);
			return false;
		}
		/* an item too deep to store: skip it, go on with the list */
		if (!dec->item_skip[0])
		{
			flush_run(dec, ch, i);
			skip_item(dec, "nested deeper than %d levels", KW_MAX_DEPTH);
		}
		dec->depth = d + 1;
		return true;
	}
	if (d == 1 && c == '[' && strcmp(dec->key1, "items") == 0)
		dec->in_items = true;
	else if (d == 1 && c == '{' && strcmp(dec->key1, "metadata") == 0)
	{
		flush_run(dec, ch, i);
		dec->capturing_meta = true;
		resetStringInfo(&dec->meta);
	}
	else if (d == 2 && dec->in_items)
	{
		if (c != '{')
		{
			*error = pstrdup("list item is not a JSON object");
			return false;
		}
		item_begin(dec, ch, i);
	}
	dec->depth = d + 1;
	dec->is_obj[d + 1] = (c == '{');
	dec->expect_key[d + 1] = (c == '{');
	if (d + 1 == 4 && dec->capturing && strcmp(dec->key3, "metadata") == 0)
	{
		/* the item's metadata: its first member starts here */
		flush_run(dec, ch, i + 1);
		dec->member_start = dec->capture.len;
		dec->key4[0] = '\0';
	}
	return true;
}

/*
 * close_container: '}' or ']' at i, depth d.  An item that closes is handed
 * to cb (emit_item); the list's metadata and items array are noted as they
 * close.  Returns false with a palloc'd *error when more containers close
 * than opened.
 */
static bool
close_container(KwListDecoder *dec, ListChunk *ch, size_t i, int d,
				KwListItemCallback cb, void *arg, char **error)
{
	if (d <= 0)
	{
		*error = pstrdup("unbalanced list response");
		return false;
	}
	if (d == 4 && dec->skipping)
	{
		/* managedFields was the last member: drop its comma */
		dec->skipping = false;
		ch->run = i;
		if (dec->capture.len > 0 &&
			dec->capture.data[dec->capture.len - 1] == ',')
			dec->capture.data[--dec->capture.len] = '\0';
	}
	dec->depth = d - 1;
	if (d == 3 && dec->capturing)
	{
		flush_run(dec, ch, i + 1);
		dec->capturing = false;
		/* grown past the limit by its last run (a string member at its end) */
		if (!dec->item_skip[0] && dec->capture.len > KW_MAX_OBJECT_BYTES)
			skip_item(dec, "larger than %d MB", KW_MAX_OBJECT_BYTES / (1024 * 1024));
		if (!emit_item(dec, cb, arg))
			return false;
	}
	else if (d == 2 && dec->capturing_meta)
	{
		flush_run(dec, ch, i + 1);
		dec->capturing_meta = false;
	}
	else if (d == 2 && dec->in_items)
		dec->in_items = false;
	return true;
}

/*
 * member_end: a comma at i between the members of an item's metadata: the
 * end of managedFields (its bytes and this comma are dropped), or of any
 * other member (the next one starts after the comma).
 */
static void
member_end(KwListDecoder *dec, ListChunk *ch, size_t i)
{
	if (dec->skipping)
	{
		/* end of managedFields: resume after its comma */
		dec->skipping = false;
		ch->run = i + 1;
	}
	else
	{
		flush_run(dec, ch, i + 1);
		dec->member_start = dec->capture.len;
	}
}

/*
 * kw_list_decoder_feed: scans the next `len` bytes of a LIST body, calling
 * cb(arg, item) for each complete element of "items" (text and identity
 * valid during the call only).  An item deeper than KW_MAX_DEPTH or larger
 * than KW_MAX_OBJECT_BYTES is handed over with skip_reason set and no text.
 * Returns false with a palloc'd *error when the body is not a JSON object,
 * an item is an array, or the list itself is too deep; scalar items (never
 * sent by Kubernetes) are ignored.
 *
 * The loop is the hot path: inside a string it only follows escapes, up to
 * the closing quote (string_end); outside, quotes start strings
 * (string_start), brackets open and close containers (open_container,
 * close_container), and commas end members (member_end).
 */
bool
kw_list_decoder_feed(KwListDecoder *dec, const char *data, size_t len,
					 KwListItemCallback cb, void *arg, char **error)
{
	ListChunk	ch = {.data = data, .run = 0};

	for (size_t i = 0; i < len; i++)
	{
		char		c = data[i];
		int			d = dec->depth;
		/* below KW_MAX_DEPTH only depth is counted (inside a skipped item) */
		int			di = Min(d, KW_MAX_DEPTH + 1);

		if (dec->in_string)
		{
			/*
			 * Most of a list's bytes are string contents, which matter only
			 * at a quote or a backslash, or while a key is being kept: skip
			 * to the next quote or backslash (the loop's i++ lands on it).
			 */
			if (!dec->escape && c != '"' && c != '\\' &&
				!(dec->str_depth && dec->str.len < KW_KEY_MAX * 4))
			{
				size_t		j = i + 1;

				while (j < len && data[j] != '"' && data[j] != '\\')
					j++;
				i = j - 1;
				continue;
			}
			if (dec->escape)
				dec->escape = false;
			else if (c == '\\')
				dec->escape = true;
			else if (c == '"')
			{
				string_end(dec, &ch, i, d);
				continue;
			}
			if (dec->str_depth && dec->str.len < KW_KEY_MAX * 4)
				appendStringInfoChar(&dec->str, c);
			continue;
		}

		switch (c)
		{
			case '"':
				string_start(dec, d, di);
				break;
			case '{':
			case '[':
				if (!open_container(dec, &ch, i, c, d, error))
					return false;
				break;
			case '}':
			case ']':
				if (!close_container(dec, &ch, i, d, cb, arg, error))
					return false;
				break;
			case ':':
				dec->expect_key[di] = false;
				break;
			case ',':
				if (dec->is_obj[di])
					dec->expect_key[di] = true;
				if (d == 4 && dec->capturing && strcmp(dec->key3, "metadata") == 0)
					member_end(dec, &ch, i);
				break;
			default:
				break;
		}
		/* too large to store: skip the item, go on with the list */
		if (dec->capturing && dec->capture.len > KW_MAX_OBJECT_BYTES)
			skip_item(dec, "larger than %d MB", KW_MAX_OBJECT_BYTES / (1024 * 1024));
	}
	flush_run(dec, &ch, len);
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
	rv = kw_json_get_string(meta, "resourceVersion");
	cont = kw_json_get_string(meta, "continue");
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
