-- test/sql_sources/catalog.sql: the catalog of the kwatch extension as
-- sorted lines of text, without OIDs, for compare_install.sh to diff
-- between a fresh install and an updated one (the model: Citus's
-- print_extension_changes).  Covers the extension's members and every
-- object in its schemas kwatch and kwatch_stage: functions with their
-- definitions (bodies, volatility, strictness, SECURITY DEFINER, SET
-- options), privileges and comments; relations with their columns (in
-- attnum order, dropped columns left out), defaults, generated
-- expressions, constraints, indexes, triggers, policies, rules, view
-- definitions, sequences and privileges; types; casts; the wrappers,
-- servers and foreign tables; the schemas; the extension's configuration
-- tables (pg_extension_config_dump) and initial privileges (pg_init_privs).
\pset format unaligned
\pset tuples_only on
\pset footer off
SET search_path = pg_catalog;
SET lc_messages = 'C';

WITH ext AS (
  SELECT oid AS eoid, * FROM pg_extension WHERE extname = 'kwatch'
), nsp AS (
  SELECT oid, nspname FROM pg_namespace WHERE nspname IN ('kwatch', 'kwatch_stage')
), fn AS (
  SELECT p.* , p.oid AS poid, p.oid::regprocedure::text AS sig
    FROM pg_proc p WHERE p.pronamespace IN (SELECT oid FROM nsp)
), rel AS (
  SELECT c.*, c.oid AS coid, c.oid::regclass::text AS qname
    FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM nsp)
), typ AS (
  SELECT t.*, t.oid AS toid, format_type(t.oid, NULL) AS tname
    FROM pg_type t WHERE t.typnamespace IN (SELECT oid FROM nsp)
), lines(line) AS (
  -- the extension
  SELECT format('extension: relocatable %s, schema %s, version %s',
                extrelocatable, extnamespace::regnamespace, extversion) FROM ext
  UNION ALL
  SELECT format('extension config: %s %s', c.cfg::regclass, quote_literal(c.cond))
    FROM ext, unnest(ext.extconfig, ext.extcondition) AS c(cfg, cond)
  UNION ALL
  SELECT 'extension member: ' || pg_describe_object(d.classid, d.objid, d.objsubid)
    FROM pg_depend d, ext WHERE d.refclassid = 'pg_extension'::regclass
     AND d.refobjid = ext.eoid AND d.deptype = 'e'
  UNION ALL
  SELECT format('init privs: %s (%s) %s', pg_describe_object(i.classoid, i.objoid, i.objsubid),
                i.privtype, i.initprivs)
    FROM pg_init_privs i
   WHERE i.privtype = 'e'
     AND (i.classoid, i.objoid) NOT IN (SELECT 'pg_namespace'::regclass, oid FROM pg_namespace
                                         WHERE nspname IN ('pg_catalog', 'information_schema', 'public'))
     AND pg_describe_object(i.classoid, i.objoid, 0) !~ '(pg_catalog|information_schema)\.'
     AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = i.classoid AND d.objid = i.objoid
                       AND d.deptype = 'p')
  UNION ALL
  -- schemas
  SELECT format('schema %s: owner superuser %s, acl %s, comment %s', n.nspname,
                (SELECT rolsuper FROM pg_roles WHERE oid = s.nspowner), s.nspacl,
                quote_nullable(obj_description(n.oid, 'pg_namespace')))
    FROM nsp n JOIN pg_namespace s ON s.oid = n.oid
  UNION ALL
  -- functions
  SELECT format('function %s: kind %s, language %s, returns %s, volatile %s, strict %s, '
                'security definer %s, leakproof %s, parallel %s, cost %s, rows %s, config %s, '
                'acl %s, comment %s, definition:%s%s',
                f.sig, f.prokind, (SELECT lanname FROM pg_language WHERE oid = f.prolang),
                pg_get_function_result(f.poid), f.provolatile, f.proisstrict, f.prosecdef,
                f.proleakproof, f.proparallel, f.procost, f.prorows, f.proconfig, f.proacl,
                quote_nullable(obj_description(f.poid, 'pg_proc')), E'\n',
                CASE WHEN f.prokind IN ('f', 'p', 'w') THEN pg_get_functiondef(f.poid)
                     ELSE pg_get_function_arguments(f.poid) END)
    FROM fn f
  UNION ALL
  -- relations
  SELECT format('relation %s: kind %s, persistence %s, options %s, acl %s, row security %s/%s, '
                'owner superuser %s, comment %s',
                r.qname, r.relkind, r.relpersistence, r.reloptions, r.relacl, r.relrowsecurity,
                r.relforcerowsecurity, (SELECT rolsuper FROM pg_roles WHERE oid = r.relowner),
                quote_nullable(obj_description(r.coid, 'pg_class')))
    FROM rel r WHERE r.relkind <> 'i'
  UNION ALL
  SELECT format('column %s #%s %s: %s, not null %s, default %s, generated %s, identity %s, '
                'collation %s, acl %s, options %s, comment %s',
                r.qname, row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum),
                a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                quote_nullable(pg_get_expr(ad.adbin, ad.adrelid)), a.attgenerated, a.attidentity,
                (SELECT collname FROM pg_collation WHERE oid = a.attcollation), a.attacl,
                -- this server's build notes a per-column pg_attver of its own
                (SELECT array_agg(o ORDER BY o) FROM unnest(a.attoptions) o WHERE o !~ '^pg_attver='),
                quote_nullable(col_description(a.attrelid, a.attnum)))
    FROM rel r JOIN pg_attribute a ON a.attrelid = r.coid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
   WHERE r.relkind <> 'i'
  UNION ALL
  SELECT format('index %s: %s, comment %s', r.qname, pg_get_indexdef(r.coid),
                quote_nullable(obj_description(r.coid, 'pg_class')))
    FROM rel r WHERE r.relkind = 'i'
  UNION ALL
  SELECT format('view %s:%s%s', r.qname, E'\n', pg_get_viewdef(r.coid))
    FROM rel r WHERE r.relkind IN ('v', 'm')
  UNION ALL
  SELECT format('sequence %s: type %s, start %s, increment %s, min %s, max %s, cache %s, cycle %s, '
                'owned by %s',
                r.qname, format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin,
                s.seqmax, s.seqcache, s.seqcycle,
                (SELECT string_agg(pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid), ', ')
                   FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = r.coid
                    AND d.deptype IN ('a', 'i') AND d.refclassid = 'pg_class'::regclass))
    FROM rel r JOIN pg_sequence s ON s.seqrelid = r.coid
  UNION ALL
  SELECT format('constraint %s on %s%s: %s, deferrable %s/%s, comment %s', c.conname,
                CASE WHEN c.conrelid <> 0 THEN c.conrelid::regclass::text ELSE format_type(c.contypid, NULL) END,
                CASE WHEN c.conindid <> 0 THEN ' (index ' || c.conindid::regclass::text || ')' ELSE '' END,
                pg_get_constraintdef(c.oid), c.condeferrable, c.condeferred,
                quote_nullable(obj_description(c.oid, 'pg_constraint')))
    FROM pg_constraint c WHERE c.connamespace IN (SELECT oid FROM nsp)
  UNION ALL
  SELECT format('trigger %s: enabled %s, %s, comment %s', t.tgname, t.tgenabled,
                pg_get_triggerdef(t.oid), quote_nullable(obj_description(t.oid, 'pg_trigger')))
    FROM pg_trigger t JOIN rel r ON r.coid = t.tgrelid WHERE NOT t.tgisinternal
  UNION ALL
  SELECT format('policy %s on %s: %s %s roles %s using %s check %s', p.polname, r.qname,
                p.polcmd, p.polpermissive, p.polroles::regrole[],
                pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
    FROM pg_policy p JOIN rel r ON r.coid = p.polrelid
  UNION ALL
  SELECT format('rule %s on %s: %s', w.rulename, r.qname, pg_get_ruledef(w.oid))
    FROM pg_rewrite w JOIN rel r ON r.coid = w.ev_class WHERE w.rulename <> '_RETURN'
  UNION ALL
  -- types (a table's row type is its relation's)
  SELECT format('type %s: type %s, category %s, acl %s, range subtype %s, multirange %s, comment %s',
                t.tname, t.typtype, t.typcategory, t.typacl,
                (SELECT format_type(rngsubtype, NULL) FROM pg_range WHERE rngtypid = t.toid),
                (SELECT format_type(rngmultitypid, NULL) FROM pg_range WHERE rngtypid = t.toid),
                quote_nullable(obj_description(t.toid, 'pg_type')))
    FROM typ t
   WHERE t.typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c'
  UNION ALL
  SELECT format('cast %s: context %s, method %s, function %s', pg_describe_object('pg_cast'::regclass, c.oid, 0),
                c.castcontext, c.castmethod, c.castfunc::regprocedure)
    FROM pg_cast c
   WHERE c.castsource IN (SELECT toid FROM typ) OR c.casttarget IN (SELECT toid FROM typ)
  UNION ALL
  -- foreign data wrappers, servers, foreign tables
  SELECT format('foreign data wrapper %s: handler %s, validator %s, acl %s, options %s, comment %s',
                w.fdwname, w.fdwhandler::regproc, w.fdwvalidator::regproc, w.fdwacl, w.fdwoptions,
                quote_nullable(obj_description(w.oid, 'pg_foreign_data_wrapper')))
    FROM pg_foreign_data_wrapper w
  UNION ALL
  SELECT format('server %s: wrapper %s, type %s, version %s, acl %s, options %s, comment %s',
                s.srvname, (SELECT fdwname FROM pg_foreign_data_wrapper WHERE oid = s.srvfdw),
                s.srvtype, s.srvversion, s.srvacl, s.srvoptions,
                quote_nullable(obj_description(s.oid, 'pg_foreign_server')))
    FROM pg_foreign_server s
  UNION ALL
  SELECT format('foreign table %s: server %s, options %s', r.qname,
                (SELECT srvname FROM pg_foreign_server WHERE oid = f.ftserver), f.ftoptions)
    FROM rel r JOIN pg_foreign_table f ON f.ftrelid = r.coid
  UNION ALL
  -- whatever else has a comment in the extension's schemas
  SELECT format('comment on %s: %s', pg_describe_object(d.classoid, d.objoid, d.objsubid),
                quote_literal(d.description))
    FROM pg_description d
   WHERE d.classoid NOT IN ('pg_proc'::regclass, 'pg_class'::regclass, 'pg_namespace'::regclass,
                            'pg_constraint'::regclass, 'pg_trigger'::regclass, 'pg_type'::regclass,
                            'pg_foreign_data_wrapper'::regclass, 'pg_foreign_server'::regclass)
     AND pg_describe_object(d.classoid, d.objoid, d.objsubid) ~ 'kwatch'
)
SELECT line FROM lines ORDER BY line COLLATE "C";
