-- ---------------------------------------------------------------------
-- Relations between mirrored objects, one call each (doc/reference.md,
-- "Relations"): a pod's owner chain, the pods of a controller, a Service
-- or a Node, a Service's EndpointSlices, a pod's node, a claim's volume and
-- a volume's claim; and kwatch.rollout_undo(), `kubectl rollout undo` of a
-- Deployment.  Every relation stays within one server (the mirror tables'
-- `cluster` column).  The tables are looked up in kwatch.tables when the
-- function runs (a resource's table may be made after CREATE EXTENSION, or
-- under another name) and read with dynamic SQL as the caller: these are
-- ordinary SECURITY INVOKER functions, so a role that may not SELECT a
-- mirror table gets PostgreSQL's own 42501 for it, and row-level security
-- applies as in any query.
-- ---------------------------------------------------------------------

-- related_object: a row of what a relation function returns, the identity
-- of a mirrored object and the object itself (join back to its table, or
-- its kubectl.<table> view, on (cluster, uid)).
CREATE TYPE kwatch.related_object AS (cluster text, namespace text, name text, uid text, object jsonb);

-- owner_link: a row of owner_chain(): an object at `depth` steps from the
-- one asked about, and whether a mirror holds it.
CREATE TYPE kwatch.owner_link AS (depth integer, api_version text, kind text, namespace text, name text,
                                  uid text, mirrored boolean);

