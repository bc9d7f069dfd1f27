/*-------------------------------------------------------------------------
 *
 * decode.c
 *		JSON from the API server -> Kubernetes objects ready to store.
 *
 * One byte-level framer, fed raw bytes exactly as they arrive, for both
 * kinds of body:
 *
 *	- a LIST: the top-level {"kind":..,"metadata":{..},"items":[..]} object,
 *	  each element of "items" cut out on its own, so memory never depends on
 *	  the list's size, even when a cache-served list ignores `limit`
 *	  (PROTOCOL 5, 6);
 *
 *	- a WATCH stream (event mode): each {"type":..,"object":{..}} event, its
 *	  object cut out as a list item is, an event split across chunks or
 *	  several in one chunk alike (PROTOCOL 12).  Malformed JSON or an
 *	  unknown event type ends the stream (PROTOCOL 13).
 *
 * Either way the object's metadata.managedFields is dropped and its
 * identity picked up as the bytes pass; no JSON tree is built for it.
 * The dropped managedFields bytes are kept aside and summarized (who
 * changed the object, for history: KwListItem.managers, managers_summary)
 * by a scan of the same kind.
 * kw_sanitize_json makes its text storable as jsonb.
 *
 * Limits (as PostgreSQL's own libcurl client bounds its inputs): one object
 * or event may be at most KW_MAX_OBJECT_BYTES and KW_MAX_DEPTH deep.  A
 * LIST item over a limit is skipped (KwListItem.skip_reason); a watch event
 * over a limit makes the stream malformed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <json-c/json.h>

#include "common/jsonapi.h"
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
 * inside a watch event or a list.  The framer keeps two flags a level;
 * PostgreSQL's JSON parser (a watch event's check, and jsonb input) takes
 * 10000 levels within the default max_stack_depth.
 */
#define KW_MAX_DEPTH (10000 + 16)
/* Below KW_MAX_DEPTH only depth is counted, up to this (the int's bound). */
#define KW_MAX_DEPTH_COUNTED (1 << 30)
/* Depths is_obj/expect_key hold at first (a pod nests about 12 levels). */
#define KW_DEPTH_FLAGS_INITIAL 64
/*
 * The first size of the decoder's short strings (keys, an item's identity,
 * the event type), which a decoder keeps for as long as its watch runs,
 * and how much capture buffer a watch's decoder keeps between events.
 */
#define KW_SMALL_STRING 64
#define KW_EVENT_CAPTURE_KEEP (64 * 1024)

/*
 * small_string_init: initStringInfo with a first allocation of `size`
 * bytes instead of 1 kB (stringinfo.c's enlargeStringInfo doubles it as
 * needed, as for any StringInfo).
 */
static void
small_string_init(StringInfo s, int size)
{
	s->data = palloc(size);
	s->maxlen = size;
	resetStringInfo(s);
}

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

/*
 * Where a watch event's own members are (event mode, depth 1): the framer
 * checks the envelope's grammar as it goes, since it only tracks nesting
 * inside the members' values.
 */
typedef enum KwEnvelope
{
	KW_ENV_FIRST,				/* after '{': a key or '}' */
	KW_ENV_KEY,					/* after ',': a key */
	KW_ENV_COLON,				/* after a key */
	KW_ENV_VALUE,				/* after ':' */
	KW_ENV_NEXT					/* after a value: ',' or '}' */
} KwEnvelope;

struct KwListDecoder
{
	int			depth;			/* nesting depth after the current byte */
	bool		in_string;
	bool		escape;
	/*
	 * Per depth: the container there is an object; a key comes next.  They
	 * grow on demand (depth_flags_grow) up to KW_MAX_DEPTH + 2 entries: a
	 * decoder lives as long as its watch, and 20 kB of flags a watch, for
	 * depths real objects never reach, were a fifth of an idle watch's
	 * memory at fleet sizes (test/bench/fleet.py).
	 */
	bool	   *is_obj;
	bool	   *expect_key;
	int			flags_len;		/* entries in each */
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
	StringInfoData managed;		/* the item's managedFields member's bytes after its key */
	bool		keep_managers;	/* summarize them (kw_list_decoder_keep_managers) */
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
	/* event mode (a WATCH stream, see kw_watch_decoder_create) */
	bool		events;
	StringInfoData evtype;		/* the current event's "type" */
	bool		has_object;		/* the current event's "object" was seen */
	KwEnvelope	envelope;		/* where the event's members are */
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

