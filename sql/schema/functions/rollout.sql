-- ---------------------------------------------------------------------
-- kwatch.rollout_undo(): `kubectl rollout undo deployment/<name>
-- [--to-revision=N]` as one call (doc/reference.md, "Relations").
-- ---------------------------------------------------------------------

-- rollout_undo(deployment, namespace => NULL, server => NULL, to_revision
-- => 0) -> text: rolls Deployment `deployment` back to the pod template of
-- its ReplicaSet of revision `to_revision` (the annotation
-- deployment.kubernetes.io/revision; 0: the previous revision, the
-- second-highest), as kubectl's DeploymentRollbacker does
-- (k8s.io/kubectl/pkg/polymorphichelpers/rollback.go): the ReplicaSets are
-- those of the mirror whose controller is the Deployment (by uid); the
-- template is compared with the Deployment's ignoring the pod-template-hash
-- label, and an equal one is not written ("skipped rollback"); otherwise
-- spec.template becomes the ReplicaSet's without that label, and
-- metadata.annotations the ReplicaSet's, except the annotations kubectl
-- keeps from the Deployment (last-applied-configuration, revision,
-- revision-history, desired-replicas, max-replicas, rollbackTo).
-- The Deployment and its ReplicaSets are read from their mirror tables
-- (kwatch._relation_table); the write is an UPDATE through a live table,
-- a temporary foreign table pg_temp.kwatch_rollout_undo of the server
-- (src/live/fdw_modify.c): a JSON merge patch of the difference, with
-- fieldManager=kwatch and the resourceVersion of the mirror's row, so a
-- Deployment changed since the mirror last saw it is not written (where
-- kubectl's JSON patch has no precondition).  Sent in the statement with
-- the caller's credentials for the server; not undone by ROLLBACK.
-- Returns kubectl's words: 'deployment.apps/<name> rolled back' or
-- 'deployment.apps/<name> skipped rollback (current template already
-- matches revision N)'.
-- Errors: those of _relation_object (42704 no such Deployment in the
-- mirror, 42P08); 22023 for a negative to_revision or a revision no
-- ReplicaSet has; 55000 for a paused Deployment or one without a previous
-- revision; 40001 when the Deployment changed (or went) since the mirror's
-- row; a live write's (42501 without USAGE on the server or refused by
-- RBAC, ...).  Needs TEMPORARY on the database, SELECT on the mirror
-- tables of deployments and replicasets.
CREATE OR REPLACE FUNCTION kwatch.rollout_undo(deployment text, namespace text DEFAULT NULL, server text DEFAULT NULL,
                                               to_revision bigint DEFAULT 0) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  d record := kwatch._relation_object('deployments.apps', deployment, namespace, server);
  skip constant text[] := ARRAY['kubectl.kubernetes.io/last-applied-configuration',
                                'deployment.kubernetes.io/revision',
                                'deployment.kubernetes.io/revision-history',
                                'deployment.kubernetes.io/desired-replicas',
                                'deployment.kubernetes.io/max-replicas',
                                'deprecated.deployment.rollback.to'];
  rs record;
  latest bigint := -1;
  previous bigint := -1;
  latest_rs jsonb;
  previous_rs jsonb;
  tpl jsonb;
  current_tpl jsonb;
  ann jsonb;
  what text := format('deployment.apps/%s', d.object->'metadata'->>'name');
  opts text;
  n integer;