-- controller_uid(owner_references) -> text: the uid of the owner reference
-- with `controller: true` (an object has at most one: apimachinery's
-- metav1.GetControllerOf, ValidateOwnerReferences), NULL when there is none
-- or `owner_references` is not an array.  A SQL-standard body (bound when
-- made, so no search_path is needed) without SET, so that the planner
-- inlines it into the index expression and the queries: a call through the
-- SQL-function executor costs about 100 us per row written.  IMMUTABLE, so that mirror tables
-- of controlled resources carry an expression index on it
-- (create_mirror_table) which the relation functions use.
CREATE OR REPLACE FUNCTION kwatch.controller_uid(owner_references jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN pg_catalog.jsonb_path_query_first(owner_references,
                                             'strict $[*] ? (@.controller == true).uid', '{}', true)
           OPERATOR(pg_catalog.#>>) '{}';

-- _relation_resource(resource) -> (api_group, plural): the resource a
-- relation function names, by its plural, singular, kind or kubectl short
-- name (the built-in resources the relations concern), or `plural.group`.
-- A name it does not know is taken as a core-group plural.  Not discovery
-- (kwatch.watch() resolves names through the server): these functions ask
-- no server.
CREATE OR REPLACE FUNCTION kwatch._relation_resource(resource text, OUT api_group text, OUT plural text) RETURNS record
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(k.g, CASE WHEN strpos(r, '.') > 0 THEN substr(r, strpos(r, '.') + 1) ELSE '' END),
         COALESCE(k.p, split_part(r, '.', 1))
    FROM (SELECT lower(resource) AS r) n
    LEFT JOIN (VALUES
      ('', 'pods', ARRAY['pod', 'po']),
      ('', 'nodes', ARRAY['node', 'no']),
      ('', 'services', ARRAY['service', 'svc']),
      ('', 'persistentvolumeclaims', ARRAY['persistentvolumeclaim', 'pvc']),
      ('', 'persistentvolumes', ARRAY['persistentvolume', 'pv']),
      ('', 'replicationcontrollers', ARRAY['replicationcontroller', 'rc']),
      ('apps', 'deployments', ARRAY['deployment', 'deploy']),
      ('apps', 'replicasets', ARRAY['replicaset', 'rs']),
      ('apps', 'statefulsets', ARRAY['statefulset', 'sts']),
      ('apps', 'daemonsets', ARRAY['daemonset', 'ds']),
      ('batch', 'jobs', ARRAY['job']),
      ('batch', 'cronjobs', ARRAY['cronjob', 'cj']),
      ('discovery.k8s.io', 'endpointslices', ARRAY['endpointslice'])) AS k(g, p, names)
      ON n.r = k.p OR n.r = ANY (k.names)
      OR n.r = k.p || '.' || k.g
$$;

-- _relation_table(api_group, plural, server, required) -> regclass: the
-- mirror table of a resource that holds `server`'s rows: the only table
-- kwatch made for the resource (kwatch.tables, a row whose table still has
-- its name in schema k8s), or of several, the one a watch of `server` that
-- the caller may see (kwatch.watches) writes, else the one of those the
-- caller may SELECT that holds rows of `server`.  Only tables the caller
-- may trust are taken: owned by a superuser or, for a caller that is no
-- superuser, by a role whose rights it has (pg_has_role USAGE); reading
-- another role's table would run that owner's code (a row-level security
-- policy, an implicit cast of a column type of its own) with the caller's
-- rights, and rollout_undo would write what that owner put in it.  NULL
-- when there is none and not `required`.  Errors: 42501 when `required`
-- and only untrusted tables exist; 42704 when `required` and there is none
-- (HINT: the watch() to make it); 42P08 when several tables remain.
CREATE OR REPLACE FUNCTION kwatch._relation_table(api_group text, plural text, server text, required boolean DEFAULT true) RETURNS regclass
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  tabs regclass[];
  untrusted regclass[];
  has regclass[];
  f regclass;
  probe boolean;
  rname text := CASE api_group WHEN '' THEN plural ELSE plural || '.' || api_group END;
  caller_super boolean := (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user);
BEGIN
  SELECT array_agg(t.relid ORDER BY t.relname) FILTER (WHERE o.rolsuper OR (NOT caller_super AND pg_has_role(c.relowner, 'USAGE'))),
         array_agg(t.relid ORDER BY t.relname) FILTER (WHERE NOT (o.rolsuper OR (NOT caller_super AND pg_has_role(c.relowner, 'USAGE'))))
    INTO tabs, untrusted
    FROM kwatch.tables t JOIN pg_class c ON c.oid = t.relid JOIN pg_roles o ON o.oid = c.relowner
   WHERE t.api_group = _relation_table.api_group AND t.plural = _relation_table.plural
     AND c.relname = t.relname AND c.relnamespace = to_regnamespace('k8s');
  IF cardinality(tabs) > 1 THEN
    SELECT COALESCE(array_agg(u.rel ORDER BY u.rel::text), tabs) INTO tabs
      FROM unnest(tabs) u(rel)
     WHERE EXISTS (SELECT 1 FROM kwatch.watches w
                    WHERE w.server = _relation_table.server AND w.table_name = u.rel::text);
  END IF;
  IF cardinality(tabs) > 1 THEN
    -- no one watch: the tables the caller may read that hold rows of the
    -- server (a primary-key probe each)
    has := '{}';
    FOREACH f IN ARRAY tabs LOOP
      CONTINUE WHEN NOT has_table_privilege(f, 'SELECT');
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s t WHERE t.cluster = $1)', f) INTO probe USING server;
      IF probe THEN
        has := has || f;
      END IF;
    END LOOP;
    IF cardinality(has) > 0 THEN
      tabs := has;
    END IF;
  END IF;
  IF cardinality(tabs) = 1 THEN
    RETURN tabs[1];
  ELSIF cardinality(tabs) > 1 THEN
    RAISE EXCEPTION 'cannot tell which mirror table of % holds server "%"''s objects: %', rname, server,
                    array_to_string(tabs, ', ')
      USING ERRCODE = 'ambiguous_parameter',
            HINT = 'Join the tables yourself; the relation functions need one table per resource and server.';
  ELSIF required AND cardinality(untrusted) > 0 THEN
    RAISE EXCEPTION 'the mirror tables of % are owned by roles the relation functions do not trust: %', rname,
                    array_to_string(untrusted, ', ')
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = CASE WHEN caller_super
                          THEN 'A superuser''s relation functions read only tables that superusers own.'
                          ELSE 'The relation functions read only tables that superusers or roles whose rights you have own.' END,
            HINT = 'Reading a table runs code of its owner (row-level security policies, casts of its types) with your rights: query it yourself if you trust its owner.';
  ELSIF required THEN
    RAISE EXCEPTION 'no mirror table of %', rname
      USING ERRCODE = 'undefined_object',
            HINT = format('Watch it first: SELECT kwatch.watch(%L, server => %L);', rname, server);
  END IF;
  RETURN NULL;
END
$$;

-- _relation_object(resource, name, namespace, server) -> (rel, server,
-- namespace, uid, object): the object `name` of `resource` in the mirror
-- table of `server` (NULL: the only kwatch server), in `namespace` (NULL:
-- the only object of that name on the server; cluster-scoped resources
-- have none).  Errors: those of _default_server and _relation_table; 42704
-- when the mirror has no such object; 42P08 when `namespace` is left out
-- and several namespaces have one of that name.
CREATE OR REPLACE FUNCTION kwatch._relation_object(resource text, name text, namespace text, server text,
    OUT rel regclass, OUT cluster text, OUT object_namespace text, OUT uid text, OUT object jsonb) RETURNS record
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  cluster := COALESCE(server, kwatch._default_server());
  rel := kwatch._relation_table((kwatch._relation_resource(resource)).api_group,
                                (kwatch._relation_resource(resource)).plural, cluster);
  FOR r IN EXECUTE format('SELECT t.namespace, t.uid, t.object FROM %s t'
                          ' WHERE t.cluster = $1 AND t.name = $2 AND ($3::text IS NULL OR t.namespace = $3)'
                          ' ORDER BY t.namespace LIMIT 2', rel)
           USING cluster, name, namespace LOOP
    n := n + 1;
    IF n > 1 THEN
      RAISE EXCEPTION '% "%" exists in several namespaces of server "%"', resource, name, cluster
        USING ERRCODE = 'ambiguous_parameter', HINT = 'Name one with namespace => ''...''.';
    END IF;
    object_namespace := r.namespace;
    uid := r.uid;
    object := r.object;
  END LOOP;
  IF n = 0 THEN
    RAISE EXCEPTION '% "%" not found in % for server "%"', resource,
                    CASE WHEN namespace IS NULL THEN name ELSE namespace || '/' || name END, rel, cluster
      USING ERRCODE = 'undefined_object',
            HINT = 'The mirror holds what the watch has synced (kwatch.wait_current() waits for a recent change).';
  END IF;
END
$$;

-- owner_chain(resource, name, namespace => NULL, server => NULL) ->
-- (depth, api_version, kind, namespace, name, uid, mirrored): the object
-- (depth 0), its controller (depth 1: the owner reference with
-- `controller: true`), that one's controller, ... up to the top owner, the
-- first object without a controller.  Each owner is looked up by the
-- reference's uid (the tables' primary key) in the mirror table of its
-- kind on the same server (the kind's resource guessed as apimachinery's
-- meta.UnsafeGuessKindToResource does, its group from the reference's
-- apiVersion); `mirrored` is false for an owner no mirror holds, which
-- ends the chain with what its reference says.  Owner references name
-- owners in the object's own namespace, or cluster-scoped ones (garbage
-- collector, k8s.io/apimachinery/pkg/apis/meta/v1 OwnerReference).  Stops
-- after 32 steps (a cycle).  Errors: those of _relation_object.
CREATE OR REPLACE FUNCTION kwatch.owner_chain(resource text, name text, namespace text DEFAULT NULL, server text DEFAULT NULL)
    RETURNS SETOF kwatch.owner_link
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  o record := kwatch._relation_object(resource, name, namespace, server);
  cur jsonb := o.object;
  l kwatch.owner_link;
  ref jsonb;
  k text;
  rel regclass;
  next_object jsonb;
