--
-- kubeconfig: resolving a server into connection settings
-- (src/cluster/kubeconfig.c, src/cluster/fdw_option.c), seen through kwatch.server_config.
-- Fixtures are under test/fixtures/kubeconfig/; paths in the output show the
-- source directory as @srcdir@.
--
CREATE EXTENSION kwatch;
\getenv abs_srcdir PG_ABS_SRCDIR
\set fx :abs_srcdir '/fixtures/kubeconfig'
\set multi :fx '/multi.yaml'
\set team :fx '/team/team.yaml'
\set multi_team :multi ':' :team
\set team_multi :team ':' :multi
\set missing :fx '/missing.yaml'
\set missing_multi :missing ':' :multi
\set no_current :fx '/no-current.yaml'
\set syntax_error :fx '/syntax-error.yaml'
\set exec :fx '/exec.yaml'
\set bad_base64 :fx '/bad-base64.yaml'
\set no_server :fx '/no-server.yaml'
\set not_a_list :fx '/not-a-list.yaml'
\set json :fx '/config.json'
\set too_deep :fx '/too-deep.yaml'
SET regress.srcdir = :'abs_srcdir';

-- server_config, or the error it raises, with the source directory masked.
CREATE FUNCTION pg_temp.show(srv text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	d text := current_setting('regress.srcdir');
	st text;
	msg text;
	det text;
	hnt text;
BEGIN
	RETURN replace(jsonb_pretty(kwatch.server_config(srv)), d, '@srcdir@');
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN replace('ERROR ' || st || ': ' || msg
				   || CASE WHEN det <> '' THEN E'\nDETAIL: ' || det ELSE '' END
				   || CASE WHEN hnt <> '' THEN E'\nHINT: ' || hnt ELSE '' END,
				   d, '@srcdir@');
END
$$;
\pset format unaligned
\pset tuples_only on

--
-- A multi-cluster kubeconfig.
--
CREATE SERVER kc FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig :'multi');
-- current-context kind-dev: base64 -data fields, trailing "/" dropped
SELECT pg_temp.show('kc');
-- relative certificate-authority, tls-server-name, static token
ALTER SERVER kc OPTIONS (ADD context 'staging');
SELECT pg_temp.show('kc');
-- -data wins over the path; tokenFile and certificate paths made absolute
ALTER SERVER kc OPTIONS (SET context 'lab-ci');
SELECT pg_temp.show('kc');
-- a context without a user, and a user without credentials
ALTER SERVER kc OPTIONS (SET context 'lab-anonymous');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET context 'lab-no-credentials');
SELECT pg_temp.show('kc');
-- unsupported credentials, unknown names
ALTER SERVER kc OPTIONS (SET context 'oidc');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET context 'missing-cluster');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET context 'missing-user');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET context 'prod');
SELECT pg_temp.show('kc');

--
-- $KUBECONFIG-style lists: first definition wins.
--
ALTER SERVER kc OPTIONS (SET kubeconfig :'multi_team', DROP context);
SELECT pg_temp.show('kc');
-- "team" exists only in the second file; its paths resolve against team/
ALTER SERVER kc OPTIONS (ADD context 'team');
SELECT pg_temp.show('kc');
-- both files define "staging": the first file's wins
ALTER SERVER kc OPTIONS (SET context 'staging');
SELECT pg_temp.show('kc') ~ 'staging.example.com' AS first_staging_wins;
-- the other order: current-context comes from team.yaml now
ALTER SERVER kc OPTIONS (SET kubeconfig :'team_multi', DROP context);
SELECT pg_temp.show('kc');
-- a missing member of a list is skipped; a missing single file is an error
ALTER SERVER kc OPTIONS (SET kubeconfig :'missing_multi');
SELECT pg_temp.show('kc') ~ '127.0.0.1:6443' AS missing_member_skipped;
ALTER SERVER kc OPTIONS (SET kubeconfig :'missing');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET kubeconfig :'fx');
SELECT pg_temp.show('kc');

--
-- Other files.
--
-- no current-context: the context option is needed
ALTER SERVER kc OPTIONS (SET kubeconfig :'no_current');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (ADD context 'second');
SELECT pg_temp.show('kc');
-- a server without a scheme
ALTER SERVER kc OPTIONS (SET context 'third');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (DROP context);
-- JSON is YAML too (tab-indented, IPv6 server)
ALTER SERVER kc OPTIONS (SET kubeconfig :'json');
SELECT pg_temp.show('kc');
-- broken files
ALTER SERVER kc OPTIONS (SET kubeconfig :'syntax_error');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET kubeconfig :'exec');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET kubeconfig :'bad_base64');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET kubeconfig :'no_server');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET kubeconfig :'not_a_list');
SELECT pg_temp.show('kc');
ALTER SERVER kc OPTIONS (SET kubeconfig :'too_deep');
SELECT pg_temp.show('kc');
-- errors leave nothing behind: the same error again, many times
SELECT count(*) AS errors FROM generate_series(1, 200) i
 WHERE pg_temp.show('kc') LIKE 'ERROR F0000:%';

