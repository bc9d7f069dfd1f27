-- ---------------------------------------------------------------------
-- Rows that follow Kubernetes RBAC (src/functions/rbac_rows.c;
-- doc/security.md, "Rows that follow RBAC"): an opt-in per mirror table
-- after which a role reads the rows of cluster C and namespace N only when
-- its own Kubernetes identity on C may list the table's resource in N.
-- The opt-in is the row-level security policy kwatch_rbac itself (on the
-- table and its history table): pg_policy is where PostgreSQL, kwatch and
-- a reader all see it, and only the table's owner can make or drop it.
-- ---------------------------------------------------------------------

-- rbac_visible(tbl, cluster, namespace) -> boolean: whether the current
-- role may read a row of mirror table tbl (or of the mirror table whose
-- history table tbl is: each policy names its own table, so that it
-- depends on no other and a dump restores it by name, never by OID) of
-- that cluster and namespace:
-- a SelfSubjectAccessReview (verb list, the table's group and resource)
-- made with the role's own credentials on server `cluster` (its user
-- mapping, else the PUBLIC mapping), cluster-wide first, else in the
-- namespace; cached per query and per backend (kwatch.rbac_decision_max_age,
-- and the server's watched RBAC objects).  Never an error: any failure is
-- false (one WARNING per query and server, naming no namespace).  LEAKPROOF,
-- so that the planner may use it under RLS before the user's own quals;
-- PARALLEL UNSAFE: its requests run in a subtransaction.
CREATE OR REPLACE FUNCTION kwatch.rbac_visible(tbl regclass, cluster text, namespace text) RETURNS boolean
    LANGUAGE c STABLE LEAKPROOF PARALLEL UNSAFE
    AS 'MODULE_PATHNAME', 'kwatch_rbac_visible';

-- _rbac_rows_tables(tbl) -> setof regclass: mirror table tbl, then its
-- history table if it has one (kwatch.history_tables): the tables that
-- enable_rbac_rows and disable_rbac_rows put the policy kwatch_rbac on or
-- take it off.  ERRORs 42P01 if tbl is no mirror table, 42501 unless the
-- caller owns it (as ALTER TABLE would).  Runs with the caller's rights.
CREATE OR REPLACE FUNCTION kwatch._rbac_rows_tables(tbl regclass) RETURNS SETOF regclass
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  t record;
BEGIN
  SELECT m.relid, m.relname INTO t FROM kwatch.tables m WHERE m.relid = tbl;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'relation % is not a kwatch mirror table', tbl
      USING ERRCODE = '42P01', HINT = 'kwatch.tables lists them.';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = tbl
                 AND pg_has_role(current_user, c.relowner, 'USAGE')) THEN
    RAISE EXCEPTION 'must be owner of table %', tbl
      USING ERRCODE = '42501',
            DETAIL = 'Only the owner of a mirror table chooses who reads its rows.';
  END IF;
  RETURN NEXT tbl;
  RETURN QUERY SELECT x.history_oid::regclass FROM kwatch.history_tables x
                 JOIN pg_class c ON c.oid = x.history_oid
                WHERE x.table_name = t.relname;
END
$_$;

-- enable_rbac_rows(tbl) -> void: turns the decision on for mirror table
-- tbl: ENABLE ROW LEVEL SECURITY and the policy kwatch_rbac FOR SELECT
-- USING (kwatch.rbac_visible(tbl, cluster, namespace)) on the table and on
-- its history table (kwatch.history_tables), and watches (kwatch.watch(),
-- as the caller) of roles, rolebindings, clusterroles and
-- clusterrolebindings on each server that writes the table, unless a watch
-- of the whole resource exists there already: their changes end the
-- cached decisions of that server.  The owner and superusers see every row
-- (RLS exempts them; no FORCE).  The kubectl.* views are security_invoker
-- already, so they read as the caller and filter the same way.  Runs with
-- the caller's rights; idempotent.  ERRORs 42P01 if tbl is no mirror
-- table, 42501 unless the caller owns it (as ALTER TABLE would).
CREATE OR REPLACE FUNCTION kwatch.enable_rbac_rows(tbl regclass) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  r regclass;
  s text;
  res text;
BEGIN
  FOR r IN SELECT * FROM kwatch._rbac_rows_tables(tbl) LOOP
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', r);
    EXECUTE format('DROP POLICY IF EXISTS kwatch_rbac ON %s', r);
    EXECUTE format('CREATE POLICY kwatch_rbac ON %s FOR SELECT USING '
                   '(kwatch.rbac_visible(%L::regclass, cluster, namespace))', r, r::text);
  END LOOP;
  -- the RBAC objects of each server that writes the table, watched
  FOR s IN SELECT DISTINCT w.server FROM kwatch.watches w
            WHERE to_regclass(w.table_name) = tbl ORDER BY 1 LOOP
    FOREACH res IN ARRAY ARRAY['roles', 'rolebindings', 'clusterroles', 'clusterrolebindings'] LOOP
      CONTINUE WHEN EXISTS (SELECT 1 FROM kwatch.watches w
                             WHERE w.server = s
                               AND w.resource = res || '.rbac.authorization.k8s.io'
                               AND w.namespace IS NULL AND w.label_selector IS NULL
                               AND w.field_selector IS NULL);
      PERFORM kwatch.watch(res || '.rbac.authorization.k8s.io', s, notify => false);
    END LOOP;
  END LOOP;
END
$_$;

-- disable_rbac_rows(tbl) -> void: drops the policy kwatch_rbac from mirror
-- table tbl and its history table, and disables row level security on
-- each that has no other policy left; the RBAC watches stay (unwatch()
-- them).  Runs with the caller's rights; idempotent.  ERRORs as
-- enable_rbac_rows.
CREATE OR REPLACE FUNCTION kwatch.disable_rbac_rows(tbl regclass) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  r regclass;
BEGIN
  FOR r IN SELECT * FROM kwatch._rbac_rows_tables(tbl) LOOP
    EXECUTE format('DROP POLICY IF EXISTS kwatch_rbac ON %s', r);
    IF NOT EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = r) THEN
      EXECUTE format('ALTER TABLE %s DISABLE ROW LEVEL SECURITY', r);
    END IF;
  END LOOP;
END
$_$;