BEGIN
  IF to_revision < 0 THEN
    RAISE EXCEPTION 'unable to find specified revision % in history', to_revision
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR rs IN EXECUTE format(
      'SELECT m.object, (m.annotations->>''deployment.kubernetes.io/revision'') AS rev FROM %s m'
      ' WHERE m.cluster = $1 AND m.namespace = $2 AND kwatch.controller_uid(m.owner_references) = $3',
      kwatch._relation_table('apps', 'replicasets', d.cluster))
      USING d.cluster, d.object_namespace, d.uid LOOP
    -- deploymentutil.Revision: strconv.ParseInt; a ReplicaSet without a
    -- number is no revision
    CONTINUE WHEN rs.rev IS NULL OR rs.rev !~ '^[+-]?[0-9]{1,18}$';
    IF to_revision = 0 THEN
      IF latest < rs.rev::bigint THEN
        previous := latest; previous_rs := latest_rs;
        latest := rs.rev::bigint; latest_rs := rs.object;
      ELSIF previous < rs.rev::bigint THEN
        previous := rs.rev::bigint; previous_rs := rs.object;
      END IF;
    ELSIF to_revision = rs.rev::bigint THEN
      previous := to_revision; previous_rs := rs.object;
    END IF;
  END LOOP;
  IF previous_rs IS NULL THEN
    IF to_revision > 0 THEN
      RAISE EXCEPTION 'unable to find specified revision % in history', to_revision
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = format('No ReplicaSet of %s has the annotation deployment.kubernetes.io/revision: "%s".',
                              what, to_revision);
    END IF;
    RAISE EXCEPTION 'no rollout history found for deployment "%"', d.object->'metadata'->>'name'
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  IF d.object->'spec'->'paused' = 'true' THEN
    RAISE EXCEPTION 'you cannot rollback a paused deployment; resume it first with ''kubectl rollout resume deployment/%'' and try again',
                    d.object->'metadata'->>'name'
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  -- equalIgnoreHash, and the template without the label: an empty labels
  -- map is none (apimachinery's Semantic.DeepEqual, and omitempty)
  tpl := previous_rs->'spec'->'template' #- '{metadata,labels,pod-template-hash}';
  IF tpl->'metadata'->'labels' = '{}' THEN
    tpl := tpl #- '{metadata,labels}';
  END IF;
  current_tpl := d.object->'spec'->'template' #- '{metadata,labels,pod-template-hash}';
  IF current_tpl->'metadata'->'labels' = '{}' THEN
    current_tpl := current_tpl #- '{metadata,labels}';
  END IF;
  IF tpl = current_tpl THEN
    RETURN format('%s skipped rollback (current template already matches revision %s)', what, previous);
  END IF;
  SELECT COALESCE(jsonb_object_agg(a.key, a.value), '{}') INTO ann
    FROM (SELECT e.key, e.value FROM jsonb_each(COALESCE(d.object->'metadata'->'annotations', '{}')) e
           WHERE e.key = ANY (skip)
          UNION ALL
          SELECT e.key, e.value FROM jsonb_each(COALESCE(previous_rs->'metadata'->'annotations', '{}')) e
           WHERE e.key <> ALL (skip)) a;
  -- the write: a live table of the server's Deployments, for this call
  opts := format('resource %L, api_version %L, namespaced %L, kind %L',
                 'deployments.apps', split_part(d.object->>'apiVersion', '/', 2), 'true', 'Deployment');
  IF to_regclass('pg_temp.kwatch_rollout_undo') IS NOT NULL THEN
    DROP FOREIGN TABLE pg_temp.kwatch_rollout_undo;
  END IF;
  EXECUTE format('CREATE FOREIGN TABLE pg_temp.kwatch_rollout_undo (namespace text, name text, uid text,'
                 ' resource_version text, object jsonb) SERVER %I OPTIONS (%s)', d.cluster, opts);
  EXECUTE 'UPDATE pg_temp.kwatch_rollout_undo'
          '   SET object = jsonb_set(jsonb_set(object, ''{spec,template}'', $5), ''{metadata,annotations}'', $6)'
          ' WHERE namespace = $1 AND name = $2 AND uid = $3 AND resource_version = $4'
    USING d.object_namespace, d.object->'metadata'->>'name', d.uid,
          d.object->'metadata'->>'resourceVersion', tpl, ann;
  GET DIAGNOSTICS n = ROW_COUNT;
  DROP FOREIGN TABLE pg_temp.kwatch_rollout_undo;
  IF n = 0 THEN
    RAISE EXCEPTION 'deployment "%" changed since the mirror''s row (resourceVersion %) was read',
                    d.object->'metadata'->>'name', d.object->'metadata'->>'resourceVersion'
      USING ERRCODE = 'serialization_failure',
            HINT = 'Wait for the mirror (kwatch.wait_current(''deployments.apps'', ...)) and try again.';
  END IF;
  RETURN format('%s rolled back', what);
END
$$;
