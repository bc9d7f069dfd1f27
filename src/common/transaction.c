/*-------------------------------------------------------------------------
 *
 * transaction.c
 *		Running a piece of work in a short transaction of its own, in a
 *		background worker (the kwatch worker, an apply worker).
 *
 * No kwatch process holds a transaction open while it waits on the network
 * or on the transfer: a lock or a snapshot held across a slow stream would
 * hold back VACUUM and block DDL on the mirror tables.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "kw_common.h"

/* set by as_owner.c (kw_as_owner_init); see kw_common.h */
KwTxnStartHook kw_transaction_start_hook = NULL;

/*
 * kw_run_in_transaction: runs body(arg) in its own transaction with SPI
 * connected and a snapshot pushed, and commits.  On ERROR, rolls back and
 * returns false with the message (palloc'd in the caller's context) and
 * SQLSTATE; the error is also written to the server log.  Returns true on
 * commit.
 */
bool
kw_run_in_transaction(KwTxnBody body, void *arg, char **errmsg, int *sqlstate)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = true;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		PushActiveSnapshot(GetTransactionSnapshot());
		/*
		 * a table owner's deferrable triggers fire as the owner (as_owner.c);
		 * without the hook they could fire at COMMIT under this process's
		 * identity, so its absence is an error, never a skip
		 */
		if (kw_transaction_start_hook == NULL)
			elog(ERROR, "kwatch: the transaction start hook is not installed (kw_as_owner_init)");
		kw_transaction_start_hook();
		body(arg);
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(oldcxt);
		ed = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		MemoryContextSwitchTo(oldcxt);
		if (errmsg)
			*errmsg = pstrdup(ed->message);
		if (sqlstate)
			*sqlstate = ed->sqlerrcode;
		FreeErrorData(ed);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	pgstat_report_stat(false);
	return ok;
}

/*
 * kw_in_subxact: runs fn(arg) inside a subtransaction.  Returns NULL when it
 * returned (the subtransaction released: SPI_tuptable holds what its last
 * statement returned), else the error's message, its SQLSTATE in
 * *sqlstate, the subtransaction rolled back and the outer transaction
 * usable (the pattern of PL/pgSQL's exception blocks,
 * src/pl/plpgsql/src/pl_exec.c, exec_stmt_block).  The caller is inside a
 * transaction (kw_run_in_transaction's body, or a backend's statement).
 */
char *
kw_in_subxact(KwTxnBody fn, void *arg, int *sqlstate)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	char	   *volatile err = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(oldcxt);
		ed = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		err = pstrdup(ed->message);
		*sqlstate = ed->sqlerrcode;
		FreeErrorData(ed);
	}
	PG_END_TRY();
	return err;
}
