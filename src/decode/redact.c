/*-------------------------------------------------------------------------
 *
 * redact.c
 *		Secret values kept out of tables, query results and payloads unless
 *		the user opted in (README "Security").
 *
 * A Secret (core group, resource "secrets") holds credentials in `data`
 * (base64) and `stringData` (clear text, on write; the API server folds it
 * into data, but a Secret written with `kubectl apply` keeps the applied
 * manifest, stringData included, in the annotation
 * kubectl.kubernetes.io/last-applied-configuration).  Kubernetes docs,
 * "Secrets" (concepts/configuration/secret) and "Declarative Management of
 * Kubernetes Objects Using Configuration Files" describe both.
 *
 * Redaction keeps every key and replaces each value by
 *
 *		"<redacted hmac-sha256:0123...>"	(32 hex digits: 128 bits)
 *
 * an HMAC-SHA256 under a key only the server processes can read (the
 * file kwatch_secret.key in the data directory, 32 random bytes made on
 * first use) of the value together with where it is: the Secret's uid, the
 * field (data, stringData, the annotation) and the key (0.7.0;
 * doc/security.md, Secrets).
 * A changed value shows as a changed digest, and the digest tells nothing
 * about the value, even a short one: without the key there is nothing to
 * guess against, and since the digest is keyed by object and key, a value
 * a role puts in a Secret of its own has a different digest there than in
 * any other Secret, so equal digests across Secrets (or keys) prove
 * nothing.  (0.6.0 digested the value alone: a tenant could learn the
 * digests of guesses through a Secret of its own and join them with
 * another's.)  The whole object is otherwise unchanged (key order,
 * metadata, type).
 *
 * Callers: the worker's LIST and WATCH paths (watch.c) for a watch without
 * secret_data, live scans (live_scan.c) of a table without the option
 * secret_data, and kwatch.redact_secret(jsonb) for the update script.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/hmac.h"
#include "common/sha2.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/resowner.h"

#include "kw_common.h"
#include "kw_decode.h"

#define KW_SECRET_KEY_FILE "kwatch_secret.key"
#define KW_SECRET_KEY_LEN 32
#define KW_DIGEST_HEX 32		/* hex digits of the digest shown */
#define KW_LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"

static uint8 secret_key[KW_SECRET_KEY_LEN];
static bool secret_key_loaded = false;

/* read_key: KW_SECRET_KEY_LEN bytes of `path` into secret_key; false if absent. */
static bool
read_key(const char *path)
{
	int			fd = open(path, O_RDONLY | PG_BINARY, 0);
	ssize_t		n;

	if (fd < 0)
	{
		if (errno == ENOENT)
			return false;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open kwatch's redaction key \"%s\": %m", path)));
	}
	n = read(fd, secret_key, KW_SECRET_KEY_LEN);
	close(fd);
	if (n != KW_SECRET_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("kwatch's redaction key \"%s\" is not %d bytes", path,
						KW_SECRET_KEY_LEN),
				 errhint("Remove the file; a new key is made (digests of Secret values change once).")));
	return true;
}

/*
 * load_key: the redaction key, made on first use.  A new key is written to
 * a file of its own and link()ed into place, which fails if another process
 * made one first: every process ends up reading the same key, never half a
 * file.  ERRORs on file system failures.
 */
static void
load_key(void)
{
	char		path[MAXPGPATH];
	char		tmp[MAXPGPATH];
	uint8		key[KW_SECRET_KEY_LEN];
	int			fd;

	if (secret_key_loaded)
		return;
	snprintf(path, sizeof(path), "%s/%s", DataDir, KW_SECRET_KEY_FILE);
	if (!read_key(path))
	{
		if (!pg_strong_random(key, sizeof(key)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate kwatch's redaction key")));
		snprintf(tmp, sizeof(tmp), "%s/%s.%d", DataDir, KW_SECRET_KEY_FILE, MyProcPid);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY, S_IRUSR | S_IWUSR);
		if (fd < 0 || write(fd, key, sizeof(key)) != sizeof(key) || pg_fsync(fd) != 0)
		{
			int			save = errno;

			if (fd >= 0)
				close(fd);
			unlink(tmp);
			errno = save;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write kwatch's redaction key \"%s\": %m", tmp)));
		}
		close(fd);
		if (link(tmp, path) != 0 && errno != EEXIST)
		{
			int			save = errno;

			unlink(tmp);
			errno = save;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create kwatch's redaction key \"%s\": %m", path)));
		}
		unlink(tmp);
		if (!read_key(path))
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("kwatch's redaction key \"%s\" vanished", path)));
	}
	secret_key_loaded = true;
}

