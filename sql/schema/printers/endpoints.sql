-- ---------------------------------------------------------------------
-- Endpoints: printers.go formatEndpoints
-- ---------------------------------------------------------------------

-- endpoints_endpoints(object jsonb) -> text: ENDPOINTS, the first three of
-- "ip:port" (ip alone for a subset without ports; [ipv6]:port) over the
-- subsets and their ports, then " + N more..."; NULL (kubectl's "<none>") without subsets.
-- printers.go formatEndpoints(endpoints, nil).
CREATE OR REPLACE FUNCTION kwatch.endpoints_endpoints(object jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  list text[] := '{}';
  max_shown constant integer := 3;
  more boolean := false;
  total bigint := 0;
  ss jsonb;
  port jsonb;
  addr jsonb;
  ip text;
BEGIN
  IF kwatch._printer_count(object->'subsets') = 0 THEN
    RETURN NULL;
  END IF;
  FOR ss IN SELECT e FROM jsonb_array_elements(kwatch._printer_array(object->'subsets')) WITH ORDINALITY AS x(e, o) ORDER BY o LOOP
    IF kwatch._printer_count(ss->'ports') = 0 THEN
      -- It's possible to have headless services with no ports.
      total := total + kwatch._printer_count(ss->'addresses');
      IF cardinality(list) >= max_shown THEN
        -- shown all it shows: the rest is counted, never expanded again
        -- (a port per address would be quadratic)
        more := more OR kwatch._printer_count(ss->'addresses') > 0;
        CONTINUE;
      END IF;
      FOR addr IN SELECT e FROM jsonb_array_elements(kwatch._printer_array(ss->'addresses')) WITH ORDINALITY AS y(e, o) ORDER BY o LOOP
        IF cardinality(list) = max_shown THEN
          more := true;
          EXIT;
        END IF;
        list := list || COALESCE(addr->>'ip', '');
      END LOOP;
      CONTINUE;
    END IF;
    FOR port IN SELECT e FROM jsonb_array_elements(kwatch._printer_array(ss->'ports')) WITH ORDINALITY AS y(e, o) ORDER BY o LOOP
      total := total + kwatch._printer_count(ss->'addresses');
      IF cardinality(list) >= max_shown THEN
        more := more OR kwatch._printer_count(ss->'addresses') > 0;
        CONTINUE;
      END IF;
      FOR addr IN SELECT e FROM jsonb_array_elements(kwatch._printer_array(ss->'addresses')) WITH ORDINALITY AS z(e, o) ORDER BY o LOOP
        IF cardinality(list) = max_shown THEN
          more := true;
          EXIT;
        END IF;
        ip := COALESCE(addr->>'ip', '');
        -- net.JoinHostPort brackets a host that holds a colon.
        list := list || (CASE WHEN strpos(ip, ':') > 0 THEN '[' || ip || ']' ELSE ip END
                         || ':' || COALESCE(kwatch._printer_int(port->'port'), 0));
      END LOOP;
    END LOOP;
  END LOOP;
  IF more THEN
    RETURN array_to_string(list, ',') || ' + ' || (total - max_shown) || ' more...';
  END IF;
  RETURN array_to_string(list, ',');
END
$$;
COMMENT ON FUNCTION kwatch.endpoints_endpoints(jsonb) IS
'Endpoints ENDPOINTS cell "10.0.0.1:80,... + N more..." or NULL (kubectl''s "<none>"). printers.go formatEndpoints.';
