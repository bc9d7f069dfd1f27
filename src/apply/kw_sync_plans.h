/*-------------------------------------------------------------------------
 *
 * kw_sync_plans.h
 *		What the files that write a mirror table share, inside apply/: a
 *		watch's prepared statements and the registration row they lock
 *		(sync_plans.c), the relist staging table (stage_table.c), and the
 *		report of the changes a LIST found (merge.c).  The transaction
 *		shell (sync.c) and the request runner (apply_execute.c) see only
 *		kw_sync.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_SYNC_PLANS_H
#define KW_SYNC_PLANS_H

#include "executor/spi.h"
#include "utils/hsearch.h"

#include "kw_common.h"
#include "kw_apply.h"
#include "kw_sync.h"

struct KwSyncPlans
{
	SPIPlanPtr	checkpoint;		/* ($1 id, $2 rv) */
	SPIPlanPtr	upsert;			/* ($1 uid[], $2 rv[], $3 json[], $4 cluster) */
	SPIPlanPtr	delete;			/* ($1 cluster, $2 uid[]) */
	SPIPlanPtr	stage;			/* ($1 uid[], $2 rv[], $3 json[]) */
	SPIPlanPtr	merge;			/* ($1 cluster) */
	SPIPlanPtr	merge_distinct; /* ($1 cluster), a uid staged twice */
	SPIPlanPtr	sweep;			/* ($1 cluster) */
	SPIPlanPtr	insert;			/* ($1 uid[], $2 rv[], $3 json[], $4 cluster) */
	SPIPlanPtr	lock;			/* ($1 id) */
	bool		relist_direct;	/* this list goes straight into the mirror */
	char	   *stage_table;	/* kwatch_stage.relist_stage_<id>, qualified */
	char	   *qualified;		/* k8s."table" */
};

/* in sync_plans.c: the mirror table, its statements, the registration row */
extern Oid	kw_sync_mirror_relid(KwRegistration *reg);
extern Oid	kw_sync_table_owner(KwRegistration *reg);
extern SPIPlanPtr kw_sync_prepare(const char *sql, int nargs, Oid *argtypes);
extern void kw_sync_registration_found(KwRegistration *reg);
extern void kw_sync_save_checkpoint(KwSyncPlans *p, KwRegistration *reg,
									const char *rv);
extern void kw_sync_lock_registration(KwSyncPlans *p, KwRegistration *reg);
extern Datum kw_sync_text_array(KwObject *objs, int n, int field);

/* in stage_table.c: schema kwatch_stage and a watch's staging table */
extern void kw_stage_table_prepare(const char *stage);
extern void kw_stage_table_grant(const char *stage, Oid owner);
extern void kw_stage_table_empty(const char *stage);
extern bool kw_stage_table_staged_twice(const char *stage);

/* in merge.c: the changes a LIST found, counted and reported */
extern void kw_sync_report_listed(KwRegistration *reg, const KwChange *c,
								  KwApplyCounts *counts);
extern void kw_sync_report_rows(KwRegistration *reg, SPITupleTable *rows,
								uint64 nrows, KwEventType fixed,
								bool first_is_inserted, HTAB *known,
								KwApplyCounts *counts);

#endif							/* KW_SYNC_PLANS_H */
