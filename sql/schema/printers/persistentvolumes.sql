-- ---------------------------------------------------------------------
-- PersistentVolumes: printers.go printPersistentVolume
-- ---------------------------------------------------------------------

-- persistentvolume_capacity(object jsonb) -> text: CAPACITY,
-- spec.capacity.storage, "0" when unset.  printers.go printPersistentVolume.
CREATE OR REPLACE FUNCTION kwatch.persistentvolume_capacity(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->'capacity'->>'storage', '0') $$;
COMMENT ON FUNCTION kwatch.persistentvolume_capacity(jsonb) IS
'PV CAPACITY cell: spec.capacity.storage ("0" unset). printers.go printPersistentVolume.';

-- persistentvolume_access_modes(object jsonb) -> text: ACCESS MODES, "RWO".
-- printers.go printPersistentVolume.
CREATE OR REPLACE FUNCTION kwatch.persistentvolume_access_modes(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_access_modes(object->'spec'->'accessModes') $$;
COMMENT ON FUNCTION kwatch.persistentvolume_access_modes(jsonb) IS
'PV ACCESS MODES cell "RWO,ROX,RWX,RWOP". printers.go printPersistentVolume.';

-- persistentvolume_reclaim_policy(object jsonb) -> text: RECLAIM POLICY.
-- printers.go printPersistentVolume.
CREATE OR REPLACE FUNCTION kwatch.persistentvolume_reclaim_policy(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->>'persistentVolumeReclaimPolicy', '') $$;
COMMENT ON FUNCTION kwatch.persistentvolume_reclaim_policy(jsonb) IS
'PV RECLAIM POLICY cell. printers.go printPersistentVolume.';

-- persistentvolume_status(object jsonb) -> text: STATUS, status.phase or
-- "Terminating" once deleted.  printers.go printPersistentVolume.
CREATE OR REPLACE FUNCTION kwatch.persistentvolume_status(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN object->'metadata'->>'deletionTimestamp' IS NOT NULL THEN 'Terminating'
              ELSE COALESCE(object->'status'->>'phase', '') END
$$;
COMMENT ON FUNCTION kwatch.persistentvolume_status(jsonb) IS
'PV STATUS cell: phase or Terminating. printers.go printPersistentVolume.';

-- persistentvolume_claim(object jsonb) -> text: CLAIM, "namespace/name" of
-- spec.claimRef, "" without one.  printers.go printPersistentVolume.
CREATE OR REPLACE FUNCTION kwatch.persistentvolume_claim(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN jsonb_typeof(object->'spec'->'claimRef') = 'object'
              THEN COALESCE(object->'spec'->'claimRef'->>'namespace', '') || '/' || COALESCE(object->'spec'->'claimRef'->>'name', '')
              ELSE '' END
$$;
COMMENT ON FUNCTION kwatch.persistentvolume_claim(jsonb) IS
'PV CLAIM cell "namespace/name" or "". printers.go printPersistentVolume.';

-- persistentvolume_storageclass(object jsonb) -> text: STORAGECLASS, the
-- volume.beta.kubernetes.io/storage-class annotation, else
-- spec.storageClassName.  pkg/apis/core/helper GetPersistentVolumeClass.
CREATE OR REPLACE FUNCTION kwatch.persistentvolume_storageclass(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(object->'metadata'->'annotations'->>'volume.beta.kubernetes.io/storage-class',
                  object->'spec'->>'storageClassName', '')
$$;
COMMENT ON FUNCTION kwatch.persistentvolume_storageclass(jsonb) IS
'PV STORAGECLASS cell (beta annotation first). pkg/apis/core/helper GetPersistentVolumeClass.';

-- persistentvolume_volumeattributesclass(object jsonb) -> text:
-- VOLUMEATTRIBUTESCLASS, spec.volumeAttributesClassName, "<unset>".
-- printers.go printPersistentVolume (current release; not in 1.20).
CREATE OR REPLACE FUNCTION kwatch.persistentvolume_volumeattributesclass(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->>'volumeAttributesClassName', '<unset>') $$;
COMMENT ON FUNCTION kwatch.persistentvolume_volumeattributesclass(jsonb) IS
'PV VOLUMEATTRIBUTESCLASS cell or "<unset>". printers.go printPersistentVolume (current release).';

-- persistentvolume_reason(object jsonb) -> text: REASON, status.reason.
-- printers.go printPersistentVolume.
CREATE OR REPLACE FUNCTION kwatch.persistentvolume_reason(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'status'->>'reason', '') $$;
COMMENT ON FUNCTION kwatch.persistentvolume_reason(jsonb) IS
'PV REASON cell: status.reason. printers.go printPersistentVolume.';

-- persistentvolume_volume_mode(object jsonb) -> text: VOLUMEMODE,
-- spec.volumeMode, "<unset>".  printers.go printPersistentVolume (wide).
CREATE OR REPLACE FUNCTION kwatch.persistentvolume_volume_mode(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->>'volumeMode', '<unset>') $$;
COMMENT ON FUNCTION kwatch.persistentvolume_volume_mode(jsonb) IS
'PV VOLUMEMODE cell or "<unset>". printers.go printPersistentVolume (wide).';