/*
 * Where a value is: the Secret's uid and the field holding the value
 * (digest_value's context).
 */
typedef struct DigestPlace
{
	const char *uid;			/* metadata.uid, "" when absent */
	const char *field;			/* "data", "stringData" or the annotation's name */
} DigestPlace;

/* hmac_part: feeds `s` and a NUL separator (so that parts cannot run together). */
static int
hmac_part(pg_hmac_ctx *ctx, const char *s, size_t len)
{
	static const uint8 sep = 0;

	if (pg_hmac_update(ctx, (const uint8 *) s, len) < 0)
		return -1;
	return pg_hmac_update(ctx, &sep, 1);
}

/*
 * digest_value: "<redacted hmac-sha256:HEX>" for `len` bytes of `data`,
 * the value of key `key` (NULL: none, the annotation) at `place`: the HMAC
 * of uid, field, key and value, each NUL-terminated, so the same value has
 * unrelated digests in two Secrets or under two keys.
 */
static json_object *
digest_value(const DigestPlace *place, const char *key, const char *data, size_t len)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);
	uint8		mac[PG_SHA256_DIGEST_LENGTH];
	char		out[64];
	int			o;

	if (ctx == NULL ||
		pg_hmac_init(ctx, secret_key, KW_SECRET_KEY_LEN) < 0 ||
		hmac_part(ctx, place->uid, strlen(place->uid)) < 0 ||
		hmac_part(ctx, place->field, strlen(place->field)) < 0 ||
		hmac_part(ctx, key ? key : "", key ? strlen(key) : 0) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_hmac_final(ctx, mac, sizeof(mac)) < 0)
	{
		const char *why = ctx ? pg_hmac_error(ctx) : "out of memory";

		if (ctx)
			pg_hmac_free(ctx);
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute a Secret value's digest: %s", why)));
	}
	pg_hmac_free(ctx);
	o = snprintf(out, sizeof(out), "%s", KW_REDACTED_PREFIX);
	for (int i = 0; i < KW_DIGEST_HEX / 2; i++)
		o += snprintf(out + o, sizeof(out) - o, "%02x", mac[i]);
	snprintf(out + o, sizeof(out) - o, ">");
	return json_object_new_string(out);
}

/* redact_members: every member value of the object `o` (if one) -> its digest at `place`. */
static void
redact_members(json_object *o, const DigestPlace *place)
{
	struct json_object_iterator it,
				end;

	if (o == NULL || !json_object_is_type(o, json_type_object))
		return;
	it = json_object_iter_begin(o);
	end = json_object_iter_end(o);
	while (!json_object_iter_equal(&it, &end))
	{
		const char *key = json_object_iter_peek_name(&it);
		json_object *val = json_object_iter_peek_value(&it);
		const char *s;
		size_t		len;

		if (json_object_is_type(val, json_type_string))
		{
			s = json_object_get_string(val);
			len = json_object_get_string_len(val);
		}
		else
		{
			s = json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN);
			len = strlen(s);
		}
		/*
		 * Replacing the value of an existing key keeps the key's place (and
		 * the iterator valid: json-c swaps the entry's value in place).
		 */
		json_object_object_add(o, key, digest_value(place, key, s, len));
		json_object_iter_next(&it);
	}
}

/*
 * kw_redact_secret_object: redacts the json-c object `obj` of a Secret in
 * place: each value of data and stringData, and the last-applied annotation
 * (which repeats them), becomes "<redacted hmac-sha256:HEX>".  Anything
 * else is left as it is.  ERRORs: the key file cannot be read or made.
 */
