/*-------------------------------------------------------------------------
 *
 * kw_decode.h
 *		JSON from the API server -> objects ready to store (decode.c,
 *		PROTOCOL 5, 6, 12, 13), and Secret redaction (redact.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_DECODE_H
#define KW_DECODE_H

#include "kw_common.h"

extern char *kw_api_version_string(const char *api_group, const char *version);
extern bool kw_valid_identity(const char *s);

extern bool kw_sanitize_json(char **json, int *len);

/* redact.c: Secret values kept out unless opted in */
extern void kw_redact_secret_object(void *obj);
extern bool kw_redact_secret_json(char **json, int *len);
extern bool kw_redacted_value_in(void *obj);

/* How every redacted value begins (redact.c). */
#define KW_REDACTED_PREFIX "<redacted hmac-sha256:"

/* Paged LIST decoder (PROTOCOL 5, 6). */
typedef struct KwListDecoder KwListDecoder;

/* One LIST item as the framer saw it: raw text, managedFields cut out. */
typedef struct KwListItem
{
	char	   *uid;			/* NULL when absent */
	char	   *namespace;
	char	   *name;
	char	   *resource_version;
	char	   *json;			/* valid during the callback only */
	int			json_len;
	const char *skip_reason;	/* non-NULL: the item cannot be decoded (too
								 * deep or too large); json is empty */
	/* a watch event's (kw_watch_decoder_feed): */
	const char *event_type;		/* its "type"; NULL in a list */
	bool		has_object;		/* it had an "object" */
	bool		sanitized;		/* json was rewritten by kw_sanitize_json (an
								 * event's text always went through it) */
	char	   *managers;		/* summary of its metadata.managedFields as
								 * JSON text (decode.c managers_summary), or
								 * NULL (none, or no *_keep_managers call);
								 * valid during the callback only */
} KwListItem;

typedef void (*KwListItemCallback) (void *arg, KwListItem *item);

extern KwListDecoder *kw_list_decoder_create(const char *api_version,
											 const char *kind);
extern void kw_list_decoder_free(KwListDecoder *dec);
extern void kw_list_decoder_keep_managers(KwListDecoder *dec);
extern bool kw_list_decoder_feed(KwListDecoder *dec, const char *data,
								 size_t len, KwListItemCallback cb, void *arg,
								 char **error);
extern bool kw_list_decoder_finish(KwListDecoder *dec, char **resource_version,
								   char **continue_token, char **error);

/* Watch stream decoder (PROTOCOL 12, 13): the framer in event mode. */
typedef struct KwWatchDecoder KwWatchDecoder;

/*
 * One watch event: an ADDED, MODIFIED or DELETED one as `item` (text and
 * identity, jobj NULL), a BOOKMARK or ERROR one as `jobj` (a json_object *,
 * item NULL); both valid during the call only.
 */
typedef void (*KwWatchEventCallback) (void *arg, KwEventType type,
									  KwListItem *item, void *jobj);

extern KwWatchDecoder *kw_watch_decoder_create(const char *api_version,
											   const char *kind);
extern void kw_watch_decoder_free(KwWatchDecoder *dec);
extern void kw_watch_decoder_keep_managers(KwWatchDecoder *dec);
extern bool kw_watch_decoder_feed(KwWatchDecoder *dec, const char *data,
								  size_t len, KwWatchEventCallback cb,
								  void *arg, char **error);
extern bool kw_watch_decoder_finish(KwWatchDecoder *dec, char **error);



#endif							/* KW_DECODE_H */
