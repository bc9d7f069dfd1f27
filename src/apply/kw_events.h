/*-------------------------------------------------------------------------
 *
 * kw_events.h
 *		The event stream: a ring in shared memory written by the worker
 *		(events.c), read by kwatch.events (events_fdw.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_EVENTS_H
#define KW_EVENTS_H

#include "kw_common.h"
#include "nodes/primnodes.h"
#include "utils/relcache.h"

/* ---------------------------------------------------------------------
 * in events.c: the event stream ring (read by events_fdw.c)
 * ---------------------------------------------------------------------
 */

/*
 * Field sizes of one ring slot, from Kubernetes' limits: names are DNS
 * subdomains (253 bytes), namespaces DNS labels (63); a resource is
 * plural (a DNS label) '.' group (a DNS subdomain); cluster and table_name
 * are PostgreSQL identifiers.  Longer text is cut and flagged, never
 * silently.
 */
#define KW_EV_RESOURCE_LEN 320
#define KW_EV_NAME_LEN 256
#define KW_EV_SHORT_LEN 64

typedef struct KwEventRecord
{
	int64		seq;
	TransactionId xid;			/* applying transaction (visibility) */
	TimestampTz at;				/* when the worker applied it */
	uint8		type;			/* KwEventType: ADDED, MODIFIED, DELETED */
	bool		has_namespace;	/* false: cluster-scoped (NULL namespace) */
	bool		truncated;
	char		cluster[NAMEDATALEN];
	char		resource[KW_EV_RESOURCE_LEN];
	char		table_name[NAMEDATALEN];
	char		namespace[KW_EV_SHORT_LEN];
	char		name[KW_EV_NAME_LEN];
	char		uid[KW_EV_SHORT_LEN];
	char		resource_version[KW_RV_LEN];
	bool		preexisting;	/* KwChange's flags */
	bool		final_state_unknown;
	bool		has_previous;	/* false: previous_resource_version NULL */
	char		previous_resource_version[KW_RV_LEN];
} KwEventRecord;

typedef enum KwEventReadResult
{
	KW_EVREAD_OK,
	KW_EVREAD_GONE,				/* overwritten by a newer event */
	KW_EVREAD_NOT_YET			/* not written or not committed */
} KwEventReadResult;

extern void kw_events_shmem_request(void);
extern void kw_events_add(KwRegistration *reg, const KwChange *c, bool notify);
extern void kw_events_checkpoint(void);
extern bool kw_events_available(void);
extern int64 kw_events_last_seq(void);
extern int64 kw_events_oldest_seq(void);
extern int64 kw_events_scan_bound(void);
extern KwEventReadResult kw_events_read(int64 seq, KwEventRecord *out);
extern int	kw_events_ring_slots(void);


/* ---------------------------------------------------------------------
 * in events_deparse.c: the kwatch.events columns and the clauses its scan
 * applies (events_fdw.c)
 * ---------------------------------------------------------------------
 */
/* Columns the scan can produce; the foreign table's are matched by name. */
typedef enum EvColumn
{
	EV_NONE = 0,
	EV_SEQ,
	EV_AT,
	EV_CLUSTER,
	EV_RESOURCE,
	EV_TABLE_NAME,
	EV_TYPE,
	EV_NAMESPACE,
	EV_NAME,
	EV_UID,
	EV_RESOURCE_VERSION,
	EV_TRUNCATED,
	EV_PREEXISTING,
	EV_FINAL_STATE_UNKNOWN,
	EV_PREVIOUS_RESOURCE_VERSION
} EvColumn;

/*
 * A pushed-down condition is encoded as column * 10 + btree strategy
 * (BTLessStrategyNumber .. BTGreaterStrategyNumber) in an IntList in
 * fdw_private, with its comparison value in fdw_exprs at the same index.
 */
#define COND_CODE(col, strat) ((int) (col) * 10 + (strat))
#define COND_COL(code) ((EvColumn) ((code) / 10))
#define COND_STRAT(code) ((code) % 10)

extern EvColumn kw_ev_column_by_name(const char *name, Oid *type);
extern bool kw_ev_classify_clause(Expr *clause, Index relid, Relation rel, int *code,
								  Expr **value, char **desc);

#endif							/* KW_EVENTS_H */
