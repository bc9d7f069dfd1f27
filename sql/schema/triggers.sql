-- check_apply_timeout: a non-superuser's watch may not have no deadline
-- (apply_timeout 0) nor one longer than kwatch.apply_timeout; a watch
-- given to another role (REASSIGN OWNED) falls back to the setting's
-- (_check_apply_timeout, functions/watch.sql).
CREATE TRIGGER check_apply_timeout BEFORE INSERT OR UPDATE OF apply_timeout, owner
  ON kwatch.registrations
  FOR EACH ROW EXECUTE FUNCTION kwatch._check_apply_timeout();
