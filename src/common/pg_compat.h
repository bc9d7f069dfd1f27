/*-------------------------------------------------------------------------
 *
 * pg_compat.h
 *		The one place where kwatch's sources meet the differences between
 *		the PostgreSQL majors it supports: 15 (Debian 12), 16, 17 (Debian 13)
 *		and 18 (Debian unstable).  Everything version-specific is here,
 *		behind PG_VERSION_NUM, as pg_cron's and pglogical's compatibility
 *		headers do; the .c files call the kw_ / KW_ names below and contain
 *		no #if on the version.  `make test-versions` (test/versions/run.sh)
 *		builds warning-free and tests against 17 and 18, `make test` against
 *		the host's 15.
 *
 * Included by kw_common.h right after postgres.h; uses macros only, so it
 * needs no header beyond postgres.h (the caller includes the headers of the
 * functions it calls, as it would without this file).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_PG_COMPAT_H
#define KW_PG_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000
#error "kwatch requires PostgreSQL 15 or later"
#endif

/*
 * pg_attribute_noreturn(): PostgreSQL 18 replaced the postfix attribute by
 * the C11 prefix specifier pg_noreturn (commit "Add pg_noreturn", c.h).
 * GCC and clang, which build PostgreSQL on Debian, still take the postfix
 * form, which kwatch's declarations use.
 */
#if !defined(pg_attribute_noreturn)
#if defined(__GNUC__) || defined(__clang__)
#define pg_attribute_noreturn() __attribute__((noreturn))
#else
#define pg_attribute_noreturn()
#endif
#endif

/*
 * KW_CREATE_WAIT_EVENT_SET(cxt, owner, nevents): a WaitEventSet for
 * nevents events (storage/latch.h, storage/waiteventset.h from 18 on).
 * Through 16 it is allocated in the memory context cxt; from 17 on
 * CreateWaitEventSet takes a ResourceOwner instead (the set lives in
 * TopMemoryContext and is released with owner, or only by FreeWaitEventSet
 * when owner is NULL).  Callers free it with FreeWaitEventSet either way.
 */
#if PG_VERSION_NUM >= 170000
#define KW_CREATE_WAIT_EVENT_SET(cxt, owner, nevents) \
	CreateWaitEventSet((owner), (nevents))
#else
#define KW_CREATE_WAIT_EVENT_SET(cxt, owner, nevents) \
	CreateWaitEventSet((cxt), (nevents))
#endif

/*
 * KW_CREATE_FOREIGNSCAN_PATH(root, rel, target, rows, startup, total,
 * pathkeys, required_outer, fdw_outerpath, fdw_private): the ForeignPath of
 * optimizer/pathnode.h with 15's arguments.  17 added fdw_restrictinfo (the
 * clauses a foreign join path enforces; NIL for a base relation's scan),
 * 18 disabled_nodes (how many disabled plan nodes the path contains: 0).
 */
#if PG_VERSION_NUM >= 180000
#define KW_CREATE_FOREIGNSCAN_PATH(root, rel, target, rows, startup, total, \
								   pathkeys, required_outer, outerpath, priv) \
	create_foreignscan_path((root), (rel), (target), (rows), 0, (startup), (total), \
							(pathkeys), (required_outer), (outerpath), NIL, (priv))
#elif PG_VERSION_NUM >= 170000
#define KW_CREATE_FOREIGNSCAN_PATH(root, rel, target, rows, startup, total, \
								   pathkeys, required_outer, outerpath, priv) \
	create_foreignscan_path((root), (rel), (target), (rows), (startup), (total), \
							(pathkeys), (required_outer), (outerpath), NIL, (priv))
#else
#define KW_CREATE_FOREIGNSCAN_PATH(root, rel, target, rows, startup, total, \
								   pathkeys, required_outer, outerpath, priv) \
	create_foreignscan_path((root), (rel), (target), (rows), (startup), (total), \
							(pathkeys), (required_outer), (outerpath), (priv))
#endif

