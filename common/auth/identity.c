/* SPDX-License-Identifier: Apache-2.0 */
/* Identity store: loading and checking the key file, lookups by access key. */
#include "auth/identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/names.h"

struct ft_ident_store {
	json_t *doc; /* normalized: {"AK": {"secret", "role", "buckets"?}}; read-only after load */
};

static int fail(char *err, size_t errlen, const char *where, const char *key, const char *what)
{
	snprintf(err, errlen, "%s: key \"%.64s\": %s", where, key, what);
	return -1;
}

/* Normalizes one entry into a new object {"secret","role","buckets"?}; 0 or -1 with err. */
static int entry(const char *where, const char *ak, json_t *v, json_t **out, char *err, size_t errlen)
{
	const char *secret = NULL, *role = "admin", *why;
	json_t *buckets = NULL, *b;
	ft_role_t r;
	size_t i;

	if (json_is_string(v)) {
		secret = json_string_value(v);
	} else if (json_is_object(v)) {
		secret = json_string_value(json_object_get(v, "secret"));
		if (json_object_get(v, "role") != NULL)
			role = json_string_value(json_object_get(v, "role"));
		buckets = json_object_get(v, "buckets");
	}
	if (ak[0] == '\0' || strlen(ak) >= 128)
		return fail(err, errlen, where, ak, "access key must be 1..127 bytes");
	if (secret == NULL || secret[0] == '\0')
		return fail(err, errlen, where, ak, "the secret must be a non-empty string");
	if (role == NULL || ft_role_parse(role, &r) != 0)
		return fail(err, errlen, where, ak, "role must be admin, readwrite or readonly");
	if (buckets != NULL && !json_is_array(buckets))
		return fail(err, errlen, where, ak, "buckets must be an array of bucket names");
	json_array_foreach(buckets, i, b) {
		if (!json_is_string(b) || ft_name_check_bucket(json_string_value(b), &why) != 0)
			return fail(err, errlen, where, ak, "buckets holds an invalid bucket name");
	}
	*out = json_pack("{s:s, s:s}", "secret", secret, "role", ft_role_name(r));
	if (*out != NULL && buckets != NULL)
		json_object_set(*out, "buckets", buckets);
	return *out != NULL ? 0 : fail(err, errlen, where, ak, "out of memory");
}

ft_ident_store_t *ft_ident_from_json(json_t *doc, const char *where, char *err, size_t errlen)
{
	ft_ident_store_t *s = NULL;
	json_t *norm = json_object(), *e;
	const char *ak;
	json_t *v;

	if (!json_is_object(doc)) {
		snprintf(err, errlen, "%s: expected a JSON object keyed by access key", where);
		goto fail;
	}
	json_object_foreach(doc, ak, v) {
		if (entry(where, ak, v, &e, err, errlen) != 0 || json_object_set_new(norm, ak, e) != 0)
			goto fail;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	s->doc = norm;
	json_decref(doc);
	return s;
fail:
	json_decref(norm);
	json_decref(doc);
	return NULL;
}

ft_ident_store_t *ft_ident_load(const char *path, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);

	if (doc == NULL) {
		/* jansson's message may quote the text around the error: never repeat it (it may be a secret). */
		snprintf(err, errlen, "%s: not readable as JSON (line %d)", path, jerr.line);
		return NULL;
	}
	return ft_ident_from_json(doc, path, err, errlen);
}

void ft_ident_free(ft_ident_store_t *s)
{
	if (s == NULL)
		return;
	json_decref(s->doc);
	free(s);
}

size_t ft_ident_count(const ft_ident_store_t *s)
{
	return s != NULL ? json_object_size(s->doc) : 0;
}

int ft_ident_find(const ft_ident_store_t *s, const char *access_key, ft_ident_t *out)
{
	json_t *e = s != NULL && access_key != NULL ? json_object_get(s->doc, access_key) : NULL;

	if (e == NULL)
		return -1;
	out->access_key = access_key;
	out->secret = json_string_value(json_object_get(e, "secret"));
	ft_role_parse(json_string_value(json_object_get(e, "role")), &out->role);
	out->buckets = json_object_get(e, "buckets");
	return 0;
}

int ft_ident_check(const ft_ident_store_t *s, const char *access_key, const char *secret, ft_ident_t *out)
{
	ft_ident_t id;
	size_t n;

	if (secret == NULL || ft_ident_find(s, access_key, &id) != 0)
		return -1;
	n = strlen(id.secret);
	if (strlen(secret) != n || CRYPTO_memcmp(secret, id.secret, n) != 0)
		return -1;
	*out = id;
	return 0;
}

void ft_ident_principal(const ft_ident_t *id, ft_principal_t *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->sub, sizeof(p->sub), "%s", id->access_key);
	p->role = id->role;
	p->buckets = id->buckets != NULL ? json_incref(id->buckets) : NULL;
}
