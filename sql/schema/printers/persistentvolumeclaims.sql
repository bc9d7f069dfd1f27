-- ---------------------------------------------------------------------
-- PersistentVolumeClaims: printers.go printPersistentVolumeClaim
-- ---------------------------------------------------------------------

-- persistentvolumeclaim_status(object jsonb) -> text: STATUS, status.phase
-- or "Terminating" once deleted.  printers.go printPersistentVolumeClaim.
CREATE OR REPLACE FUNCTION kwatch.persistentvolumeclaim_status(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN object->'metadata'->>'deletionTimestamp' IS NOT NULL THEN 'Terminating'
              ELSE COALESCE(object->'status'->>'phase', '') END
$$;
COMMENT ON FUNCTION kwatch.persistentvolumeclaim_status(jsonb) IS
'PVC STATUS cell: phase or Terminating. printers.go printPersistentVolumeClaim.';

-- persistentvolumeclaim_volume(object jsonb) -> text: VOLUME,
-- spec.volumeName.  printers.go printPersistentVolumeClaim.
CREATE OR REPLACE FUNCTION kwatch.persistentvolumeclaim_volume(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->>'volumeName', '') $$;
COMMENT ON FUNCTION kwatch.persistentvolumeclaim_volume(jsonb) IS
'PVC VOLUME cell: spec.volumeName. printers.go printPersistentVolumeClaim.';

-- persistentvolumeclaim_capacity(object jsonb) -> text: CAPACITY,
-- status.capacity.storage ("0" unset) once bound to a volume, else "".
-- printers.go printPersistentVolumeClaim.
CREATE OR REPLACE FUNCTION kwatch.persistentvolumeclaim_capacity(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN COALESCE(object->'spec'->>'volumeName', '') <> ''
              THEN COALESCE(object->'status'->'capacity'->>'storage', '0') ELSE '' END
$$;
COMMENT ON FUNCTION kwatch.persistentvolumeclaim_capacity(jsonb) IS
'PVC CAPACITY cell (status capacity once a volume is named, else ""). printers.go printPersistentVolumeClaim.';

-- persistentvolumeclaim_access_modes(object jsonb) -> text: ACCESS MODES,
-- status.accessModes once bound to a volume, else "".  printers.go
-- printPersistentVolumeClaim.
CREATE OR REPLACE FUNCTION kwatch.persistentvolumeclaim_access_modes(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN COALESCE(object->'spec'->>'volumeName', '') <> ''
              THEN kwatch._printer_access_modes(object->'status'->'accessModes') ELSE '' END
$$;
COMMENT ON FUNCTION kwatch.persistentvolumeclaim_access_modes(jsonb) IS
'PVC ACCESS MODES cell (status modes once a volume is named, else ""). printers.go printPersistentVolumeClaim.';

-- persistentvolumeclaim_storageclass(object jsonb) -> text: STORAGECLASS,
-- the beta annotation, else spec.storageClassName, else "".
-- pkg/apis/core/helper GetPersistentVolumeClaimClass.
CREATE OR REPLACE FUNCTION kwatch.persistentvolumeclaim_storageclass(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE(object->'metadata'->'annotations'->>'volume.beta.kubernetes.io/storage-class',
                  object->'spec'->>'storageClassName', '')
$$;
COMMENT ON FUNCTION kwatch.persistentvolumeclaim_storageclass(jsonb) IS
'PVC STORAGECLASS cell (beta annotation first). pkg/apis/core/helper GetPersistentVolumeClaimClass.';

-- persistentvolumeclaim_volumeattributesclass(object jsonb) -> text:
-- VOLUMEATTRIBUTESCLASS, spec.volumeAttributesClassName, "<unset>".
-- printers.go printPersistentVolumeClaim (current release; not in 1.20).
CREATE OR REPLACE FUNCTION kwatch.persistentvolumeclaim_volumeattributesclass(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->>'volumeAttributesClassName', '<unset>') $$;
COMMENT ON FUNCTION kwatch.persistentvolumeclaim_volumeattributesclass(jsonb) IS
'PVC VOLUMEATTRIBUTESCLASS cell or "<unset>". printers.go printPersistentVolumeClaim (current release).';

-- persistentvolumeclaim_volume_mode(object jsonb) -> text: VOLUMEMODE,
-- spec.volumeMode, "<unset>".  printers.go printPersistentVolumeClaim (wide).
CREATE OR REPLACE FUNCTION kwatch.persistentvolumeclaim_volume_mode(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->>'volumeMode', '<unset>') $$;
COMMENT ON FUNCTION kwatch.persistentvolumeclaim_volume_mode(jsonb) IS
'PVC VOLUMEMODE cell or "<unset>". printers.go printPersistentVolumeClaim (wide).';
