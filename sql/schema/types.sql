-- interval_range: a range of intervals, the type of a watch's retry ranges
-- (registrations.retry_relist_after and retry_watch_after, client-go's
-- RetryRelistAfter/RetryWatchAfter): the delay before the next LIST, or
-- the next WATCH, after a failure is drawn uniformly inside the range.
-- PostgreSQL makes its multirange type kwatch.interval_multirange with it.
CREATE TYPE kwatch.interval_range AS RANGE (subtype = interval);

-- apply_result: what kwatch.apply() and kwatch.wait_apply() return: the
-- apply's id (NULL for a dry run or one sent at once), its state ('dry
-- run', 'applied', 'pending', 'failed'), and the object as the server
-- stored it (or would store it, for a dry run; at commit: the dry run's
-- answer until the send).  A Secret's data and stringData are left out.
CREATE TYPE kwatch.apply_result AS (
  id bigint,
  state text,
  object jsonb
);
