--
-- options: validation of the kwatch foreign-data wrapper's options
-- (src/cluster/fdw_option.c).  Drops everything it creates, the extension too.
--
CREATE EXTENSION kwatch;

-- The wrapper itself takes no options.
ALTER FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig '/tmp/x');

--
-- Servers: exactly one of kubeconfig, api_server, in_cluster 'true'.
--
CREATE SERVER k_kubeconfig FOREIGN DATA WRAPPER kwatch
  OPTIONS (kubeconfig '/etc/kubernetes/admin.conf');
CREATE SERVER k_list FOREIGN DATA WRAPPER kwatch
  OPTIONS (kubeconfig '/home/a/.kube/config:/home/a/.kube/eks.yaml',
           context 'prod');
CREATE SERVER k_api FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://127.0.0.1:6443/',
           certificate_authority '/etc/kubernetes/pki/ca.crt',
           tls_server_name 'kubernetes.default.svc',
           insecure_skip_tls_verify 'false',
           token_file '/var/run/kwatch/token');
CREATE SERVER k_pod FOREIGN DATA WRAPPER kwatch
  OPTIONS (in_cluster 'true');
CREATE SERVER k_certs FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'http://10.0.0.1:8080',
           client_certificate '/etc/kwatch/client.crt',
           client_key '/etc/kwatch/client.key');
-- plain http needs a superuser's explicit allow_insecure_http
CREATE SERVER k_certs FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'http://10.0.0.1:8080', allow_insecure_http 'true',
           client_certificate '/etc/kwatch/client.crt',
           client_key '/etc/kwatch/client.key');
-- skipping TLS verification and naming a CA exclude each other (kubectl's rule)
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://x', insecure_skip_tls_verify 'true',
           certificate_authority '/etc/kubernetes/pki/ca.crt');
SELECT srvname, srvoptions FROM pg_foreign_server
 WHERE srvname LIKE 'k\_%' ORDER BY srvname;

-- A typo gets a suggestion; a wild guess gets the list.
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (kubconfig '/x');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (apiserver 'https://x');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (password 'secret');
-- An option of another kind of object says where it belongs.
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://x', namespace 'default');

-- Secrets belong on user mappings.
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://x', token 'eyJhbGciOiJSUzI1NiJ9.secret');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://x', client_key_data '-----BEGIN EC PRIVATE KEY-----');

-- Values.
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (api_server '127.0.0.1:6443');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (api_server 'https://');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (api_server 'https://a b');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (kubeconfig '');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (in_cluster 'maybe');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://x', insecure_skip_tls_verify 'yes please');

-- Consistency: one source, context only with kubeconfig, cert with key.
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch;
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (tls_server_name 'k8s');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch OPTIONS (in_cluster 'false');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (in_cluster 'true', kubeconfig '/x');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (in_cluster 'on', api_server 'https://x');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (kubeconfig '/x', api_server 'https://x');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://x', context 'dev');
CREATE SERVER bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://x', client_certificate '/c.crt');
-- in_cluster 'false' is no source, so it may sit beside one.
CREATE SERVER k_not_pod FOREIGN DATA WRAPPER kwatch
  OPTIONS (in_cluster 'false', api_server 'https://x');

-- ALTER SERVER is checked on the resulting list.
ALTER SERVER k_api OPTIONS (ADD kubeconfig '/x');
ALTER SERVER k_api OPTIONS (DROP api_server);
ALTER SERVER k_api OPTIONS (DROP api_server, ADD kubeconfig '/etc/k.conf');
ALTER SERVER k_api OPTIONS (ADD context 'dev');
ALTER SERVER k_api OPTIONS (SET kubeconfig '/etc/k2.conf', DROP context);
SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'k_api';

--
-- User mappings: credentials.
--
CREATE USER MAPPING FOR CURRENT_USER SERVER k_api
  OPTIONS (token 'eyJhbGciOiJSUzI1NiJ9.e30.c2ln');
CREATE USER MAPPING FOR PUBLIC SERVER k_api
  OPTIONS (token_file '/var/run/kwatch/public-token');
