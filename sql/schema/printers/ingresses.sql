-- ---------------------------------------------------------------------
-- Ingresses: printers.go printIngress, formatHosts, formatPorts,
-- ingressLoadBalancerStatusStringer
-- ---------------------------------------------------------------------

-- ingress_class(object jsonb) -> text: CLASS, spec.ingressClassName,
-- NULL (kubectl's "<none>").  printers.go printIngress.
CREATE OR REPLACE FUNCTION kwatch.ingress_class(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT object->'spec'->>'ingressClassName' $$;
COMMENT ON FUNCTION kwatch.ingress_class(jsonb) IS
'Ingress CLASS cell: spec.ingressClassName or NULL (kubectl''s "<none>"). printers.go printIngress.';

-- ingress_hosts(object jsonb) -> text: HOSTS, the first three non-empty
-- rule hosts joined with ",", then " + N more..." (N counts every rule past
-- the third); "*" without hosts.  printers.go formatHosts.
CREATE OR REPLACE FUNCTION kwatch.ingress_hosts(object jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  list text[] := '{}';
  more boolean := false;
  rules jsonb := kwatch._printer_array(object->'spec'->'rules');
  rule jsonb;
BEGIN
  FOR rule IN SELECT e FROM jsonb_array_elements(rules) WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
    IF cardinality(list) = 3 THEN
      more := true;
    END IF;
    IF NOT more AND COALESCE(rule->>'host', '') <> '' THEN
      list := list || (rule->>'host');
    END IF;
  END LOOP;
  IF cardinality(list) = 0 THEN
    RETURN '*';
  END IF;
  IF more THEN
    RETURN array_to_string(list, ',') || ' + ' || (jsonb_array_length(rules) - 3) || ' more...';
  END IF;
  RETURN array_to_string(list, ',');
END
$$;
COMMENT ON FUNCTION kwatch.ingress_hosts(jsonb) IS
'Ingress HOSTS cell "a,b,c + N more..." or "*". printers.go formatHosts.';

-- ingress_address(object jsonb, wide boolean DEFAULT true) -> text:
-- ADDRESS, the load balancer's points (IP, else hostname) sorted and joined
-- with ","; wide => false clips past 16 characters.  printers.go
-- ingressLoadBalancerStatusStringer (the API server's Table is wide).
CREATE OR REPLACE FUNCTION kwatch.ingress_address(object jsonb, wide boolean DEFAULT true) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT kwatch._printer_lb_status(object->'status'->'loadBalancer', wide) $$;
COMMENT ON FUNCTION kwatch.ingress_address(jsonb, boolean) IS
'Ingress ADDRESS cell (LB points sorted, ","). printers.go ingressLoadBalancerStatusStringer.';

-- ingress_ports(object jsonb) -> text: PORTS, "80, 443" with TLS, else
-- "80".  printers.go formatPorts.
CREATE OR REPLACE FUNCTION kwatch.ingress_ports(object jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT CASE WHEN kwatch._printer_count(object->'spec'->'tls') <> 0 THEN '80, 443' ELSE '80' END $$;
COMMENT ON FUNCTION kwatch.ingress_ports(jsonb) IS
'Ingress PORTS cell "80" or "80, 443". printers.go formatPorts.';