BEGIN
  l.depth := 0;
  LOOP
    l := (l.depth, cur->>'apiVersion', cur->>'kind', cur->'metadata'->>'namespace',
          cur->'metadata'->>'name', cur->'metadata'->>'uid', true);
    RETURN NEXT l;
    ref := jsonb_path_query_first(COALESCE(cur->'metadata'->'ownerReferences', '[]'),
                                  'strict $[*] ? (@.controller == true)', '{}', true);
    EXIT WHEN ref IS NULL OR l.depth >= 32;
    l.depth := l.depth + 1;
    k := lower(ref->>'kind');
    k := CASE WHEN k = 'endpoints' THEN k WHEN k LIKE '%s' THEN k || 'es'
              WHEN k LIKE '%y' THEN left(k, -1) || 'ies' ELSE k || 's' END;
    rel := kwatch._relation_table(CASE WHEN strpos(ref->>'apiVersion', '/') > 0
                                       THEN split_part(ref->>'apiVersion', '/', 1) ELSE '' END,
                                  k, o.cluster, false);
    next_object := NULL;
    IF rel IS NOT NULL THEN
      EXECUTE format('SELECT t.object FROM %s t WHERE t.cluster = $1 AND t.uid = $2', rel)
        INTO next_object USING o.cluster, ref->>'uid';
    END IF;
    IF next_object IS NULL THEN
      l := (l.depth, ref->>'apiVersion', ref->>'kind', cur->'metadata'->>'namespace',
            ref->>'name', ref->>'uid', false);
      RETURN NEXT l;
      EXIT;
    END IF;
    cur := next_object;
  END LOOP;