	dec->flags_len = KW_DEPTH_FLAGS_INITIAL;
	dec->is_obj = palloc0(dec->flags_len * sizeof(bool));
	dec->expect_key = palloc0(dec->flags_len * sizeof(bool));
	small_string_init(&dec->str, KW_SMALL_STRING);
	initStringInfo(&dec->capture);
	small_string_init(&dec->managed, KW_SMALL_STRING);
	small_string_init(&dec->meta, KW_SMALL_STRING);
	small_string_init(&dec->kind, KW_SMALL_STRING);
	for (int i = 0; i < 4; i++)
		small_string_init(&dec->id[i], KW_SMALL_STRING);
	return dec;
}

/*
 * kw_list_decoder_keep_managers: the items `dec` hands over from now on
 * carry the summary of their managedFields (KwListItem.managers; NULL
 * without this call, which saves a scan of those bytes: live tables).
 */
void
kw_list_decoder_keep_managers(KwListDecoder *dec)
{
	dec->keep_managers = true;
}

/*
 * kw_list_decoder_free: frees a decoder; accepts NULL.
 */
void
kw_list_decoder_free(KwListDecoder *dec)
{
	if (dec == NULL)
		return;
	pfree(dec->is_obj);
	pfree(dec->expect_key);
	pfree(dec->str.data);
	pfree(dec->capture.data);
	pfree(dec->managed.data);
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

static void skip_item(KwListDecoder *dec, const char *fmt,...) pg_attribute_printf(2, 3);

/*
 * string_done: a string at str_depth ended; file it as a key or a value.
 * The framer reads an item's member names and identity raw, so that an item
 * it would read otherwise than jsonb input is skipped: a member name with
 * an escape at its top level or in its metadata, an identity value longer
 * than it keeps.  Inside metadata.managedFields (cut out) nothing is read.
 */
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
		if (dec->capturing && (d == 3 || d == 4) && !dec->skipping &&
			!dec->item_skip[0] && strchr(s, '\\') != NULL)
			skip_item(dec, "has a member name with an escape at its top level or in its metadata");
		return;
	}
	if (d == 1 && dec->events)
	{
		if (strcmp(dec->key1, "type") == 0)
		{
			resetStringInfo(&dec->evtype);
			appendStringInfoString(&dec->evtype, s);
		}
	}
	else if (d == 1 && strcmp(dec->key1, "kind") == 0)
	{
		resetStringInfo(&dec->kind);
		appendStringInfoString(&dec->kind, s);
	}
	else if (d == 4 && dec->capturing && !dec->skipping &&
			 strcmp(dec->key3, "metadata") == 0)
	{
		static const char *const names[4] = {"uid", "name", "namespace", "resourceVersion"};

		for (int k = 0; k < 4; k++)
		{
			if (strcmp(dec->key4, names[k]) == 0)
			{
				if (dec->str.len >= KW_KEY_MAX * 4 && !dec->item_skip[0])
					skip_item(dec, "has a metadata.%s of %d bytes or more", names[k],
							  KW_KEY_MAX * 4);
				resetStringInfo(&dec->id[k]);
				appendStringInfoString(&dec->id[k], s);
				dec->has_id[k] = true;
			}
		}
	}
}

/* Summaries of managedFields larger than this are not made (KwListItem.managers). */
#define KW_MAX_MANAGED_BYTES (1024 * 1024)

/*
 * managers_summary: the summary of an item's metadata.managedFields
 * (KwListItem.managers) from `managed`, the member's bytes after its key
 * (": [...]"), as JSON text, palloc'd: an array of one object per entry,
 * in the entries' order, with the entry's "manager", "operation", "time"
 * and "subresource" members that are strings (apimachinery meta/v1
 * ManagedFieldsEntry; fieldsV1, the fields themselves, left out), their
 * text copied as the server wrote it (escapes kept), then made storable
 * as jsonb (kw_sanitize_json).  A scan, not a parse: about 10 us for a
 * pod's three entries (3.4 kB) where json-c's parse took 60 to 90 (2
 * cores, under load).  NULL when the item had none, or
 * they are no array of objects, contain a raw control character, or are
 * larger than KW_MAX_MANAGED_BYTES.
 */
