/*-------------------------------------------------------------------------
 *
 * kw_write.h
 *		Writes to a cluster (write.c): server-side apply of one object and
 *		the meaning of the answer, shared by kwatch.apply() in the statement
 *		and the request sender after COMMIT.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_WRITE_H
#define KW_WRITE_H

#include "kw_common.h"
#include "kw_cluster.h"
#include "kw_http.h"

/*
 * A field-manager conflict (server-side apply's 409 with causes of type
 * FieldManagerConflict): kwatch's own SQLSTATE, class KW.
 */
#define ERRCODE_KW_FIELD_MANAGER_CONFLICT MAKE_SQLSTATE('K','W','4','0','9')

extern char *kw_write_path(const KwResource *r, const char *namespace,
						   const char *name);
extern void kw_write_apply(KwClusterConfig *cfg, const char *path,
						   const char *body, const char *field_manager,
						   bool force, bool dry_run, KwHttpResponse *resp);
extern void kw_write_delete(KwClusterConfig *cfg, const char *path,
							const char *options, KwHttpResponse *resp);
extern bool kw_write_outcome(KwHttpResponse *resp, bool withhold_values,
							 int *sqlstate, char **message, char **detail,
							 bool *retry);
extern void kw_write_raise(KwClusterConfig *cfg, const char *what,
						   KwHttpResponse *resp, bool withhold_values) pg_attribute_noreturn();

#endif							/* KW_WRITE_H */
