/* SPDX-License-Identifier: Apache-2.0 */
/* Bucket metadata (BMD): sorted bucket list, JSON codec, refcounts and the installed copy. */
#include "cluster/bmd.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "auth/auth.h"
#include "auth/seal.h"
#include "base/codec.h"
#include "base/redact.h"

/*
 * DESIGN
 * Same life cycle as the Smap (smap.c): mutable only while its creator holds the single
 * reference, shared read-only once installed; the current pointer is swapped, and references to
 * it taken, under one mutex. Buckets are sorted by (provider, name) for binary search and a
 * stable JSON form.
 */

#define PROVIDER_MAX ((int)sizeof(((ft_bucket_t *)0)->provider))

static pthread_mutex_t bmd_lock = PTHREAD_MUTEX_INITIALIZER;
static ft_bmd_t *bmd_cur; /* guarded by bmd_lock; holds one reference */

static void bmd_free(ft_bmd_t *b)
{
	for (int i = 0; i < b->n; i++)
		json_decref(b->buckets[i].backend);
	json_decref(b->etl);
	free(b->buckets);
	free(b);
}

ft_bmd_t *ft_bmd_new(void)
{
	ft_bmd_t *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return NULL;
	ft_random_id(b->uuid);
	b->refs = 1;
	return b;
}

ft_bmd_t *ft_bmd_clone(const ft_bmd_t *b)
{
	ft_bmd_t *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->version = b->version;
	memcpy(c->uuid, b->uuid, sizeof(c->uuid));
	c->refs = 1;
	if (b->etl != NULL && (c->etl = json_deep_copy(b->etl)) == NULL) {
		free(c);
		return NULL;
	}
	if (b->n > 0) {
		c->buckets = malloc((size_t)b->n * sizeof(ft_bucket_t));
		if (c->buckets == NULL) {
			json_decref(c->etl);
			free(c);
			return NULL;
		}
		memcpy(c->buckets, b->buckets, (size_t)b->n * sizeof(ft_bucket_t));
		for (int i = 0; i < b->n; i++) {
			/* The clone's own copy: BMD versions live on different threads, and a JSON object's
			 * refcount is not safe to share between them (jansson reads it unguarded). */
			c->buckets[i].backend = NULL;
			if (b->buckets[i].backend != NULL) {
				c->buckets[i].backend = json_deep_copy(b->buckets[i].backend);
				if (c->buckets[i].backend == NULL) {
					c->n = i;
					bmd_free(c);
					return NULL;
				}
			}
		}
		c->n = b->n;
	}
	return c;
}

static int bucket_cmp(const ft_bucket_t *x, const char *provider, const char *name)
{
	int c = strcmp(x->provider, provider);

	return c != 0 ? c : strcmp(x->name, name);
}

/* Index of (provider, name), or -(insertion point + 1) when absent. */
static int bucket_search(const ft_bmd_t *b, const char *provider, const char *name)
{
	int lo = 0, hi = b->n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		int c = bucket_cmp(&b->buckets[mid], provider, name);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -(lo + 1);
}

/* The protection properties within their bounds (see ft_bucket_props_apply); 0 copies = 1. */
static int props_valid(const ft_bucket_t *bk)
{
	return bk->mirror_copies >= 0 && bk->mirror_copies <= FT_MIRROR_COPIES_MAX &&
	       (bk->mirror_scope == FT_MIRROR_SCOPE_MOUNTPATHS || bk->mirror_scope == FT_MIRROR_SCOPE_TARGETS) &&
	       !(ft_bucket_mirror_targets(bk) && bk->ec_data > 0) && bk->ec_data >= 0 &&
	       bk->ec_data <= FT_EC_SLICES_MAX && bk->ec_parity >= 0 && bk->ec_parity <= FT_EC_SLICES_MAX &&
	       (bk->ec_data == 0) == (bk->ec_parity == 0) && bk->ec_objsize_limit >= 0 &&
	       (bk->validate_warm_get == 0 || bk->validate_warm_get == 1) &&
	       (bk->public_read == 0 || bk->public_read == 1);
}