/*
 * KW_FOREIGN_SCAN_USER(fsplan, estate): the role a ForeignScan checks
 * access as (InvalidOid: the current user).  16 moved permissions out of
 * the range table (RTEPermissionInfo): the plan node carries checkAsUser;
 * through 15 it is the range table entry's.  In the planner,
 * RelOptInfo.userid holds it in every version.
 */
#if PG_VERSION_NUM >= 160000
#define KW_FOREIGN_SCAN_USER(fsplan, estate) ((fsplan)->checkAsUser)
#else
#define KW_FOREIGN_SCAN_USER(fsplan, estate) \
	(exec_rt_fetch((fsplan)->scan.scanrelid, (estate))->checkAsUser)
#endif

/*
 * KW_UPDATED_COLS(root, rti, rte): the columns an UPDATE of result relation
 * `rti` sets (offset by FirstLowInvalidHeapAttributeNumber; optimizer/
 * inherit.h's get_rel_all_updated_cols, in every supported version), and
 * KW_MODIFY_USER(rinfo, estate): the role a write to a result relation is
 * checked and sent as.  16 moved the latter out of the range table entry
 * (RTEPermissionInfo; postgres_fdw's postgresBeginForeignModify of each
 * version).
 */
#define KW_UPDATED_COLS(root, rti, rte) \
	get_rel_all_updated_cols((root), find_base_rel((root), (rti)))
#if PG_VERSION_NUM >= 160000
#define KW_MODIFY_USER(rinfo, estate) ExecGetResultRelCheckAsUser((rinfo), (estate))
#else
#define KW_MODIFY_USER(rinfo, estate) \
	(exec_rt_fetch((rinfo)->ri_RangeTableIndex, (estate))->checkAsUser ? \
	 exec_rt_fetch((rinfo)->ri_RangeTableIndex, (estate))->checkAsUser : GetUserId())
#endif

/*
 * KW_DECODE_DATETIME(field, ftype, nf, dtype, tm, fsec, tzp): DecodeDateTime
 * of utils/datetime.h with 15's arguments, returning its DTERR_ code.  16
 * added a DateTimeErrorExtra * for the details of an error, which kwatch
 * does not report (it only asks whether the text parses).
 */
#if PG_VERSION_NUM >= 160000
#define KW_DECODE_DATETIME(field, ftype, nf, dtype, tm, fsec, tzp) \
	DecodeDateTime((field), (ftype), (nf), (dtype), (tm), (fsec), (tzp), \
				   &(DateTimeErrorExtra) {0})
#else
#define KW_DECODE_DATETIME(field, ftype, nf, dtype, tm, fsec, tzp) \
	DecodeDateTime((field), (ftype), (nf), (dtype), (tm), (fsec), (tzp))
#endif

/*
 * KW_SERVER_USAGE(serverid, role): pg_foreign_server_aclcheck's answer for
 * ACL_USAGE (utils/acl.h); 16 replaced the per-object functions by
 * object_aclcheck.
 */
#if PG_VERSION_NUM >= 160000
#define KW_SERVER_USAGE(serverid, role) \
	object_aclcheck(ForeignServerRelationId, (serverid), (role), ACL_USAGE)
#else
#define KW_SERVER_USAGE(serverid, role) \
	pg_foreign_server_aclcheck((serverid), (role), ACL_USAGE)
#endif

/*
 * KW_FUNCTION_EXECUTE(funcid, role): pg_proc_aclcheck's answer for
 * ACL_EXECUTE (utils/acl.h), as KW_SERVER_USAGE above; the caller includes
 * catalog/pg_proc.h for ProcedureRelationId.
 */
#if PG_VERSION_NUM >= 160000
#define KW_FUNCTION_EXECUTE(funcid, role) \
	object_aclcheck(ProcedureRelationId, (funcid), (role), ACL_EXECUTE)
#else
#define KW_FUNCTION_EXECUTE(funcid, role) \
	pg_proc_aclcheck((funcid), (role), ACL_EXECUTE)
#endif

