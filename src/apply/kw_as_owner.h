/*-------------------------------------------------------------------------
 *
 * kw_as_owner.h
 *		Writing as a mirror table's owner (as_owner.c), why rows change and
 *		history retention (history.c), NOTIFY (notify.c): the apply side's,
 *		also used by the SQL functions that run owner statements.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KW_AS_OWNER_H
#define KW_AS_OWNER_H

#include "kw_common.h"

/* Acting as a mirror table's owner (as_owner.c). */
typedef struct KwAsOwner
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	bool		switched;
} KwAsOwner;

extern Oid	kw_rel_owner(Oid relid);
extern void kw_as_owner_begin(Oid owner, KwAsOwner *s);
extern void kw_as_owner_end(KwAsOwner *s);
extern void kw_fire_deferred_triggers(void);
extern void kw_fire_deferred_triggers_as(Oid role);
extern void kw_refuse_deferral_begin(void);
extern void kw_refuse_deferral_end(void);
extern void kw_as_owner_init(void);

/* in history.c: why mirror rows change now; history retention */
typedef enum KwChangeOrigin
{
	KW_ORIGIN_WATCH = 0,		/* an event, or a LIST that found the object */
	KW_ORIGIN_RELIST,			/* rows a LIST no longer had */
	KW_ORIGIN_UNWATCH			/* rows of a watch being removed */
} KwChangeOrigin;

extern void kw_change_origin_set(KwChangeOrigin origin);
extern void kw_change_managers_note(const KwObject *obj);
extern bool kw_history_prune_table(Oid history_oid);

/* in notify.c */
extern void kw_notify(KwRegistration *reg, const KwChange *c, int64 seq);
extern char *kw_notify_payload(int64 seq, const char *cluster,
							   const KwChange *c, bool with_names);

#endif							/* KW_AS_OWNER_H */
