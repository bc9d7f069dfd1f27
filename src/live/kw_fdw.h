/*-------------------------------------------------------------------------
 *
 * kw_fdw.h
 *		Live foreign tables: live_table.c, live_column.c, fdw_deparse.c,
 *		live_scan.c, fdw.c, fdw_modify.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_FDW_H
#define KW_FDW_H

#include "kw_common.h"
#include "kw_cluster.h"

#include "nodes/pathnodes.h"
#include "nodes/execnodes.h"
#include "nodes/primnodes.h"
#include "utils/relcache.h"

/* ---------------------------------------------------------------------
 * Live foreign tables: discovery.c, live_column.c,
 * fdw_deparse.c, live_scan.c, fdw.c
 * ---------------------------------------------------------------------
 */


/*
 * One column a live table can have: its name, type and the expression that
 * computes it, over PARAM_EXTERN 1 (the object, jsonb) and 2 (the cluster,
 * text).  From kwatch.live_columns(), so mirror and live tables share one
 * definition of every column.
 */
typedef struct KwLiveColumn
{
	char	   *name;
	Oid			type;
	int32		typmod;
	Expr	   *expr;
} KwLiveColumn;

typedef struct KwLiveColumns
{
	char	   *api_group;
	char	   *plural;
	int			ncolumns;
	KwLiveColumn *columns;
} KwLiveColumns;

extern KwLiveColumns *kw_live_columns(const char *api_group,
									  const char *plural);
extern KwLiveColumn *kw_live_column_find(KwLiveColumns *cols,
										 const char *name);

/* A resolved live foreign table (fdw.c). */
typedef struct KwLiveTable
{
	Oid			relid;
	char	   *server;			/* foreign server name = cluster column */
	char	   *api_group;
	char	   *api_version;
	char	   *plural;
	char	   *kind;			/* the objects' kind (option or discovery) */
	bool		namespaced;
	char	   *namespace;		/* table option: always this namespace */
	bool		use_remote_estimate;
	bool		redact;			/* Secrets without option secret_data (redact.c) */
	KwLiveColumns *columns;
} KwLiveTable;

extern KwLiveTable *kw_live_table_resolve(Oid relid, Oid userid,
										  KwClusterConfig **cfg);

/*
 * The columns of one foreign table computed from an object (live_column.c):
 * the compiled expressions of the columns retrieved, evaluated with the
 * object as $1 and the server name as $2.
 */
typedef struct KwLiveRow
{
	KwLiveTable *table;
	int			natts;
	ExprState **exprs;			/* per attribute, NULL = not retrieved */
	ExprContext *econtext;		/* evaluates exprs; own ParamListInfo */
	ParamListInfo params;		/* $1 object, $2 cluster */
} KwLiveRow;

extern KwLiveRow *kw_live_row_begin(KwLiveTable *table, Relation rel,
									List *attnos, EState *estate);
extern void kw_live_row_store(KwLiveRow *row, char *json, int len,
							  TupleTableSlot *slot);

/* INSERT, UPDATE, DELETE on live tables (fdw_modify.c). */
struct FdwRoutine;
extern void kw_live_modify_routine(struct FdwRoutine *routine);

/* What the WHERE clauses became (fdw_deparse.c). */
typedef struct KwLiveRequest
{
	char	   *namespace;		/* path segment, NULL = all namespaces */
	List	   *namespaces;		/* String *: one LIST each (namespace IN) */
	List	   *label_terms;	/* char *: requirements, ANDed */
	List	   *field_terms;	/* char *: requirements, ANDed */
	List	   *pushed_quals;	/* RestrictInfo * that became a term */
	RestrictInfo *namespace_qual;	/* the one that became the namespace */
	bool		all_exact;		/* every qual is pushed with SQL's meaning */
	bool		by_name;		/* an exact metadata.name=... is pushed */
	List	   *param_exprs;	/* Param *: values bound at execution */
} KwLiveRequest;

extern void kw_classify_conditions(PlannerInfo *root, RelOptInfo *baserel,
								   KwLiveTable *table, KwLiveRequest *req);
extern char *kw_live_bind(const char *tmpl, List *param_exprs, Datum *values,
						  bool *nulls, bool *drop, bool *none);
extern char *kw_live_path(KwLiveTable *table, const char *namespace);
extern char *kw_live_selector(List *terms);
extern char *kw_live_request_text(const char *path, const char *labels,
								  const char *fields, int limit,
								  bool encode);

/* Streaming chunked LIST (live_scan.c). */
typedef struct KwLiveScan KwLiveScan;

extern KwLiveScan *kw_live_scan_begin(KwClusterConfig *cfg, const char *path,
									  const char *label_selector,
									  const char *field_selector, int limit,
									  const char *what,
									  const char *api_version,
									  const char *kind);
extern bool kw_live_scan_next(KwLiveScan *scan, char **json, int *len);
extern void kw_live_scan_end(KwLiveScan *scan);
extern void kw_live_scan_counts(KwLiveScan *scan, int *pages, int64 *items);

#endif							/* KW_FDW_H */
