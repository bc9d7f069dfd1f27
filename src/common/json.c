/*-------------------------------------------------------------------------
 *
 * json.c
 *		Small helpers over json-c objects and the event vocabulary, for
 *		every folder (the decoder, cluster access, live tables, NOTIFY).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <json-c/json.h>

#include "kw_common.h"

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

/*
 * kw_json_get_string: the string member `key` of the json-c object `obj` (a
 * json_object *; NULL allowed), or NULL when absent or not a string.  The
 * result belongs to obj.
 */
const char *
kw_json_get_string(void *obj, const char *key)
{
	json_object *o = (json_object *) obj;
	json_object *v;

	if (o && json_object_object_get_ex(o, key, &v) &&
		json_object_is_type(v, json_type_string))
		return json_object_get_string(v);
	return NULL;
}
