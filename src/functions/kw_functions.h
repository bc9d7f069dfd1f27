/*-------------------------------------------------------------------------
 *
 * kw_functions.h
 *		What the SQL functions' files share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_FUNCTIONS_H
#define KW_FUNCTIONS_H

#include "kw_common.h"

#include "fmgr.h"

/* in sync_wait.c: ERRORs 55000 unless a worker can sync watches here */
extern void kw_require_worker_state(void);
extern void kw_require_served_database(void);
extern int64 kw_timeout_ms(FunctionCallInfo fcinfo, int argno);
extern void kw_refuse_uncommitted(const int32 *ids, char *const *labels, int n,
								  const char *function);

/* in wait_current.c: -1, 0, 1, or -2 when not comparable (PROTOCOL 28) */
extern int	kw_rv_compare(const char *a, const char *b);

/* in ownership.c: watches under DROP ROLE / DROP OWNED / REASSIGN OWNED */
extern void kw_ownership_init(void);
extern void kw_relation_guard_init(void);

#endif							/* KW_FUNCTIONS_H */