static int bucket_valid(const ft_bucket_t *bk)
{
	return strnlen(bk->name, sizeof(bk->name)) < sizeof(bk->name) && ft_name_check_bucket(bk->name, NULL) == 0 &&
	       bk->provider[0] != '\0' && strnlen(bk->provider, PROVIDER_MAX) < PROVIDER_MAX &&
	       ft_cksum_valid((int)bk->cksum) && props_valid(bk);
}

/* Also -1 (BMD unchanged) for an invalid bucket: bad name, empty provider, unknown checksum type, props out of bounds. */
int ft_bmd_add(ft_bmd_t *b, const ft_bucket_t *bucket)
{
	ft_bucket_t *grown;
	int i;

	if (!bucket_valid(bucket))
		return -1;
	i = bucket_search(b, bucket->provider, bucket->name);
	if (i >= 0)
		return 1;
	json_t *backend = NULL;
	if (bucket->backend != NULL && (backend = json_deep_copy(bucket->backend)) == NULL)
		return -1;
	grown = realloc(b->buckets, (size_t)(b->n + 1) * sizeof(ft_bucket_t));
	if (grown == NULL) {
		json_decref(backend);
		return -1;
	}
	b->buckets = grown;
	i = -i - 1;
	memmove(&grown[i + 1], &grown[i], (size_t)(b->n - i) * sizeof(ft_bucket_t));
	grown[i] = *bucket;
	grown[i].backend = backend;
	b->n++;
	return 0;
}

int ft_bmd_remove(ft_bmd_t *b, const char *provider, const char *name)
{
	int i = bucket_search(b, provider, name);

	if (i < 0)
		return -1;
	json_decref(b->buckets[i].backend);
	memmove(&b->buckets[i], &b->buckets[i + 1], (size_t)(b->n - i - 1) * sizeof(ft_bucket_t));
	b->n--;
	return 0;
}

const ft_bucket_t *ft_bmd_find(const ft_bmd_t *b, const char *provider, const char *name)
{
	int i = bucket_search(b, provider, name);

	return i >= 0 ? &b->buckets[i] : NULL;
}

static const char *const secret_keys[] = {"secret_key", "session_token", "account_key", "sas"};
#define N_SECRET_KEYS (sizeof(secret_keys) / sizeof(secret_keys[0]))

typedef enum {
	SECRETS_DROP = 0, /* public form: no secrets at all */
	SECRETS_SEALED,   /* sealed with the cluster key when there is one (auth/seal.h), else as they are */
} secrets_mode_t;

/* The additional data a sealed secret is bound to: "provider/bucket/field". */
static void seal_aad(const ft_bucket_t *bucket, const char *field, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s/%s", bucket->provider, bucket->name, field);
}

/* Replaces the secret members of be by their sealed form; 0 or -1. */
static int seal_secrets(const ft_bucket_t *bucket, json_t *be)
{
	const ft_auth_t *a = ft_auth();
	char aad[FT_BUCKET_NAME_MAX + 64];

	if (!a->have_secret)
		return 0;
	for (size_t i = 0; i < N_SECRET_KEYS; i++) {
		const char *v = json_string_value(json_object_get(be, secret_keys[i]));
		if (v == NULL || v[0] == '\0' || ft_seal_is_sealed(v))
			continue;
		seal_aad(bucket, secret_keys[i], aad, sizeof(aad));
		char *sealed = ft_seal(a->seal_key, aad, v);
		if (sealed == NULL || json_object_set_new(be, secret_keys[i], json_string(sealed)) != 0) {
			free(sealed);
			return -1;
		}
		free(sealed);
	}
	return 0;
}

/* Opens the sealed secret members of bk->backend in place; 0, or -1 with err (never the value). */
static int open_secrets(ft_bucket_t *bk, const char *what, char *err, size_t errlen);

/* A string that may hold a URL, as answers show it; a new reference. */
static json_t *url_public(const char *s)
{
	char shown[FT_REDACT_URL_MAX];

	if (strstr(s, "://") == NULL)
		return json_string(s);
	/* a prefix such as "--src=" stays: ft_redact_url keeps what precedes "://" */
	return json_string(ft_redact_url(s, shown, sizeof(shown)));
}

