/* SPDX-License-Identifier: Apache-2.0 */
/* etcd v3 client over its JSON gateway: lease grant/keepalive/revoke, range, compare-and-put txn. */
#include "rpc/etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "rpc/client.h"

/* base64 of len bytes as a new JSON string; NULL when out of memory. */
static json_t *b64(const void *p, size_t len)
{
	char *s = malloc(FT_BASE64_LEN(len) + 1);
	json_t *j;

	if (s == NULL)
		return NULL;
	ft_base64_encode(p, len, s);
	j = json_string(s);
	free(s);
	return j;
}

/* An int64 as etcd's JSON wants it: a decimal string. */
static json_t *dec(int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRId64, v);
	return json_string(s);
}

int64_t ft_etcd_int(const json_t *o, const char *name, int64_t def)
{
	const json_t *v = json_object_get(o, name);
	char *end;

	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (!json_is_string(v))
		return def;
	errno = 0;
	long long n = strtoll(json_string_value(v), &end, 10);
	if (errno != 0 || end == json_string_value(v) || *end != '\0')
		return def;
	return (int64_t)n;
}

json_t *ft_etcd_range_body(const char *key)
{
	return json_pack("{s:o}", "key", b64(key, strlen(key)));
}

static json_t *cmp_json(const ft_etcd_cmp_t *c)
{
	static const char *const target[] = {"CREATE", "MOD", "LEASE"};
	static const char *const field[] = {"create_revision", "mod_revision", "lease"};

	return json_pack("{s:o,s:s,s:s,s:o}", "key", b64(c->key, strlen(c->key)), "target", target[c->target], "result",
			 "EQUAL", field[c->target], dec(c->value));
}

json_t *ft_etcd_txn_body(const ft_etcd_cmp_t *cmp, int n_cmp, const char *key, const void *value, size_t len,
			 int64_t lease)
{
	json_t *cmps = json_array();
	json_t *put = json_pack("{s:o,s:o}", "key", b64(key, strlen(key)), "value", b64(value, len));

	if (cmps == NULL || put == NULL)
		goto fail;
	if (lease != 0 && json_object_set_new(put, "lease", dec(lease)) != 0)
		goto fail;
	for (int i = 0; i < n_cmp; i++)
		if (json_array_append_new(cmps, cmp_json(&cmp[i])) != 0)
			goto fail;
	return json_pack("{s:o,s:[{s:o}]}", "compare", cmps, "success", "request_put", put);
fail:
	json_decref(cmps);
	json_decref(put);
	return NULL;
}

int ft_etcd_parse_range(const json_t *reply, ft_etcd_kv_t *kv, char *err, size_t errlen)
{
	const json_t *kvs = json_object_get(reply, "kvs");
	const json_t *e;
	const char *v;

	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(reply) || !json_is_object(json_object_get(reply, "header"))) {
		snprintf(err, errlen, "etcd: range reply without a header");
		return -1;
	}
	if (kvs == NULL || json_array_size(kvs) == 0)
		return 1;
	e = json_array_get(kvs, 0);
	v = json_string_value(json_object_get(e, "value"));
	if (v == NULL)
		v = ""; /* an empty value is left out */
	size_t n = strlen(v);
	kv->value = malloc(n / 4 * 3 + 4);
	if (kv->value == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	long got = n % 4 == 0 ? ft_base64_decode(v, n, kv->value, n / 4 * 3 + 3) : -1;
	if (got < 0 || memchr(kv->value, '\0', (size_t)got) != NULL) {
		free(kv->value);
		kv->value = NULL;
		snprintf(err, errlen, "etcd: range reply with a malformed value");
		return -1;
	}
	kv->value[got] = '\0';
	kv->len = (size_t)got;
	kv->mod_revision = ft_etcd_int(e, "mod_revision", 0);
	kv->create_revision = ft_etcd_int(e, "create_revision", 0);
	kv->lease = ft_etcd_int(e, "lease", 0);
	return 0;
}

