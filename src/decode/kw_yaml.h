/*-------------------------------------------------------------------------
 *
 * kw_yaml.h
 *		A manifest's text (YAML, several documents, or JSON) -> the objects
 *		`kubectl apply -f` would send (yaml_manifest.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_YAML_H
#define KW_YAML_H

#include "kw_common.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"

/* One object of a manifest, in the order of the text. */
typedef struct KwManifestObject
{
	Jsonb	   *object;			/* a JSON object */
	int			document;		/* 1-based, counting empty documents too */
	int			item;			/* 1-based index in a List's items, or 0 */
	int			line;			/* 1-based line of the document's first node */
} KwManifestObject;

/* Deepest nesting of mappings and sequences a manifest may have. */
#define KW_YAML_MAX_DEPTH	512

extern List *kw_manifest_objects(const char *text, size_t len);

#endif							/* KW_YAML_H */
