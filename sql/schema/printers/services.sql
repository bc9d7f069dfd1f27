-- ---------------------------------------------------------------------
-- Services: printers.go printService, getServiceExternalIP,
-- makePortString
-- ---------------------------------------------------------------------

-- service_type(object jsonb) -> text: TYPE, spec.type.
-- printers.go printService.
CREATE OR REPLACE FUNCTION kwatch.service_type(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT COALESCE(object->'spec'->>'type', '') $$;
COMMENT ON FUNCTION kwatch.service_type(jsonb) IS
'Service TYPE cell. printers.go printService.';

-- service_cluster_ip(object jsonb) -> text: CLUSTER-IP, spec.clusterIPs[0]
-- ("None" for a headless service), NULL (kubectl's "<none>").  An object written before
-- clusterIPs existed (< 1.20) has only spec.clusterIP, which the API server
-- defaults into clusterIPs when it reads it: taken here the same way.
-- printers.go printService.
CREATE OR REPLACE FUNCTION kwatch.service_cluster_ip(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE WHEN kwatch._printer_count(object->'spec'->'clusterIPs') > 0 THEN COALESCE(object->'spec'->'clusterIPs'->>0, '')
              ELSE NULLIF(object->'spec'->>'clusterIP', '') END
$$;
COMMENT ON FUNCTION kwatch.service_cluster_ip(jsonb) IS
'Service CLUSTER-IP cell: clusterIPs[0] or NULL (kubectl''s "<none>"). printers.go printService.';

-- service_external_ip(object jsonb, wide boolean DEFAULT true) -> text:
-- EXTERNAL-IP: ClusterIP/NodePort: spec.externalIPs joined or NULL (kubectl's "<none>");
-- LoadBalancer: the load balancer's points then the externalIPs, or
-- "<pending>"; ExternalName: spec.externalName; "<unknown>" otherwise.
-- wide => false clips the load balancer's points as the client-side
-- printer did; the API server's Table is wide.  printers.go
-- getServiceExternalIP.
CREATE OR REPLACE FUNCTION kwatch.service_external_ip(object jsonb, wide boolean DEFAULT true) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT CASE COALESCE(object->'spec'->>'type', '')
    WHEN 'ClusterIP' THEN ext
    WHEN 'NodePort' THEN ext
    WHEN 'LoadBalancer' THEN
      CASE WHEN ext IS NOT NULL THEN CASE WHEN lb <> '' THEN lb || ',' || ext ELSE ext END
           WHEN lb <> '' THEN lb
           ELSE '<pending>' END
    WHEN 'ExternalName' THEN COALESCE(object->'spec'->>'externalName', '')
    ELSE '<unknown>' END
  FROM (SELECT (SELECT string_agg(e, ',' ORDER BY o)
                FROM jsonb_array_elements_text(kwatch._printer_array(object->'spec'->'externalIPs')) WITH ORDINALITY AS x(e, o)) AS ext,
               kwatch._printer_lb_status(object->'status'->'loadBalancer', wide) AS lb) s
$$;
COMMENT ON FUNCTION kwatch.service_external_ip(jsonb, boolean) IS
'Service EXTERNAL-IP cell (NULL (kubectl''s "<none>"), "<pending>", LB points + externalIPs). wide => false clips as client-side kubectl did. printers.go getServiceExternalIP.';

-- service_ports(object jsonb) -> text: PORT(S), "port/protocol" or
-- "port:nodePort/protocol" per port, joined with ","; NULL (kubectl's "<none>").
-- printers.go makePortString.
CREATE OR REPLACE FUNCTION kwatch.service_ports(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT NULLIF(string_agg(
           COALESCE(kwatch._printer_int(p->'port'), 0)
           || CASE WHEN COALESCE(kwatch._printer_int(p->'nodePort'), 0) > 0 THEN ':' || kwatch._printer_int(p->'nodePort') ELSE '' END
           || '/' || COALESCE(p->>'protocol', ''), ',' ORDER BY o), '')
  FROM jsonb_array_elements(kwatch._printer_array(object->'spec'->'ports')) WITH ORDINALITY AS x(p, o)
$$;
COMMENT ON FUNCTION kwatch.service_ports(jsonb) IS
'Service PORT(S) cell "80/TCP,443:30443/TCP" or NULL (kubectl''s "<none>"). printers.go makePortString.';

-- service_selector(object jsonb) -> text: SELECTOR, spec.selector as
-- "k=v,...", NULL (kubectl's "<none>").  printers.go printService (wide).
CREATE OR REPLACE FUNCTION kwatch.service_selector(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_format_labels(object->'spec'->'selector') $$;
COMMENT ON FUNCTION kwatch.service_selector(jsonb) IS
'Service SELECTOR cell "k=v,..." or NULL (kubectl''s "<none>"). printers.go printService (wide).';