/* The bucket as JSON, its backend secrets as mode says. NULL on allocation failure. */
static json_t *bucket_json(const ft_bucket_t *bucket, secrets_mode_t mode)
{
	json_t *j = json_pack(
		"{s:s, s:s, s:s, s:I, s:{s:i}, s:{s:i, s:i, s:I}, s:b}", "name", bucket->name, "provider",
		bucket->provider, "checksum", ft_cksum_name(bucket->cksum), "created", (json_int_t)bucket->created_ns,
		"mirror", "copies", bucket->mirror_copies > 1 ? bucket->mirror_copies : 1, "ec", "data_slices",
		bucket->ec_data, "parity_slices", bucket->ec_parity, "objsize_limit",
		(json_int_t)bucket->ec_objsize_limit, "checksum_validate_warm_get", bucket->validate_warm_get != 0);

	json_t *mirror = j != NULL ? json_object_get(j, "mirror") : NULL;
	if (mirror != NULL && bucket->mirror_scope == FT_MIRROR_SCOPE_TARGETS &&
	    json_object_set_new(mirror, "scope", json_string("targets")) != 0) {
		json_decref(j);
		return NULL;
	}
	if (j != NULL && bucket->public_read && json_object_set_new(j, "acl", json_string("public-read")) != 0) {
		json_decref(j);
		return NULL;
	}
	if (j == NULL || bucket->backend == NULL)
		return j;
	json_t *be = json_deep_copy(bucket->backend);
	if (be == NULL || json_object_set_new(j, "backend", be) != 0) {
		json_decref(j);
		return NULL;
	}
	for (size_t i = 0; mode == SECRETS_DROP && i < N_SECRET_KEYS; i++)
		json_object_del(be, secret_keys[i]);
	/* an endpoint (an ht:// origin above all) may carry user:password@ or a signed query */
	const char *endpoint = json_string_value(json_object_get(be, "endpoint"));
	if (mode == SECRETS_DROP && endpoint != NULL &&
	    json_object_set_new(be, "endpoint", url_public(endpoint)) != 0) {
		json_decref(j);
		return NULL;
	}
	if (mode == SECRETS_SEALED && seal_secrets(bucket, be) != 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

json_t *ft_bucket_to_json(const ft_bucket_t *bucket)
{
	return bucket_json(bucket, SECRETS_DROP);
}

json_t *ft_bucket_to_json_sealed(const ft_bucket_t *bucket)
{
	return bucket_json(bucket, SECRETS_SEALED);
}

json_t *ft_etl_spec_public(const json_t *spec)
{
	json_t *out = json_deep_copy(spec), *cmd, *v;
	const char *url;
	size_t i;

	if (out == NULL)
		return NULL;
	url = json_string_value(json_object_get(out, "url"));
	if (url != NULL && json_object_set_new(out, "url", url_public(url)) != 0)
		goto fail;
	cmd = json_object_get(out, "command");
	json_array_foreach(cmd, i, v) {
		if (json_is_string(v) && json_array_set_new(cmd, i, url_public(json_string_value(v))) != 0)
			goto fail;
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The additional data a sealed transformer URL is bound to: "etl/NAME/url". */
static void etl_aad(const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "etl/%s/url", name);
}

json_t *ft_etl_spec_sealed(const char *name, const json_t *spec)
{
	const ft_auth_t *a = ft_auth();
	json_t *out = json_deep_copy(spec);
	const char *url = json_string_value(json_object_get(out, "url"));
	char aad[FT_BUCKET_NAME_MAX + 16];

	if (out == NULL || !a->have_secret || url == NULL || url[0] == '\0' || ft_seal_is_sealed(url))
		return out;
	etl_aad(name, aad, sizeof(aad));
	char *sealed = ft_seal(a->seal_key, aad, url);
	if (sealed == NULL || json_object_set_new(out, "url", json_string(sealed)) != 0) {
		free(sealed);
		json_decref(out);
		return NULL;
	}
	free(sealed);
	return out;
}

int ft_etl_spec_open(const char *name, json_t *spec, char *err, size_t errlen)
{
	const ft_auth_t *a = ft_auth();
	const char *url = json_string_value(json_object_get(spec, "url"));
	char aad[FT_BUCKET_NAME_MAX + 16];

	if (!ft_seal_is_sealed(url))
		return 0;
	if (!a->have_secret)
		return fail(err, errlen, "bmd: etl %s: its url is sealed and no cluster secret is loaded", name);
	etl_aad(name, aad, sizeof(aad));
	char *plain = ft_unseal(a->seal_key, aad, url);
	if (plain == NULL)
		return fail(
			err, errlen,
			"bmd: etl %s: its url does not open with this cluster secret (another cluster's, or changed)",
			name);
	int rc = json_object_set_new(spec, "url", json_string(plain));
	OPENSSL_cleanse(plain, strlen(plain));
	free(plain);
	return rc == 0 ? 0 : fail(err, errlen, "bmd: out of memory");
}

/* The registry (name -> spec) with every spec's url sealed (ft_etl_spec_sealed); NULL on allocation failure. */
static json_t *etl_sealed(const json_t *etl)
{
	json_t *out = json_object(), *v;
	const char *name;

	json_object_foreach((json_t *)etl, name, v) {
		if (out == NULL || json_object_set_new(out, name, ft_etl_spec_sealed(name, v)) != 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/* The registry (name -> spec) with every spec as ft_etl_spec_public shows it; NULL on allocation failure. */
static json_t *etl_public(const json_t *etl)
{
	json_t *out = json_object(), *v;
	const char *name;

	json_object_foreach((json_t *)etl, name, v) {
		if (out == NULL || json_object_set_new(out, name, ft_etl_spec_public(v)) != 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

static json_t *bmd_json(const ft_bmd_t *b, secrets_mode_t mode)
{
	json_t *j = json_pack("{s:I, s:s}", "version", (json_int_t)b->version, "uuid", b->uuid);
	json_t *a = json_array();

	if (j == NULL || a == NULL)
		goto fail;
	for (int i = 0; i < b->n; i++) {
		if (json_array_append_new(a, bucket_json(&b->buckets[i], mode)) != 0)
			goto fail;
	}
	if (json_object_set_new(j, "buckets", a) != 0) {
		a = NULL; /* set_new released it */
		goto fail;
	}
	a = NULL;
	if (json_object_size(b->etl) > 0 &&
	    json_object_set_new(j, "etl", mode == SECRETS_DROP ? etl_public(b->etl) : etl_sealed(b->etl)) != 0)
		goto fail;
	return j;
fail:
	json_decref(a);
	json_decref(j);
	return NULL;
}

/* NULL on allocation failure. */
json_t *ft_bmd_to_json(const ft_bmd_t *b)
{
	return bmd_json(b, SECRETS_SEALED);
}

json_t *ft_bmd_to_json_public(const ft_bmd_t *b)
{
	return bmd_json(b, SECRETS_DROP);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* The string member key of o (required, no NUL inside) or NULL with err filled. */
static const char *get_string(const json_t *o, const char *key, const char *what, char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, key);

	if (v == NULL) {
		fail(err, errlen, "bmd: %s: missing \"%s\"", what, key);
		return NULL;
	}
	if (!json_is_string(v) || json_string_length(v) != strlen(json_string_value(v))) {
		fail(err, errlen, "bmd: %s: \"%s\" must be a string", what, key);
		return NULL;
	}
	return json_string_value(v);
}

static int bucket_from_json(ft_bucket_t *bk, const json_t *o, const char *what, char *err, size_t errlen)
{
	const char *name, *provider, *cksum, *why = "";
	const json_t *created;

	memset(bk, 0, sizeof(*bk));
	if (!json_is_object(o))
		return fail(err, errlen, "bmd: %s must be an object", what);
	name = get_string(o, "name", what, err, errlen);
	if (name == NULL)
		return -1;
	if (ft_name_check_bucket(name, &why) != 0)
		return fail(err, errlen, "bmd: %s: %s", what, why);
	provider = get_string(o, "provider", what, err, errlen);
	if (provider == NULL)
		return -1;
	if (provider[0] == '\0' || strlen(provider) >= (size_t)PROVIDER_MAX)
		return fail(err, errlen, "bmd: %s: bad \"provider\"", what);
	cksum = get_string(o, "checksum", what, err, errlen);
	if (cksum == NULL)
		return -1;
	if (ft_cksum_parse(cksum, &bk->cksum) != 0)
		return fail(err, errlen, "bmd: %s: unknown \"checksum\" \"%s\"", what, cksum);
	created = json_object_get(o, "created");
	if (!json_is_integer(created))
		return fail(err, errlen, "bmd: %s: \"created\" must be an integer", what);
	snprintf(bk->name, sizeof(bk->name), "%s", name);
	snprintf(bk->provider, sizeof(bk->provider), "%s", provider);
	bk->created_ns = json_integer_value(created);
	char bad[200];
	if (ft_bucket_props_apply(bk, o, bad, sizeof(bad)) != 0)
		return fail(err, errlen, "bmd: %s: %s", what, bad);
	const json_t *be = json_object_get(o, "backend");
	if (be != NULL && !json_is_null(be)) {
		if (!json_is_object(be))
			return fail(err, errlen, "bmd: %s: \"backend\" must be an object", what);
		bk->backend = json_deep_copy(be); /* the caller's reference: dropped after ft_bmd_add */
		if (bk->backend == NULL)
			return fail(err, errlen, "bmd: out of memory");
		if (open_secrets(bk, what, err, errlen) != 0) {
			json_decref(bk->backend);
			bk->backend = NULL;
			return -1;
		}
	}
	return 0;
}

int ft_bucket_from_json(ft_bucket_t *bk, const json_t *o, char *err, size_t errlen)
{
	return bucket_from_json(bk, o, "bucket", err, errlen);
}

static int open_secrets(ft_bucket_t *bk, const char *what, char *err, size_t errlen)
{
	const ft_auth_t *a = ft_auth();
	char aad[FT_BUCKET_NAME_MAX + 64];

	for (size_t i = 0; i < N_SECRET_KEYS; i++) {
		const char *v = json_string_value(json_object_get(bk->backend, secret_keys[i]));
		if (!ft_seal_is_sealed(v))
			continue;
		if (!a->have_secret)
			return fail(err, errlen, "bmd: %s: backend \"%s\" is sealed and no cluster secret is loaded",
				    what, secret_keys[i]);
		seal_aad(bk, secret_keys[i], aad, sizeof(aad));
		char *plain = ft_unseal(a->seal_key, aad, v);
		if (plain == NULL)
			return fail(err, errlen,
				    "bmd: %s: backend \"%s\" does not open with this cluster secret (another "
				    "cluster's, or changed)",
				    what, secret_keys[i]);
		int rc = json_object_set_new(bk->backend, secret_keys[i], json_string(plain));
		OPENSSL_cleanse(plain, strlen(plain));
		free(plain);
		if (rc != 0)
			return fail(err, errlen, "bmd: out of memory");
	}
	return 0;
}

/*
 * The integer member key of o, if present, into *out within [lo, hi]. 0 (also when absent), or -1
 * with err filled.
 */
static int get_int(const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, key);

	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return fail(err, errlen, "\"%s\" must be an integer from %lld to %lld", key, (long long)lo,
			    (long long)hi);
	*out = json_integer_value(v);
	return 0;
}

/* Keys allowed in a section object; -1 with err naming the first other one. */
static int known_keys(const json_t *o, const char *section, const char *const *keys, size_t n, char *err, size_t errlen)
{
	const char *key;
	const json_t *v;

	json_object_foreach((json_t *)o, key, v) {
		size_t i = 0;
		while (i < n && strcmp(key, keys[i]) != 0)
			i++;
		if (i == n)
			return fail(err, errlen, "unknown property \"%s.%s\"", section, key);
	}
	return 0;
}

/* The bucket's canned ACL from acl (NULL: unchanged); 0, or -1 with err. */
static int acl_apply(ft_bucket_t *bk, const json_t *acl, char *err, size_t errlen)
{
	const char *v = json_string_value(acl);

	if (acl == NULL)
		return 0;
	if (v == NULL || (strcmp(v, "private") != 0 && strcmp(v, "public-read") != 0))
		return fail(err, errlen, "\"acl\" must be \"private\" or \"public-read\"");
	bk->public_read = strcmp(v, "public-read") == 0;
	return 0;
}

int ft_bucket_mirror_targets(const ft_bucket_t *bk)
{
	return bk->mirror_scope == FT_MIRROR_SCOPE_TARGETS && bk->mirror_copies > 1;
}

/* mirror.scope from v (NULL: unchanged); 0, or -1 with err. */
static int scope_apply(ft_bucket_t *bk, const json_t *v, char *err, size_t errlen)
{
	const char *s = json_string_value(v);

	if (v == NULL)
		return 0;
	if (s == NULL || (strcmp(s, "mountpaths") != 0 && strcmp(s, "targets") != 0))
		return fail(err, errlen, "\"mirror.scope\" must be \"mountpaths\" or \"targets\"");
	bk->mirror_scope = strcmp(s, "targets") == 0 ? FT_MIRROR_SCOPE_TARGETS : FT_MIRROR_SCOPE_MOUNTPATHS;
	return 0;
}

int ft_bucket_props_apply(ft_bucket_t *bk, const json_t *props, char *err, size_t errlen)
{
	static const char *const mirror_keys[] = {"copies", "scope"};
	static const char *const ec_keys[] = {"data_slices", "parity_slices", "objsize_limit"};
	const json_t *mirror = json_object_get(props, "mirror");
	const json_t *ec = json_object_get(props, "ec");
	const json_t *vwg = json_object_get(props, "checksum_validate_warm_get");
	int64_t v;

	if (mirror != NULL) {
		if (!json_is_object(mirror))
			return fail(err, errlen, "\"mirror\" must be an object {\"copies\": N, \"scope\": S}");
		if (known_keys(mirror, "mirror", mirror_keys, 2, err, errlen) != 0)
			return -1;
		v = bk->mirror_copies;
		if (get_int(mirror, "copies", 1, FT_MIRROR_COPIES_MAX, &v, err, errlen) != 0)
			return -1;
		bk->mirror_copies = (int)v;
		if (scope_apply(bk, json_object_get(mirror, "scope"), err, errlen) != 0)
			return -1;
	}
	if (ec != NULL) {
		if (!json_is_object(ec))
			return fail(
				err, errlen,
				"\"ec\" must be an object {\"data_slices\": D, \"parity_slices\": P, \"objsize_limit\": B}");
		if (known_keys(ec, "ec", ec_keys, 3, err, errlen) != 0)
			return -1;
		v = bk->ec_data;
		if (get_int(ec, "data_slices", 0, FT_EC_SLICES_MAX, &v, err, errlen) != 0)
			return -1;
		bk->ec_data = (int)v;
		v = bk->ec_parity;
		if (get_int(ec, "parity_slices", 0, FT_EC_SLICES_MAX, &v, err, errlen) != 0)
			return -1;
		bk->ec_parity = (int)v;
		if (get_int(ec, "objsize_limit", 0, INT64_MAX, &bk->ec_objsize_limit, err, errlen) != 0)
			return -1;
		if ((bk->ec_data == 0) != (bk->ec_parity == 0))
			return fail(err, errlen,
				    "\"ec\": data_slices and parity_slices are both 0 (off) or both at "
				    "least 1 (have %d and %d)",
				    bk->ec_data, bk->ec_parity);
	}
	if (vwg != NULL) {
		if (!json_is_boolean(vwg))
			return fail(err, errlen, "\"checksum_validate_warm_get\" must be true or false");
		bk->validate_warm_get = json_is_true(vwg);
	}
	if (ft_bucket_mirror_targets(bk) && bk->ec_data > 0)
		return fail(err, errlen,
			    "\"mirror.scope\": \"targets\" and \"ec\" cannot be combined (EC already keeps whole "
			    "replicas on other targets for objects below ec.objsize_limit): turn one off");
	return acl_apply(bk, json_object_get(props, "acl"), err, errlen);
}

ft_bmd_t *ft_bmd_from_json(const json_t *j, char *err, size_t errlen)
{
	ft_bmd_t *b = NULL;
	const json_t *v, *a, *o;
	const char *uuid;
	size_t i;

	if (!json_is_object(j)) {
		fail(err, errlen, "bmd: not a JSON object");
		goto fail;
	}
	b = calloc(1, sizeof(*b));
	if (b == NULL) {
		fail(err, errlen, "bmd: out of memory");
		goto fail;
	}
	b->refs = 1;
	v = json_object_get(j, "version");
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		fail(err, errlen, "bmd: \"version\" must be a non-negative integer");
		goto fail;
	}
	b->version = json_integer_value(v);
	uuid = get_string(j, "uuid", "bmd", err, errlen);
	if (uuid == NULL)
		goto fail;
	if (uuid[0] == '\0' || strlen(uuid) >= sizeof(b->uuid)) {
		fail(err, errlen, "bmd: bad \"uuid\"");
		goto fail;
	}
	memcpy(b->uuid, uuid, strlen(uuid) + 1);
	a = json_object_get(j, "buckets");
	if (!json_is_array(a)) {
		fail(err, errlen, "bmd: \"buckets\" must be an array");
		goto fail;
	}
	v = json_object_get(j, "etl");
	if (v != NULL && !json_is_null(v)) {
		if (!json_is_object(v)) {
			fail(err, errlen, "bmd: \"etl\" must be an object");
			goto fail;
		}
		if ((b->etl = json_deep_copy(v)) == NULL) {
			fail(err, errlen, "bmd: out of memory");
			goto fail;
		}
		const char *name;
		json_t *spec;
		json_object_foreach(b->etl, name, spec) {
			if (ft_etl_spec_open(name, spec, err, errlen) != 0)
				goto fail;
		}
	}
	json_array_foreach(a, i, o) {
		ft_bucket_t bk;
		char what[32];
		int rc;

		snprintf(what, sizeof(what), "buckets[%zu]", i);
		if (bucket_from_json(&bk, o, what, err, errlen) != 0)
			goto fail;
		rc = ft_bmd_add(b, &bk);
		json_decref(bk.backend); /* the BMD took its own reference */
		if (rc == 1) {
			fail(err, errlen, "bmd: duplicate bucket %s/%s", bk.provider, bk.name);
			goto fail;
		}
		if (rc != 0) {
			fail(err, errlen, "bmd: out of memory");
			goto fail;
		}
	}
	return b;
fail:
	if (b != NULL)
		bmd_free(b);
	return NULL;
}

void ft_bmd_get(ft_bmd_t *b)
{
	__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
}

void ft_bmd_put(ft_bmd_t *b)
{
	if (b == NULL)
		return;
	if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
		bmd_free(b);
}

ft_bmd_t *ft_bmd_current(void)
{
	ft_bmd_t *b;

	pthread_mutex_lock(&bmd_lock);
	b = bmd_cur;
	if (b != NULL)
		ft_bmd_get(b);
	pthread_mutex_unlock(&bmd_lock);
	return b;
}

/* Also returns 1 for b == NULL. The previous BMD is released outside the lock. */
int ft_bmd_install(ft_bmd_t *b)
{
	ft_bmd_t *old;

	if (b == NULL)
		return 1;
	pthread_mutex_lock(&bmd_lock);
	old = bmd_cur;
	if (old != NULL && b->version <= old->version) {
		pthread_mutex_unlock(&bmd_lock);
		ft_bmd_put(b);
		return 1;
	}
	bmd_cur = b;
	pthread_mutex_unlock(&bmd_lock);
	ft_bmd_put(old);
	return 0;
}