void
kw_redact_secret_object(void *obj)
{
	json_object *o = (json_object *) obj;
	json_object *meta = NULL,
			   *ann,
			   *v;

	ResourceOwner save = CurrentResourceOwner;
	ResourceOwner owner = NULL;

	if (o == NULL || !json_object_is_type(o, json_type_object))
		return;
	load_key();

	/*
	 * pg_hmac_create() remembers its OpenSSL context in CurrentResourceOwner
	 * (common/hmac_openssl.c), which the worker, outside a transaction, does
	 * not have: lend it one for the duration.
	 */
	if (save == NULL)
		CurrentResourceOwner = owner = ResourceOwnerCreate(NULL, "kwatch redaction");
	PG_TRY();
	{
		DigestPlace place = {.uid = ""};
		json_object *uid;

		if (json_object_object_get_ex(o, "metadata", &meta) &&
			json_object_object_get_ex(meta, "uid", &uid) &&
			json_object_is_type(uid, json_type_string))
			place.uid = json_object_get_string(uid);
		place.field = "data";
		if (json_object_object_get_ex(o, "data", &v))
			redact_members(v, &place);
		place.field = "stringData";
		if (json_object_object_get_ex(o, "stringData", &v))
			redact_members(v, &place);
		place.field = KW_LAST_APPLIED;
		if (meta != NULL &&
			json_object_object_get_ex(meta, "annotations", &ann) &&
			json_object_is_type(ann, json_type_object) &&
			json_object_object_get_ex(ann, KW_LAST_APPLIED, &v))
		{
			const char *s = json_object_get_string(v);

			json_object_object_add(ann, KW_LAST_APPLIED,
								   digest_value(&place, NULL, s ? s : "", s ? strlen(s) : 0));
		}
	}
	PG_FINALLY();
	{
		if (owner)
		{
			ResourceOwnerRelease(owner, RESOURCE_RELEASE_BEFORE_LOCKS, false, true);
			ResourceOwnerRelease(owner, RESOURCE_RELEASE_LOCKS, false, true);
			ResourceOwnerRelease(owner, RESOURCE_RELEASE_AFTER_LOCKS, false, true);
			CurrentResourceOwner = save;
			ResourceOwnerDelete(owner);
		}
	}
	PG_END_TRY();
}

/*
 * kw_redact_secret_json: the same for a Secret as JSON text: *json (len
 * bytes, NUL-terminated) is replaced by a palloc'd redacted copy, key order
 * kept.  Returns false, leaving *json alone, when the text is not a JSON
 * object (the caller must then not store it: it may hold values in clear).
 */
bool
kw_redact_secret_json(char **json, int *len)
{
	json_tokener *tok = json_tokener_new_ex(64);
	json_object *o;
	const char *out;
	size_t		outlen;

	if (tok == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	o = json_tokener_parse_ex(tok, *json, *len);
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success ||
		!json_object_is_type(o, json_type_object))
	{
		json_tokener_free(tok);
		if (o)
			json_object_put(o);
		return false;
	}
	json_tokener_free(tok);
	PG_TRY();
	{
		kw_redact_secret_object(o);
		out = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN |
												JSON_C_TO_STRING_NOSLASHESCAPE,
												&outlen);
		*json = pnstrdup(out, outlen);
		*len = (int) outlen;
	}
	PG_FINALLY();
	{
		json_object_put(o);
	}
	PG_END_TRY();
	return true;
}

PG_FUNCTION_INFO_V1(kwatch_redact_secret);

/*
 * kwatch_redact_secret: SQL kwatch.redact_secret(object jsonb) -> jsonb,
 * the Secret `object` as kwatch stores it without secret_data (see
 * kw_redact_secret_object).  Used by the 0.1.0 -> 0.2.0 update script on
 * rows 0.1.0 stored in clear.  ERRORs: 22023 when object is not a JSON
 * object.
 */
Datum
kwatch_redact_secret(PG_FUNCTION_ARGS)
{
	Jsonb	   *in = PG_GETARG_JSONB_P(0);
	char	   *text = JsonbToCString(NULL, &in->root, VARSIZE(in));
	int			len = strlen(text);

	if (!kw_redact_secret_json(&text, &len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kwatch.redact_secret() takes a JSON object")));
	/* fmgrprotos.h's json_object() collides with json-c's type: by oid */
	PG_RETURN_DATUM(OidFunctionCall1(F_JSONB_IN, CStringGetDatum(text)));
}

/*
 * kw_redacted_value_in: whether the json-c value `obj` (any type, NULL =
 * JSON null) holds, at any depth, a string that begins as a redacted value
 * does ("<redacted hmac-sha256:").  A write through a redacting live table
 * (fdw_modify.c) refuses such a value: it would store the digest in place of
 * the Secret's value.
 */
bool
kw_redacted_value_in(void *obj)
{
	json_object *o = (json_object *) obj;

	if (o == NULL)
		return false;
	switch (json_object_get_type(o))
	{
		case json_type_string:
			return strncmp(json_object_get_string(o), KW_REDACTED_PREFIX,
						   strlen(KW_REDACTED_PREFIX)) == 0;
		case json_type_array:
			for (size_t i = 0; i < json_object_array_length(o); i++)
				if (kw_redacted_value_in(json_object_array_get_idx(o, i)))
					return true;
			return false;
		case json_type_object:
			{
				json_object_object_foreach(o, key, val)
				{
					(void) key;
					if (kw_redacted_value_in(val))
						return true;
				}
				return false;
			}
		default:
			return false;
	}
}