END
$$;

-- top_owner(resource, name, namespace => NULL, server => NULL) -> the last
-- row of owner_chain(): the object's top owner (a pod of a Deployment: the
-- Deployment; an object without a controller: itself).
CREATE OR REPLACE FUNCTION kwatch.top_owner(resource text, name text, namespace text DEFAULT NULL, server text DEFAULT NULL)
    RETURNS kwatch.owner_link
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT c.* FROM kwatch.owner_chain(resource, name, namespace, server) c ORDER BY c.depth DESC LIMIT 1
$$;

-- pods_of(resource, name, namespace => NULL, server => NULL) -> (cluster,
-- namespace, name, uid, object) of pods: those of a Deployment (the pods
-- whose controller is one of the ReplicaSets whose controller it is:
-- deploymentutil.GetAllReplicaSets' ControllerRef rule), of a CronJob
-- (through its Jobs), of any other controller (ReplicaSet, StatefulSet,
-- DaemonSet, Job, ReplicationController, a custom resource: the pods whose
-- controller it is); of a Service (its namespace's pods whose labels
-- contain spec.selector; an absent or empty selector selects none, as the
-- endpoints and EndpointSlice controllers do, which skip such Services);
-- of a Node (spec.nodeName); of a PersistentVolumeClaim (the pods with a
-- volume of that claim).  Controller links use the index on
-- kwatch.controller_uid(owner_references), Services the labels GIN index.
-- Errors: those of _relation_object; 42704 without a mirror of pods (or of
-- the ReplicaSets, Jobs in between).
CREATE OR REPLACE FUNCTION kwatch.pods_of(resource text, name text, namespace text DEFAULT NULL, server text DEFAULT NULL)
    RETURNS SETOF kwatch.related_object
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  o record := kwatch._relation_object(resource, name, namespace, server);
  r record := kwatch._relation_resource(resource);
  pods regclass := kwatch._relation_table('', 'pods', o.cluster);
  q text := format('SELECT p.cluster, p.namespace, p.name, p.uid, p.object FROM %s p WHERE p.cluster = $1 ', pods);
  selector jsonb;
  owners text[];
BEGIN
  IF (r.api_group, r.plural) = ('apps', 'deployments') OR (r.api_group, r.plural) = ('batch', 'cronjobs') THEN
    -- the controllers in between first, then their pods: two index scans
    EXECUTE format('SELECT array_agg(m.uid) FROM %s m WHERE m.cluster = $1 AND m.namespace = $2'
                   ' AND kwatch.controller_uid(m.owner_references) = $3',
                   kwatch._relation_table(CASE r.plural WHEN 'deployments' THEN 'apps' ELSE 'batch' END,
                                          CASE r.plural WHEN 'deployments' THEN 'replicasets' ELSE 'jobs' END,
                                          o.cluster))
      INTO owners USING o.cluster, o.object_namespace, o.uid;
    RETURN QUERY EXECUTE q || 'AND p.namespace = $2 AND kwatch.controller_uid(p.owner_references) = ANY ($3)'
                              ' ORDER BY p.name'
      USING o.cluster, o.object_namespace, COALESCE(owners, '{}');
  ELSIF (r.api_group, r.plural) = ('', 'services') THEN
    selector := o.object->'spec'->'selector';
    IF jsonb_typeof(selector) = 'object' AND selector <> '{}' THEN
      RETURN QUERY EXECUTE q || 'AND p.namespace = $2 AND p.labels @> $3 ORDER BY p.name'
        USING o.cluster, o.object_namespace, selector;
    END IF;
  ELSIF (r.api_group, r.plural) = ('', 'nodes') THEN
    RETURN QUERY EXECUTE q || 'AND p.node_name = $2 ORDER BY p.namespace, p.name'
      USING o.cluster, o.object->'metadata'->>'name';
  ELSIF (r.api_group, r.plural) = ('', 'persistentvolumeclaims') THEN
    RETURN QUERY EXECUTE q || 'AND p.namespace = $2 AND p.object->''spec''->''volumes'' @> $3 ORDER BY p.name'
      USING o.cluster, o.object_namespace,
            jsonb_build_array(jsonb_build_object('persistentVolumeClaim',
                                                 jsonb_build_object('claimName', o.object->'metadata'->>'name')));
  ELSE
    RETURN QUERY EXECUTE q || 'AND kwatch.controller_uid(p.owner_references) = $2 ORDER BY p.name'
      USING o.cluster, o.uid;
  END IF;
END
$$;

-- endpoint_slices_of(service, namespace => NULL, server => NULL) ->
-- (cluster, namespace, name, uid, object): the EndpointSlices of a Service,
-- those of its namespace labelled kubernetes.io/service-name=<service>
-- (discovery.k8s.io's LabelServiceName, set by the EndpointSlice
-- controller; the mirror of endpointslices.discovery.k8s.io of any
-- version: v1beta1 on Kubernetes 1.20, v1 from 1.21).  Errors: those of
-- _relation_object; 42704 without a mirror of EndpointSlices.
CREATE OR REPLACE FUNCTION kwatch.endpoint_slices_of(service text, namespace text DEFAULT NULL, server text DEFAULT NULL)
    RETURNS SETOF kwatch.related_object
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  o record := kwatch._relation_object('services', service, namespace, server);
BEGIN
  RETURN QUERY EXECUTE format(
    'SELECT e.cluster, e.namespace, e.name, e.uid, e.object FROM %s e'
    ' WHERE e.cluster = $1 AND e.namespace = $2 AND e.labels @> $3 ORDER BY e.name',
    kwatch._relation_table('discovery.k8s.io', 'endpointslices', o.cluster))
    USING o.cluster, o.object_namespace,
          jsonb_build_object('kubernetes.io/service-name', o.object->'metadata'->>'name');
END
$$;

-- node_of(pod, namespace => NULL, server => NULL) -> (cluster, name, uid,
-- object): the Node a pod is bound to (spec.nodeName, which the scheduler's
-- binding sets); no row for a pod not yet bound or a node the mirror does
-- not hold.  Errors: those of _relation_object; 42704 without a mirror of
-- nodes.
CREATE OR REPLACE FUNCTION kwatch.node_of(pod text, namespace text DEFAULT NULL, server text DEFAULT NULL)
    RETURNS TABLE (cluster text, name text, uid text, object jsonb)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  o record := kwatch._relation_object('pods', pod, namespace, server);
BEGIN
  RETURN QUERY EXECUTE format(
    'SELECT n.cluster, n.name, n.uid, n.object FROM %s n'
    ' WHERE n.cluster = $1 AND n.namespace IS NULL AND n.name = $2',
    kwatch._relation_table('', 'nodes', o.cluster))
    USING o.cluster, o.object->'spec'->>'nodeName';
END
$$;

-- volume_of(claim, namespace => NULL, server => NULL) -> (cluster, name,
-- uid, object): the PersistentVolume of a PersistentVolumeClaim: the one
-- its spec.volumeName names; for a claim not yet bound, a volume whose
-- spec.claimRef names the claim (by namespace and name, and uid when the
-- reference has one: a volume pre-bound to it, which the PV controller
-- binds; pkg/controller/volume/persistentvolume/pv_controller.go).
-- Errors: those of _relation_object; 42704 without a mirror of
-- persistentvolumes.
CREATE OR REPLACE FUNCTION kwatch.volume_of(claim text, namespace text DEFAULT NULL, server text DEFAULT NULL)
    RETURNS TABLE (cluster text, name text, uid text, object jsonb)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  o record := kwatch._relation_object('persistentvolumeclaims', claim, namespace, server);
  rel regclass := kwatch._relation_table('', 'persistentvolumes', o.cluster);
BEGIN
  IF COALESCE(o.object->'spec'->>'volumeName', '') <> '' THEN
    RETURN QUERY EXECUTE format(
      'SELECT v.cluster, v.name, v.uid, v.object FROM %s v'
      ' WHERE v.cluster = $1 AND v.namespace IS NULL AND v.name = $2', rel)
      USING o.cluster, o.object->'spec'->>'volumeName';
  ELSE
    RETURN QUERY EXECUTE format(
      'SELECT v.cluster, v.name, v.uid, v.object FROM %s v'
      ' WHERE v.cluster = $1 AND v.object->''spec''->''claimRef''->>''namespace'' = $2'
      '   AND v.object->''spec''->''claimRef''->>''name'' = $3'
      '   AND COALESCE(v.object->''spec''->''claimRef''->>''uid'', $4) = $4 ORDER BY v.name', rel)
      USING o.cluster, o.object_namespace, o.object->'metadata'->>'name', o.uid;
  END IF;
END
$$;

-- claim_of(volume, server => NULL) -> (cluster, namespace, name, uid,
-- object): the PersistentVolumeClaim a PersistentVolume's spec.claimRef
-- names (namespace and name, and uid when the reference has one: a claim
-- deleted and made again under the name is not the volume's).  Errors:
-- those of _relation_object; 42704 without a mirror of
-- persistentvolumeclaims.
CREATE OR REPLACE FUNCTION kwatch.claim_of(volume text, server text DEFAULT NULL)
    RETURNS SETOF kwatch.related_object
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  o record := kwatch._relation_object('persistentvolumes', volume, NULL, server);
  ref jsonb := o.object->'spec'->'claimRef';
BEGIN
  IF ref IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY EXECUTE format(
    'SELECT c.cluster, c.namespace, c.name, c.uid, c.object FROM %s c'
    ' WHERE c.cluster = $1 AND c.namespace = $2 AND c.name = $3 AND ($4::text IS NULL OR c.uid = $4)',
    kwatch._relation_table('', 'persistentvolumeclaims', o.cluster))
    USING o.cluster, ref->>'namespace', ref->>'name', ref->>'uid';
END
$$;

-- _create_relation_indexes(rel, api_group, plural): the indexes the
-- relation functions use, on mirror table `rel` of that resource, unless
-- an index of the same definition exists: on the controller's uid
-- (kwatch.controller_uid(owner_references)) for the resources whose
-- objects controllers own and relations go down to (pods, ReplicaSets,
-- Jobs), and on (cluster, node_name) for pods (pods_of a Node).  Called by
-- create_mirror_table, and by the 0.8.0 update for existing tables.
CREATE OR REPLACE FUNCTION kwatch._create_relation_indexes(rel regclass, api_group text, plural text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  cols text;
BEGIN
  FOREACH cols IN ARRAY CASE
      WHEN (api_group, plural) = ('', 'pods')
        THEN ARRAY['kwatch.controller_uid(owner_references)', 'cluster, node_name']
      WHEN (api_group, plural) IN (('apps', 'replicasets'), ('batch', 'jobs'))
        THEN ARRAY['kwatch.controller_uid(owner_references)']
      ELSE ARRAY[]::text[] END LOOP
    CONTINUE WHEN EXISTS (
      SELECT 1 FROM pg_index i
       WHERE i.indrelid = rel
         AND regexp_replace(pg_get_indexdef(i.indexrelid), '^.* USING btree \((.*)\)$', '\1') = cols);
    EXECUTE format('CREATE INDEX ON %s (%s)', rel, cols);
  END LOOP;
END
$$;
REVOKE ALL ON FUNCTION kwatch._create_relation_indexes(regclass, text, text) FROM PUBLIC;