/*
 * KW_PATHKEY_ASCENDING(pk): whether PathKey pk (nodes/pathnodes.h) sorts
 * ascending; 18 replaced its btree strategy number (pk_strategy,
 * BTLessStrategyNumber) by a CompareType (pk_cmptype, COMPARE_LT).
 */
#if PG_VERSION_NUM >= 180000
#define KW_PATHKEY_ASCENDING(pk) ((pk)->pk_cmptype == COMPARE_LT)
#else
#define KW_PATHKEY_ASCENDING(pk) ((pk)->pk_strategy == BTLessStrategyNumber)
#endif

/*
 * KW_B64_ENCODE(src, len, dst, dstlen), KW_B64_DECODE(src, len, dst,
 * dstlen): common/base64.h's pg_b64_encode and pg_b64_decode, whose binary
 * side is a char * through 17 and a uint8 * from 18 on; kwatch passes
 * char buffers.  Both return the output length, or -1 on bad input or a
 * too small dst.
 */
#if PG_VERSION_NUM >= 180000
#define KW_B64_ENCODE(src, len, dst, dstlen) \
	pg_b64_encode((const uint8 *) (src), (len), (dst), (dstlen))
#define KW_B64_DECODE(src, len, dst, dstlen) \
	pg_b64_decode((src), (len), (uint8 *) (dst), (dstlen))
#else
#define KW_B64_ENCODE(src, len, dst, dstlen) pg_b64_encode((src), (len), (dst), (dstlen))
#define KW_B64_DECODE(src, len, dst, dstlen) pg_b64_decode((src), (len), (dst), (dstlen))
#endif

/*
 * EXPLAIN for the foreign tables: 18 split commands/explain.h, moving
 * ExplainState into commands/explain_state.h and ExplainProperty*() into
 * commands/explain_format.h.  A file that writes EXPLAIN output includes
 * "commands/explain.h" and then KW_EXPLAIN_STATE_H and KW_EXPLAIN_FORMAT_H
 * (computed includes: explain.h again, a no-op, before 18).
 */
#if PG_VERSION_NUM >= 180000
#define KW_EXPLAIN_STATE_H "commands/explain_state.h"
#define KW_EXPLAIN_FORMAT_H "commands/explain_format.h"
#else
#define KW_EXPLAIN_STATE_H "commands/explain.h"
#define KW_EXPLAIN_FORMAT_H "commands/explain.h"
#endif

/*
 * KW_MAKE_JSON_LEX(json, len) / KW_FREE_JSON_LEX(lex): a lexer over `len`
 * bytes of UTF-8 JSON text for pg_parse_json, without de-escaping
 * (common/jsonapi.h).  From 17 on makeJsonLexContextCstringLen takes the
 * context to fill first (NULL: allocated, and freed by freeJsonLexContext);
 * through 16 it returns a palloc'd one, freed by pfree.
 */
#if PG_VERSION_NUM >= 170000
#define KW_MAKE_JSON_LEX(json, len) \
	makeJsonLexContextCstringLen(NULL, (json), (len), PG_UTF8, false)
#define KW_FREE_JSON_LEX(lex) freeJsonLexContext(lex)
#else
#define KW_MAKE_JSON_LEX(json, len) \
	makeJsonLexContextCstringLen((json), (len), PG_UTF8, false)
#define KW_FREE_JSON_LEX(lex) pfree(lex)
#endif

/*
 * KW_MAKE_JSON_LEX_ESCAPES(json, len, encoding): the same over text in
 * `encoding` that de-escapes strings, so that pg_parse_json refuses what
 * jsonb input refuses (\u0000, a lone surrogate); freed by
 * KW_FREE_JSON_LEX.
 */
#if PG_VERSION_NUM >= 170000
#define KW_MAKE_JSON_LEX_ESCAPES(json, len, encoding) \
	makeJsonLexContextCstringLen(NULL, (json), (len), (encoding), true)
#else
#define KW_MAKE_JSON_LEX_ESCAPES(json, len, encoding) \
	makeJsonLexContextCstringLen((json), (len), (encoding), true)
#endif

#endif							/* KW_PG_COMPAT_H */
