/*-------------------------------------------------------------------------
 *
 * kw_sync.h
 *		The apply side: writing decoded batches to mirror tables (sync.c),
 *		in an apply worker (apply_execute.c).  The transfer's files
 *		(worker.c, watch.c) never include this header.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_SYNC_H
#define KW_SYNC_H

#include "kw_common.h"
#include "kw_apply.h"

/* in apply_execute.c: running a request (in an apply worker) */
extern void kw_apply_execute(const KwApplyRequest *req, KwApplyResult *res);

/*
 * kw_apply_*: one transaction per call; kw_sync_*: in the caller's
 * transaction.
 */
typedef struct KwSyncPlans KwSyncPlans;

extern KwSyncPlans *kw_sync_plans_create(KwRegistration *reg,
										 MemoryContext cxt);
extern void kw_sync_plans_free(KwSyncPlans *plans);
extern void kw_sync_plans_set_direct(KwSyncPlans *p, bool direct);
extern void kw_sync_apply_events(KwSyncPlans *plans, KwRegistration *reg,
								 KwEvent *events, int nevents,
								 const char *resume_rv, KwApplyCounts *counts);
extern bool kw_apply_events(KwSyncPlans *plans, KwRegistration *reg, KwEvent *events,
							int nevents, const char *resume_rv, KwApplyCounts *counts,
							char **err, int *sqlstate);
extern bool kw_apply_relist_begin(KwSyncPlans *plans, KwRegistration *reg,
								  MemoryContext cxt, bool allow_direct,
								  bool forget_checkpoint, struct HTAB **known,
								  bool *direct, char **err, int *sqlstate);
extern bool kw_apply_relist_stage(KwSyncPlans *plans, KwRegistration *reg, KwObject *objs,
								  int nobjs, int *skipped, KwApplyCounts *counts,
								  char **err, int *sqlstate);
extern bool kw_apply_relist_finish(KwSyncPlans *plans, KwRegistration *reg,
								   const char *list_rv, struct HTAB *known,
								   KwEvent *events, int nevents,
								   KwApplyCounts *counts, char **err, int *sqlstate);
extern bool kw_apply_count_rows(KwRegistration *reg, int64 *rows, char **err,
								int *sqlstate);
extern int64 kw_sync_count_rows(KwRegistration *reg);
extern struct HTAB *kw_sync_relist_begin(KwSyncPlans *plans,
										 KwRegistration *reg,
										 MemoryContext cxt, bool allow_direct,
										 bool forget_checkpoint);
extern int	kw_sync_relist_stage(KwSyncPlans *plans, KwRegistration *reg,
								 KwObject *objs, int nobjs, KwApplyCounts *counts);
extern void kw_sync_relist_finish(KwSyncPlans *plans, KwRegistration *reg,
								  const char *list_rv, struct HTAB *known,
								  KwApplyCounts *counts);
/* in copy_rows.c: a batch written by COPY FROM's machinery */
typedef struct KwMirrorColumn
{
	const char *name;
	Oid			type;
} KwMirrorColumn;

#define KW_MIRROR_COLUMNS 4
extern const KwMirrorColumn kw_mirror_columns[KW_MIRROR_COLUMNS];

extern bool kw_copy_rows(Oid relid, const char *cluster, const KwObject *objs,
						 int nobjs);
extern struct HTAB *kw_sync_known_rows(KwSyncPlans *plans, KwRegistration *reg,
										MemoryContext cxt);

#endif							/* KW_SYNC_H */