CREATE USER MAPPING FOR CURRENT_USER SERVER k_pod
  OPTIONS (client_certificate_data '-----BEGIN CERTIFICATE-----
MIIB
-----END CERTIFICATE-----',
           client_key_data '-----BEGIN EC PRIVATE KEY-----
MHcC
-----END EC PRIVATE KEY-----');
CREATE USER MAPPING FOR CURRENT_USER SERVER k_certs
  OPTIONS (client_certificate '/etc/kwatch/me.crt', client_key '/etc/kwatch/me.key');
CREATE USER MAPPING FOR CURRENT_USER SERVER k_list;   -- no credentials: fine

-- Not on a user mapping.
CREATE USER MAPPING FOR PUBLIC SERVER k_pod OPTIONS (kubeconfig '/x');
CREATE USER MAPPING FOR PUBLIC SERVER k_pod OPTIONS (tokn 'abc');
-- Values and consistency; secret values never appear in messages.
CREATE USER MAPPING FOR PUBLIC SERVER k_pod OPTIONS (token 'two words');
CREATE USER MAPPING FOR PUBLIC SERVER k_pod OPTIONS (token '');
CREATE USER MAPPING FOR PUBLIC SERVER k_pod
  OPTIONS (client_key_data 'TUhjQ0FRRUVJRGFL', client_certificate '/c.crt');
CREATE USER MAPPING FOR PUBLIC SERVER k_pod
  OPTIONS (token 'abc', token_file '/t');
CREATE USER MAPPING FOR PUBLIC SERVER k_pod
  OPTIONS (client_certificate '/c.crt');
CREATE USER MAPPING FOR PUBLIC SERVER k_pod
  OPTIONS (client_certificate '/c.crt', client_certificate_data '-----BEGIN CERTIFICATE-----',
           client_key '/c.key');
ALTER USER MAPPING FOR CURRENT_USER SERVER k_api OPTIONS (ADD token_file '/t');
ALTER USER MAPPING FOR CURRENT_USER SERVER k_api
  OPTIONS (DROP token, ADD token_file '/t');
SELECT s.srvname, m.umuser = 0 AS public, m.umoptions
  FROM pg_user_mapping m JOIN pg_foreign_server s ON s.oid = m.umserver
 ORDER BY 1, 2;

--
-- Foreign tables and columns.
--
CREATE FOREIGN TABLE k_pods (name text) SERVER k_api
  OPTIONS (resource 'pods', namespace 'default');
CREATE FOREIGN TABLE bad (name text) SERVER k_api OPTIONS (resorce 'pods');
CREATE FOREIGN TABLE bad (name text) SERVER k_api OPTIONS (kubeconfig '/x');
CREATE FOREIGN TABLE bad (name text OPTIONS (path 'metadata.name')) SERVER k_api
  OPTIONS (resource 'pods');

--
-- Roles without pg_read_server_files may not point the server at files.
--
CREATE ROLE kwatch_regress_user;
GRANT USAGE ON FOREIGN DATA WRAPPER kwatch TO kwatch_regress_user;
SET ROLE kwatch_regress_user;
CREATE SERVER u_bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (kubeconfig '/etc/kubernetes/admin.conf');
CREATE SERVER u_bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://x', certificate_authority '/etc/shadow');
CREATE SERVER u_bad FOREIGN DATA WRAPPER kwatch OPTIONS (in_cluster 'true');
CREATE SERVER u_api FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://k8s.example.com', tls_server_name 'k8s');
CREATE USER MAPPING FOR CURRENT_USER SERVER u_api OPTIONS (token_file '/etc/shadow');
CREATE USER MAPPING FOR CURRENT_USER SERVER u_api OPTIONS (token 'mine');
-- transport-weakening options are a superuser's
CREATE SERVER u_bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'https://x', insecure_skip_tls_verify 'true');
CREATE SERVER u_bad FOREIGN DATA WRAPPER kwatch
  OPTIONS (api_server 'http://x', allow_insecure_http 'true');
CREATE SERVER u_bad FOREIGN DATA WRAPPER kwatch OPTIONS (api_server 'http://x');
ALTER SERVER u_api OPTIONS (ADD insecure_skip_tls_verify 'true');
-- 'false' weakens nothing
ALTER SERVER u_api OPTIONS (ADD insecure_skip_tls_verify 'false');
-- A server a superuser set up with a file can't be altered by others.
RESET ROLE;
ALTER SERVER k_api OWNER TO kwatch_regress_user;
SET ROLE kwatch_regress_user;
ALTER SERVER k_api OPTIONS (SET tls_server_name 'k8s');
RESET ROLE;

-- Membership in pg_read_server_files is enough.
GRANT pg_read_server_files TO kwatch_regress_user;
SET ROLE kwatch_regress_user;
CREATE SERVER u_kubeconfig FOREIGN DATA WRAPPER kwatch
  OPTIONS (kubeconfig '/etc/kubernetes/admin.conf');
ALTER SERVER k_api OPTIONS (SET tls_server_name 'k8s');
CREATE USER MAPPING FOR CURRENT_USER SERVER u_kubeconfig
  OPTIONS (token_file '/var/run/kwatch/token');
RESET ROLE;

-- server_config shows paths and reads files: not for PUBLIC.
SELECT has_function_privilege('kwatch_regress_user',
                              'kwatch.server_config(text)', 'EXECUTE');

-- server_config refuses servers of other wrappers and unknown servers.
CREATE FOREIGN DATA WRAPPER kwatch_regress_other;
CREATE SERVER k_other FOREIGN DATA WRAPPER kwatch_regress_other;
SELECT kwatch.server_config('k_other');
SELECT kwatch.server_config('no_such_server');

-- Clean up for the suites that follow (quietly: the notices name the
-- role running the tests).
SET client_min_messages = warning;
DROP SERVER k_other;
DROP FOREIGN DATA WRAPPER kwatch_regress_other;
DROP OWNED BY kwatch_regress_user CASCADE;
DROP ROLE kwatch_regress_user;
DROP SERVER k_kubeconfig, k_list, k_pod, k_certs, k_not_pod CASCADE;
RESET client_min_messages;
SELECT count(*) AS servers_left FROM pg_foreign_server WHERE srvname <> 'kwatch_events';
SELECT count(*) AS mappings_left FROM pg_user_mapping;
SELECT count(*) AS foreign_tables_left FROM pg_foreign_table WHERE ftrelid <> 'kwatch.events'::regclass;
DROP EXTENSION kwatch;