/* POSTs body (taken) to endpoint+path: 0 with *reply (caller owns) on a 200, -1 with err otherwise. */
static int call(const char *endpoint, const char *path, json_t *body, int timeout_ms, json_t **reply, char *err,
		size_t errlen)
{
	char url[1024];
	long status = 0;
	size_t n = strlen(endpoint);

	*reply = NULL;
	while (n > 0 && endpoint[n - 1] == '/')
		n--;
	snprintf(url, sizeof(url), "%.*s%s", (int)n, endpoint, path);
	if (body == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = ft_client_json("POST", url, body, timeout_ms, &status, reply, err, errlen);
	json_decref(body);
	if (rc != 0)
		return -1;
	if (status != 200 || !json_is_object(*reply)) {
		const char *msg = json_string_value(json_object_get(*reply, "error"));
		snprintf(err, errlen, "etcd %s: HTTP %ld%s%s", path, status, msg ? ": " : "", msg ? msg : "");
		json_decref(*reply);
		*reply = NULL;
		return -1;
	}
	return 0;
}

int ft_etcd_grant(const char *endpoint, int ttl_s, int timeout_ms, int64_t *lease, int64_t *granted, char *err,
		  size_t errlen)
{
	json_t *reply;

	if (call(endpoint, "/v3/lease/grant", json_pack("{s:i}", "TTL", ttl_s), timeout_ms, &reply, err, errlen) != 0)
		return -1;
	*lease = ft_etcd_int(reply, "ID", 0);
	*granted = ft_etcd_int(reply, "TTL", 0);
	json_decref(reply);
	if (*lease == 0) {
		snprintf(err, errlen, "etcd: lease grant without an ID");
		return -1;
	}
	return 0;
}

int ft_etcd_keepalive(const char *endpoint, int64_t lease, int timeout_ms, int64_t *ttl, char *err, size_t errlen)
{
	json_t *reply;

	if (call(endpoint, "/v3/lease/keepalive", json_pack("{s:o}", "ID", dec(lease)), timeout_ms, &reply, err,
		 errlen) != 0)
		return -1;
	const json_t *res = json_object_get(reply, "result");
	if (!json_is_object(res)) {
		snprintf(err, errlen, "etcd: keepalive reply without a result");
		json_decref(reply);
		return -1;
	}
	*ttl = ft_etcd_int(res, "TTL", 0); /* left out when the lease is gone */
	json_decref(reply);
	return 0;
}

int ft_etcd_revoke(const char *endpoint, int64_t lease, int timeout_ms, char *err, size_t errlen)
{
	json_t *reply;

	if (call(endpoint, "/v3/lease/revoke", json_pack("{s:o}", "ID", dec(lease)), timeout_ms, &reply, err, errlen) !=
	    0)
		return -1;
	json_decref(reply);
	return 0;
}

int ft_etcd_get(const char *endpoint, const char *key, int timeout_ms, ft_etcd_kv_t *kv, char *err, size_t errlen)
{
	json_t *reply;

	memset(kv, 0, sizeof(*kv));
	if (call(endpoint, "/v3/kv/range", ft_etcd_range_body(key), timeout_ms, &reply, err, errlen) != 0)
		return -1;
	int rc = ft_etcd_parse_range(reply, kv, err, errlen);
	json_decref(reply);
	return rc;
}

int ft_etcd_put_if(const char *endpoint, const ft_etcd_cmp_t *cmp, int n_cmp, const char *key, const void *value,
		   size_t len, int64_t lease, int timeout_ms, int64_t *revision, char *err, size_t errlen)
{
	json_t *reply;

	if (call(endpoint, "/v3/kv/txn", ft_etcd_txn_body(cmp, n_cmp, key, value, len, lease), timeout_ms, &reply, err,
		 errlen) != 0)
		return -1;
	bool ok = json_is_true(json_object_get(reply, "succeeded"));
	if (ok && revision != NULL)
		*revision = ft_etcd_int(json_object_get(reply, "header"), "revision", 0);
	json_decref(reply);
	return ok ? 0 : 1;
}