static char *
managers_summary(StringInfo managed)
{
	static const char *const keys[] = {"manager", "operation", "time", "subresource"};
	const char *p = managed->data;
	const char *end = managed->data + managed->len;
	StringInfoData out;
	int			depth = 0;
	bool		value = false;	/* after a ':' in an entry */
	int			want = -1;		/* the entry's member being read: index in keys */
	bool		first_member = true;
	bool		first_entry = true;
	int			len;

	if (managed->len == 0 || managed->len > KW_MAX_MANAGED_BYTES)
		return NULL;
	while (p < end && (*p == ':' || *p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	if (p == end || *p != '[')
		return NULL;
	initStringInfo(&out);
	for (; p < end; p++)
	{
		char		c = *p;

		if (c == '"')
		{
			const char *q = p + 1;

			while (q < end && *q != '"')
			{
				if ((unsigned char) *q < 0x20)
					goto bad;
				q += *q == '\\' ? 2 : 1;
			}
			if (q >= end)
				goto bad;
			if (depth == 2 && !value)
			{
				want = -1;
				for (int k = 0; k < lengthof(keys); k++)
					if ((size_t) (q - p - 1) == strlen(keys[k]) && memcmp(p + 1, keys[k], q - p - 1) == 0)
						want = k;
			}
			else if (depth == 2 && want >= 0)
			{
				appendStringInfo(&out, "%s\"%s\":", first_member ? "" : ",", keys[want]);
				appendBinaryStringInfo(&out, p, q - p + 1);
				first_member = false;
				want = -1;
			}
			p = q;
		}
		else if (c == '{' || c == '[')
		{
			depth++;
			if (depth == 1 && c != '[')
				goto bad;
			if (depth == 2)
			{
				if (c != '{')
					goto bad;
				appendStringInfoString(&out, first_entry ? "[{" : ",{");
				first_entry = false;
				first_member = true;
				value = false;
				want = -1;
			}
		}
		else if (c == '}' || c == ']')
		{
			if (depth == 2)
				appendStringInfoChar(&out, '}');
			if (--depth == 0)
				break;
		}
		else if (depth == 2 && c == ':')
			value = true;
		else if (depth == 2 && c == ',')
		{
			value = false;
			want = -1;
		}
	}
	if (depth != 0)
		goto bad;
	if (first_entry)
		appendStringInfoChar(&out, '[');
	appendStringInfoChar(&out, ']');
	len = out.len;
	(void) kw_sanitize_json(&out.data, &len);
	return out.data;
bad:
	pfree(out.data);
	return NULL;
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
	item.event_type = dec->events && dec->evtype.len > 0 ? dec->evtype.data : NULL;
	item.has_object = dec->has_object;
	item.sanitized = false;
	item.managers = dec->keep_managers && !dec->item_skip[0] ? managers_summary(&dec->managed) : NULL;
	cb(arg, &item);
	resetStringInfo(&dec->capture);
	resetStringInfo(&dec->managed);
	if (item.managers)
		pfree(item.managers);
	/*
	 * A watch's decoder lives as long as the watch: after a big object it
	 * gives the capture (and managedFields) buffers back, so that an idle
	 * watch does not keep the largest event it ever saw (a list's decoder
	 * keeps them for the next item, and is freed with the list).
	 */
	if (dec->events && (dec->capture.maxlen > KW_EVENT_CAPTURE_KEEP ||
						dec->managed.maxlen > KW_EVENT_CAPTURE_KEEP))
	{
		/*
		 * in the decoder's own context: the feed runs in the watch's batch
		 * context, which is reset after each batch
		 */
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(dec));

		if (dec->capture.maxlen > KW_EVENT_CAPTURE_KEEP)
		{
			pfree(dec->capture.data);
			initStringInfo(&dec->capture);
		}
		if (dec->managed.maxlen > KW_EVENT_CAPTURE_KEEP)
		{
			pfree(dec->managed.data);
			small_string_init(&dec->managed, KW_SMALL_STRING);
		}
		MemoryContextSwitchTo(old);
	}
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
 * append_managed: bytes of the item's managedFields member, kept for its
 * summary (managers_summary) up to a little past KW_MAX_MANAGED_BYTES.
 */
static inline void
append_managed(KwListDecoder *dec, const char *data, size_t n)
{
	if (dec->keep_managers && dec->managed.len <= KW_MAX_MANAGED_BYTES)
		appendBinaryStringInfo(&dec->managed, data, Min(n, (size_t) KW_MAX_MANAGED_BYTES + 1));
}

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
	else if (dec->capturing && dec->skipping && !dec->item_skip[0] && upto > ch->run)
		append_managed(dec, ch->data + ch->run, upto - ch->run);
	else if (dec->capturing_meta && upto > ch->run)
		appendBinaryStringInfo(&dec->meta, ch->data + ch->run, upto - ch->run);
	ch->run = upto;
}

/*
 * skip_item: the current item cannot be stored; drops what was captured of
 * it, so that it is handed over with the reason (KwListItem.skip_reason) and
 * no text, and the list goes on.
 */
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
 * depth_flags_grow: makes is_obj and expect_key hold depth `di` (at most
 * KW_MAX_DEPTH + 1), doubling them; new entries are false, as palloc0'd
 * ones were.
 */
static pg_noinline void
depth_flags_grow(KwListDecoder *dec, int di)
{
	int			len = dec->flags_len;

	while (len <= di)
		len *= 2;
	len = Min(len, KW_MAX_DEPTH + 2);
	dec->is_obj = repalloc(dec->is_obj, len * sizeof(bool));
	dec->expect_key = repalloc(dec->expect_key, len * sizeof(bool));
	memset(dec->is_obj + dec->flags_len, 0, len - dec->flags_len);
	memset(dec->expect_key + dec->flags_len, 0, len - dec->flags_len);
	dec->flags_len = len;
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
	resetStringInfo(&dec->managed);
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
			*error = psprintf("%s nested deeper than %d levels",
							  dec->events ? "watch event" : "list response",
							  KW_MAX_DEPTH);
			return false;
		}
		if (d >= KW_MAX_DEPTH_COUNTED)
		{
			*error = psprintf("list response nested deeper than %d levels",
							  KW_MAX_DEPTH_COUNTED);
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
	if (dec->events)
	{
		if (d == 1 && c == '{' && strcmp(dec->key1, "object") == 0)
		{
			/* the event's object is framed as a list's item, one level down */
			item_begin(dec, ch, i);
			dec->has_object = true;
			d = 2;
		}
	}
	else if (d == 1 && c == '[' && strcmp(dec->key1, "items") == 0)
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
	if (unlikely(d + 1 >= dec->flags_len))
		depth_flags_grow(dec, d + 1);
	dec->is_obj[d + 1] = (c == '{');
	dec->expect_key[d + 1] = (c == '{');
	if (d + 1 == 4 && dec->capturing && strcmp(dec->key3, "metadata") == 0)
	{
		/* the item's metadata: its first member starts here */
		flush_run(dec, ch, i + 1);
		dec->member_start = dec->capture.len;
		dec->key4[0] = '\0';
		/* a later "metadata" member wins in jsonb: so it does here */
		memset(dec->has_id, 0, sizeof(dec->has_id));
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
		if (dec->capturing && !dec->item_skip[0] && i > ch->run)
			append_managed(dec, ch->data + ch->run, i - ch->run);
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
		if (dec->events)
			dec->depth = 1;		/* back in the event, which emits at its end */
		else if (!emit_item(dec, cb, arg))
			return false;
	}
	else if (dec->events)
	{
		if (d == 1 && !emit_item(dec, cb, arg))
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
		if (dec->capturing && !dec->item_skip[0] && i > ch->run)
			append_managed(dec, ch->data + ch->run, i - ch->run);
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
 * envelope_byte: in event mode, a byte `c` outside strings at depth d <= 1,
 * between events (d = 0: whitespace, or the '{' that begins one) or among
 * an event's own members (d = 1: "key": value, ...), whose grammar it
 * checks (KwEnvelope); a member's value may be a string, an object or an
 * array, as the API server writes them.  Returns false with a palloc'd
 * *error when the byte breaks the grammar (PROTOCOL 13).
 */
static bool
envelope_byte(KwListDecoder *dec, char c, int d, char **error)
{
	KwEnvelope	e = dec->envelope;
	bool		ok;

	if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		return true;
	if (d == 0)
	{
		if (c != '{')
		{
			*error = psprintf("malformed JSON in watch stream: byte 0x%02x where an event should begin",
							  (unsigned char) c);
			return false;
		}
		resetStringInfo(&dec->evtype);
		dec->has_object = false;
		dec->item_skip[0] = '\0';
		dec->key1[0] = '\0';
		dec->envelope = KW_ENV_FIRST;
		return true;
	}
	switch (c)
	{
		case '"':
			ok = (e == KW_ENV_FIRST || e == KW_ENV_KEY || e == KW_ENV_VALUE);
			dec->envelope = e == KW_ENV_VALUE ? KW_ENV_NEXT : KW_ENV_COLON;
			break;
		case ':':
			ok = (e == KW_ENV_COLON);
			dec->envelope = KW_ENV_VALUE;
			break;
		case ',':
			ok = (e == KW_ENV_NEXT);
			dec->envelope = KW_ENV_KEY;
			break;
		case '{':
		case '[':
			ok = (e == KW_ENV_VALUE);
			dec->envelope = KW_ENV_NEXT;
			break;
		case '}':
			ok = (e == KW_ENV_FIRST || e == KW_ENV_NEXT);
			break;
		default:
			ok = false;
			break;
	}
	if (!ok)
		*error = psprintf("malformed JSON in watch stream: unexpected byte 0x%02x among an event's members",
						  (unsigned char) c);
	return ok;
}

/*
 * event_over_limit: in event mode, the event's object cannot be stored
 * (dec->item_skip says why): the stream is malformed at once, not at the
 * event's end, so that neither its text nor its depth grows any further.
 * Returns false with a palloc'd *error.
 */
static bool
event_over_limit(KwListDecoder *dec, char **error)
{
	*error = psprintf("watch event %s", dec->item_skip);
	return false;
}

/*
 * string_run_end: the index of the first quote or backslash in
 * data[i..len), or `len`: how far a string's contents run before anything
 * in them matters to the framer.
 */
static inline size_t
string_run_end(const char *data, size_t i, size_t len)
{
	while (i < len && data[i] != '"' && data[i] != '\\')
		i++;
	return i;
}

/*
 * skip_deep: runs from byte i (outside a string, at depth >= `stop_depth`)
 * over the bytes of an item the framer only has to count: nesting and
 * strings below what it reads (an item's members' values other than its
 * metadata's own, managedFields included), which are most of a pod's bytes.
 * It keeps depth, and in_string and escape when the chunk ends inside a
 * string; is_obj and expect_key are not kept down there, since nothing
 * reads them below stop_depth (open_container sets them again for a
 * container the full loop opens).  It stops before a byte the full loop
 * must see: one that closes the container at depth `stop_depth` or opens
 * one at KW_MAX_DEPTH.  Returns the index of that byte, or `len`.
 */
static inline size_t
skip_deep(KwListDecoder *dec, const char *data, size_t i, size_t len, int stop_depth)
{
	int			d = dec->depth;

	for (; i < len; i++)
	{
		char		c = data[i];

		if (c == '"')
		{
			/* a string: up to its closing quote, escapes followed */
			i = string_run_end(data, i + 1, len);
			while (i + 1 < len && data[i] == '\\')
				i = string_run_end(data, i + 2, len);
			if (i >= len || data[i] != '"')
			{
				/* the chunk ends inside the string, maybe after a backslash */
				dec->in_string = true;
				dec->escape = (i < len);
				i = len;
				break;
			}
		}
		else if (c == '{' || c == '[')
		{
			if (d >= KW_MAX_DEPTH)
				break;
			d++;
		}
		else if (c == '}' || c == ']')
		{
			if (d <= stop_depth)
				break;
			d--;
		}
	}
	dec->depth = d;
	return i;
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

		/* skip_deep may have left the loop deeper than the flags reach */
		if (unlikely(di >= dec->flags_len))
			depth_flags_grow(dec, di);

		if (dec->in_string)
		{
			/* room left in a string being kept (a key, an identity) */
			int			room = dec->str_depth ? KW_KEY_MAX * 4 - dec->str.len : 0;

			/*
			 * Most of a list's bytes are string contents, which matter only
			 * at a quote or a backslash: a run up to the next one is passed
			 * over whole, and kept (up to `room`) in one copy when the
			 * string is; the loop's i++ then lands on that quote or
			 * backslash.
			 */
			if (!dec->escape && c != '"' && c != '\\')
			{
				size_t		j = string_run_end(data, i + 1, len);

				if (room > 0)
					appendBinaryStringInfo(&dec->str, data + i, (int) Min((size_t) room, j - i));
				i = j - 1;
				continue;
			}
			if (dec->escape)
				dec->escape = false;
			else if (c == '\\')
				dec->escape = true;
			else
			{
				string_end(dec, &ch, i, d);
				continue;
			}
			if (room > 0)
				appendStringInfoChar(&dec->str, c);
			continue;
		}

		/*
		 * Inside an item, below what the framer reads (a member's value
		 * other than the metadata's own members): count only, down to the
		 * close of the item's member (depth 4) or of the metadata's (5).
		 */
		if (dec->capturing && d >= 4 && d < KW_MAX_DEPTH)
		{
			bool		in_metadata = strcmp(dec->key3, "metadata") == 0;

			if (d >= 5 || !in_metadata)
			{
				size_t		j = skip_deep(dec, data, i, len, in_metadata ? 5 : 4);

				if (j > i)
				{
					i = j - 1;	/* the loop's i++ lands on j */
					continue;
				}
			}
		}
		if (dec->events && d <= 1 && !envelope_byte(dec, c, d, error))
			return false;
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
		if (dec->events && dec->item_skip[0])
			return event_over_limit(dec, error);
	}
	flush_run(dec, &ch, len);
	/* a string member that ends after this chunk counts as well */
	if (dec->capturing && dec->capture.len > KW_MAX_OBJECT_BYTES)
		skip_item(dec, "larger than %d MB", KW_MAX_OBJECT_BYTES / (1024 * 1024));
	if (dec->events && dec->item_skip[0])
		return event_over_limit(dec, error);
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

/* ---------------------------------------------------------------------
 * WATCH stream
 *
 * The same byte-level framer as a LIST's, in its event mode: the stream is
 * a sequence of {"type":..,"object":{..}} values (one per line as the API
 * server writes them, k8s.io/apimachinery/pkg/watch/json), and each
 * event's object is cut out as a list item is (managedFields dropped,
 * identity picked up, apiVersion and kind put first), so that no JSON tree
 * is built for it in the worker: PostgreSQL's jsonb input parses its text
 * once, in the apply worker.  What PROTOCOL 13 asks of a watch stream is
 * checked on the way: the envelope's grammar by the framer (envelope_byte),
 * the object's by PostgreSQL's JSON parser with no semantic actions
 * (common/jsonapi.h, the validation jsonb_in itself starts with), and
 * the type by name.  BOOKMARK and ERROR events, whose members the worker
 * reads, are parsed with json-c.
 * ---------------------------------------------------------------------
 */
struct KwWatchDecoder
{
	KwListDecoder *framer;		/* in event mode */
	KwWatchEventCallback cb;	/* the feed's, during kw_watch_decoder_feed */
	void	   *arg;
	char	   *error;			/* set by framed_event: the stream ends */
};

/*
 * kw_watch_decoder_create: a decoder for one WATCH response body whose
 * objects are of `api_version` and `kind` (as kw_list_decoder_create; NULL
 * leaves them as the server wrote them, which it does on every watched
 * object).  Its memory lives in CurrentMemoryContext, which must outlive
 * the transfer.  Free with kw_watch_decoder_free.
 */
KwWatchDecoder *
kw_watch_decoder_create(const char *api_version, const char *kind)
{
	KwWatchDecoder *dec = palloc0(sizeof(KwWatchDecoder));

	dec->framer = kw_list_decoder_create(api_version, kind);
	dec->framer->events = true;
	small_string_init(&dec->framer->evtype, KW_SMALL_STRING);
	return dec;
}

/*
 * kw_watch_decoder_keep_managers: kw_list_decoder_keep_managers for the
 * objects of the events of `dec`.
 */
void
kw_watch_decoder_keep_managers(KwWatchDecoder *dec)
{
	kw_list_decoder_keep_managers(dec->framer);
}

/*
 * kw_watch_decoder_free: frees a decoder; accepts NULL.
 */
void
kw_watch_decoder_free(KwWatchDecoder *dec)
{
	if (dec == NULL)
		return;
	pfree(dec->framer->evtype.data);
	kw_list_decoder_free(dec->framer);
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
	if (dec->framer->depth != 0 || dec->framer->in_string)
	{
		*error = pstrdup("watch stream ended inside an event");
		return false;
	}
	return true;
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

/*
 * valid_json: whether `len` bytes of `json` are one JSON value, by
 * PostgreSQL's own parser with no semantic actions (its lexer checks the
 * grammar; escapes are not decoded, the text is sanitized before).
 */
static bool
valid_json(char *json, int len)
{
	JsonLexContext *lex = KW_MAKE_JSON_LEX(json, len);
	JsonParseErrorType r = pg_parse_json(lex, &nullSemAction);

	KW_FREE_JSON_LEX(lex);
	return r == JSON_SUCCESS;
}

/*
 * deliver_tree: an event whose members the worker reads (BOOKMARK, ERROR):
 * its object parsed by json-c, cb(arg, t, NULL, tree), then the tree freed,
 * even on ERROR.  An object json-c cannot read makes the stream malformed.
 */
static void
deliver_tree(KwWatchDecoder *dec, KwEventType t, KwListItem *item)
{
	enum json_tokener_error jerr = json_tokener_success;
	json_object *o = json_tokener_parse_verbose(item->json, &jerr);

	if (o == NULL)
	{
		dec->error = psprintf("malformed JSON in watch stream: %s",
							  json_tokener_error_desc(jerr));
		return;
	}
	PG_TRY();
	{
		dec->cb(dec->arg, t, NULL, o);
	}
	PG_FINALLY();
	{
		json_object_put(o);
	}
	PG_END_TRY();
}

/*
 * framed_event: the framer's callback for one whole event: checks it
 * (PROTOCOL 13: a type and an object, a known type, the object valid JSON;
 * one over a limit never gets here, see event_over_limit) and hands it to
 * the feed's callback; anything else sets dec->error, and the events after
 * it in the chunk are ignored.
 */
static void
framed_event(void *arg, KwListItem *item)
{
	KwWatchDecoder *dec = (KwWatchDecoder *) arg;
	KwEventType t;

	if (dec->error)
		return;
	if (item->event_type == NULL || !item->has_object)
	{
		dec->error = pstrdup("watch event without \"type\" and \"object\"");
		return;
	}
	if (!parse_event_type(item->event_type, &t))
	{
		dec->error = psprintf("unknown watch event type \"%.40s\"", item->event_type);
		return;
	}
	if (t == KW_EV_BOOKMARK || t == KW_EV_ERROR)
	{
		deliver_tree(dec, t, item);
		return;
	}
	/* storable text, as a LIST item's (kw_sanitize_json) */
	item->sanitized = kw_sanitize_json(&item->json, &item->json_len);
	if (!valid_json(item->json, item->json_len))
	{
		/* no detail: the parser's quotes the text, maybe a Secret's */
		dec->error = psprintf("malformed JSON in watch stream: the object of a%s %s event is not valid JSON",
							  t == KW_EV_ADDED ? "n" : "", item->event_type);
		return;
	}
	dec->cb(dec->arg, t, item, NULL);
}

/*
 * kw_watch_decoder_feed: decodes the next `inlen` bytes `in` of a watch
 * stream, calling cb(arg, type, item, NULL) for each complete ADDED,
 * MODIFIED or DELETED event in order (the object's text, sanitized and
 * valid JSON, and identity as the framer saw them, valid during the call)
 * and cb(arg, type, NULL, tree) for a BOOKMARK or ERROR event (a
 * json_object *, valid during the call).  An event split across chunks, or
 * several in one chunk, decode the same (PROTOCOL 12).  Returns false with
 * a palloc'd *error when the stream is malformed (bad JSON, an event
 * without type or object, an unknown type, an event over the limits): the
 * caller must abandon the stream (PROTOCOL 13).
 */
bool
kw_watch_decoder_feed(KwWatchDecoder *dec, const char *in, size_t inlen,
					  KwWatchEventCallback cb, void *arg, char **error)
{
	bool		ok;

	dec->cb = cb;
	dec->arg = arg;
	dec->error = NULL;
	ok = kw_list_decoder_feed(dec->framer, in, inlen, framed_event, dec, error);
	if (ok && dec->error)
	{
		*error = dec->error;
		ok = false;
	}
	return ok;
}
