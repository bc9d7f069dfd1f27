/*-------------------------------------------------------------------------
 *
 * caller.c
 *		Who called kwatch.watch/unwatch/relist: the role kwatch's privilege
 *		checks apply to.  Set by the privileged entry points (functions/
 *		privileged.c) and by ownership.c; read by every check (discovery as
 *		the caller, the implementations through kwatch._caller()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "kw_common.h"

/* The caller of the privileged entry point running now, if any. */
static Oid	current_caller = InvalidOid;

/*
 * kw_current_caller: the role kwatch's privilege checks apply to: the
 * caller of the kwatch.watch/unwatch/relist call in progress (see above),
 * else the current user.
 */
Oid
kw_current_caller(void)
{
	return OidIsValid(current_caller) ? current_caller : GetUserId();
}

/*
 * kw_set_current_caller: makes `caller` the role kw_current_caller()
 * returns (InvalidOid: the current user again); returns the previous one,
 * to be restored.  For ownership.c, which removes watches for the issuer
 * of DROP OWNED.
 */
Oid
kw_set_current_caller(Oid caller)
{
	Oid			prev = current_caller;

	current_caller = caller;
	return prev;
}