--
-- Layers: kubeconfig, then the server's overrides, then the user mapping.
--
ALTER SERVER kc OPTIONS (SET kubeconfig :'multi');
-- a path override replaces the -data field; credentials are replaced whole
-- (insecure_skip_tls_verify would conflict with the CA: options.sql)
ALTER SERVER kc OPTIONS (ADD certificate_authority '/etc/kwatch/ca.crt',
                         ADD tls_server_name 'kc.internal',
                         ADD token_file '/var/run/kwatch/token');
SELECT pg_temp.show('kc');
-- the PUBLIC mapping applies to everyone without one of their own
CREATE USER MAPPING FOR PUBLIC SERVER kc
  OPTIONS (client_certificate '/etc/kwatch/public.crt',
           client_key '/etc/kwatch/public.key');
SELECT pg_temp.show('kc');
-- the user's own mapping wins
CREATE USER MAPPING FOR CURRENT_USER SERVER kc OPTIONS (token 'my-token');
SELECT pg_temp.show('kc');
-- the user's own mapping hides the PUBLIC one even without credentials:
-- the server's token_file applies again
ALTER USER MAPPING FOR CURRENT_USER SERVER kc OPTIONS (DROP token);
SELECT pg_temp.show('kc');

--
-- Exec credential plugins run programs (issue 22): a role with only
-- pg_read_server_files may name a kubeconfig, but not one whose user runs a
-- plugin (PostgreSQL keeps reading files and running programs apart, as for
-- COPY ... PROGRAM); the server's owner is checked again where the plugin
-- would run.
--
CREATE FUNCTION pg_temp.try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	d text := current_setting('regress.srcdir');
	st text;
	msg text;
	det text;
BEGIN
	EXECUTE stmt;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
	RETURN replace('ERROR ' || st || ': ' || msg
				   || CASE WHEN det <> '' THEN E'\nDETAIL: ' || det ELSE '' END, d, '@srcdir@');
END
$$;
CREATE ROLE kw_filer IN ROLE pg_read_server_files;
GRANT USAGE ON FOREIGN DATA WRAPPER kwatch TO kw_filer;
SET ROLE kw_filer;
SELECT pg_temp.try(format('CREATE SERVER filer_exec FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig %L)', :'exec'));
SELECT pg_temp.try(format('CREATE SERVER filer_kc FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig %L)', :'multi'));
SELECT pg_temp.try(format('ALTER SERVER filer_kc OPTIONS (SET kubeconfig %L)', :'exec'));
-- a file that cannot be read now is left to its use
SELECT pg_temp.try(format('ALTER SERVER filer_kc OPTIONS (SET kubeconfig %L)', :'missing'));
RESET ROLE;
-- a server handed to such a role (or whose file was rewritten after the
-- check): refused where the plugin would run, before it runs
CREATE SERVER su_exec FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig :'exec');
ALTER SERVER su_exec OWNER TO kw_filer;
SELECT pg_temp.try('SELECT kwatch.watch(''pods'', server => ''su_exec'')');
-- a user mapping's token replaces the plugin: nothing runs, nothing refused
CREATE USER MAPPING FOR CURRENT_USER SERVER su_exec OPTIONS (token 't');
SELECT kwatch.server_config('su_exec')->>'exec' IS NULL AS no_plugin;
DROP USER MAPPING FOR CURRENT_USER SERVER su_exec;
-- pg_execute_server_program is what it takes
GRANT pg_execute_server_program TO kw_filer;
SET ROLE kw_filer;
SELECT pg_temp.try(format('ALTER SERVER filer_kc OPTIONS (SET kubeconfig %L)', :'exec'));
RESET ROLE;
SET client_min_messages = warning;
DROP SERVER su_exec, filer_kc CASCADE;
DROP OWNED BY kw_filer;
DROP ROLE kw_filer;
RESET client_min_messages;

--
-- Servers without a kubeconfig.
--
CREATE SERVER api FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://k8s.example.com:6443//', tls_server_name 'k8s');
SELECT pg_temp.show('api');
-- (the tests do not run inside a pod)
CREATE SERVER pod FOREIGN DATA WRAPPER kwatch OPTIONS (in_cluster 'true');
SELECT pg_temp.show('pod');

\pset format aligned
\pset tuples_only off
RESET regress.srcdir;
SET client_min_messages = warning;
DROP SERVER kc, api, pod CASCADE;
RESET client_min_messages;
DROP EXTENSION kwatch;
