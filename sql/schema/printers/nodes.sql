-- ---------------------------------------------------------------------
-- Nodes: printers.go printNode, findNodeRoles, getNodeInternalIP,
-- getNodeExternalIP
-- ---------------------------------------------------------------------

-- node_status(object jsonb) -> text: STATUS: Ready / NotReady (the last
-- Ready condition), Unknown without one, then ",SchedulingDisabled" when
-- spec.unschedulable.  printers.go printNode.
CREATE OR REPLACE FUNCTION kwatch.node_status(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT COALESCE((SELECT CASE WHEN cond->>'status' = 'True' THEN 'Ready' ELSE 'NotReady' END
                   FROM jsonb_array_elements(kwatch._printer_array(object->'status'->'conditions')) WITH ORDINALITY AS c(cond, o)
                   WHERE cond->>'type' = 'Ready' ORDER BY o DESC LIMIT 1), 'Unknown')
         || CASE WHEN COALESCE(kwatch._printer_bool(object->'spec'->'unschedulable'), false) THEN ',SchedulingDisabled' ELSE '' END
$$;
COMMENT ON FUNCTION kwatch.node_status(jsonb) IS
'Node STATUS cell: Ready/NotReady/Unknown[,SchedulingDisabled]. printers.go printNode.';

-- node_roles(object jsonb) -> text: ROLES, from node-role.kubernetes.io/<role>
-- label keys and the kubernetes.io/role label value, sorted, distinct,
-- joined with ","; NULL (kubectl's "<none>").  printers.go findNodeRoles.
CREATE OR REPLACE FUNCTION kwatch.node_roles(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT string_agg(DISTINCT role COLLATE "C", ',' ORDER BY role COLLATE "C")
  FROM (SELECT CASE WHEN key LIKE 'node-role.kubernetes.io/%' THEN NULLIF(substr(key, 25), '')
                    WHEN key = 'kubernetes.io/role' THEN NULLIF(value, '') END AS role
        FROM jsonb_each_text(CASE WHEN jsonb_typeof(object->'metadata'->'labels') = 'object'
                                  THEN object->'metadata'->'labels' ELSE '{}' END)) r
  WHERE role IS NOT NULL
$$;
COMMENT ON FUNCTION kwatch.node_roles(jsonb) IS
'Node ROLES cell ("control-plane", NULL (kubectl''s "<none>")). printers.go findNodeRoles.';

-- node_version(object jsonb) -> text: VERSION, status.nodeInfo.kubeletVersion
-- ("" when unset).  printers.go printNode.
CREATE OR REPLACE FUNCTION kwatch.node_version(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'status'->'nodeInfo'->>'kubeletVersion', '') $$;
COMMENT ON FUNCTION kwatch.node_version(jsonb) IS
'Node VERSION cell: kubeletVersion. printers.go printNode.';

-- node_internal_ip(object jsonb) -> text: INTERNAL-IP, the first InternalIP
-- address, NULL (kubectl's "<none>").  printers.go getNodeInternalIP (wide).
CREATE OR REPLACE FUNCTION kwatch.node_internal_ip(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT (SELECT COALESCE(a->>'address', '')
                   FROM jsonb_array_elements(kwatch._printer_array(object->'status'->'addresses')) WITH ORDINALITY AS x(a, o)
                   WHERE a->>'type' = 'InternalIP' ORDER BY o LIMIT 1)
$$;
COMMENT ON FUNCTION kwatch.node_internal_ip(jsonb) IS
'Node INTERNAL-IP cell: first InternalIP address or NULL (kubectl''s "<none>"). printers.go getNodeInternalIP.';

-- node_external_ip(object jsonb) -> text: EXTERNAL-IP, the first ExternalIP
-- address, NULL (kubectl's "<none>").  printers.go getNodeExternalIP (wide).
CREATE OR REPLACE FUNCTION kwatch.node_external_ip(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT (SELECT COALESCE(a->>'address', '')
                   FROM jsonb_array_elements(kwatch._printer_array(object->'status'->'addresses')) WITH ORDINALITY AS x(a, o)
                   WHERE a->>'type' = 'ExternalIP' ORDER BY o LIMIT 1)
$$;
COMMENT ON FUNCTION kwatch.node_external_ip(jsonb) IS
'Node EXTERNAL-IP cell: first ExternalIP address or NULL (kubectl''s "<none>"). printers.go getNodeExternalIP.';

-- node_os_image(object jsonb) -> text: OS-IMAGE, "<unknown>" when empty.
-- printers.go printNode (wide).
CREATE OR REPLACE FUNCTION kwatch.node_os_image(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(NULLIF(object->'status'->'nodeInfo'->>'osImage', ''), '<unknown>') $$;
COMMENT ON FUNCTION kwatch.node_os_image(jsonb) IS
'Node OS-IMAGE cell or "<unknown>". printers.go printNode (wide).';

-- node_kernel_version(object jsonb) -> text: KERNEL-VERSION, "<unknown>"
-- when empty.  printers.go printNode (wide).
CREATE OR REPLACE FUNCTION kwatch.node_kernel_version(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(NULLIF(object->'status'->'nodeInfo'->>'kernelVersion', ''), '<unknown>') $$;
COMMENT ON FUNCTION kwatch.node_kernel_version(jsonb) IS
'Node KERNEL-VERSION cell or "<unknown>". printers.go printNode (wide).';

-- node_container_runtime(object jsonb) -> text: CONTAINER-RUNTIME,
-- containerRuntimeVersion, "<unknown>" when empty.  printers.go printNode.
CREATE OR REPLACE FUNCTION kwatch.node_container_runtime(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(NULLIF(object->'status'->'nodeInfo'->>'containerRuntimeVersion', ''), '<unknown>') $$;
COMMENT ON FUNCTION kwatch.node_container_runtime(jsonb) IS
'Node CONTAINER-RUNTIME cell or "<unknown>". printers.go printNode (wide).';
