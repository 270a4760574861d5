/* SPDX-License-Identifier: Apache-2.0 */
/* etcd v3 client over its JSON gateway (/v3/kv/range, /v3/kv/txn, /v3/lease/grant, /v3/lease/keepalive). */
#ifndef FT_ETCD_H
#define FT_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/*
 * DESIGN
 * etcd's gRPC gateway speaks JSON: keys and values are base64, 64-bit integers are decimal strings.
 * Every call is one blocking HTTP exchange (rpc/client.h, the calling thread's keep-alive handle)
 * with a timeout; the functions that build the request bodies and read the replies are pure and
 * exported for the unit test. A txn here is what the proxies need: some compares, then one put when
 * all of them hold (nothing on failure).
 */

typedef enum {
	FT_ETCD_CMP_CREATE = 0, /* the key's create_revision (0: the key does not exist) */
	FT_ETCD_CMP_MOD,        /* the key's mod_revision (0: absent) */
	FT_ETCD_CMP_LEASE,      /* the lease the key is attached to */
} ft_etcd_cmp_target_t;

typedef struct {
	const char *key;
	ft_etcd_cmp_target_t target;
	int64_t value; /* must be EQUAL to this */
} ft_etcd_cmp_t;

typedef struct {
	char *value; /* NUL-terminated (a value holding a NUL is refused), malloc'd */
	size_t len;
	int64_t mod_revision, create_revision, lease;
} ft_etcd_kv_t;

/* ---- pure: request bodies and replies (unit-tested) ---- */
/* {"key": b64} (new reference, NULL when out of memory). */
json_t *ft_etcd_range_body(const char *key);
/* The txn body: compares, then a put of key=value (len bytes) with lease (0: none); NULL when out of memory. */
json_t *ft_etcd_txn_body(const ft_etcd_cmp_t *cmp, int n_cmp, const char *key, const void *value, size_t len,
			 int64_t lease);
/* A decimal-string (or integer) member of o; def when missing or malformed. */
int64_t ft_etcd_int(const json_t *o, const char *name, int64_t def);
/*
 * Reads a range reply: 0 with kv filled (caller frees kv->value), 1 when the key is absent, -1 when
 * the reply is malformed (err filled).
 */
int ft_etcd_parse_range(const json_t *reply, ft_etcd_kv_t *kv, char *err, size_t errlen);

/* ---- calls (endpoint: "http://host:port") ---- */
/* A new lease of ttl_s seconds: 0 with *lease and *granted (the TTL etcd gave), -1 with err. */
int ft_etcd_grant(const char *endpoint, int ttl_s, int timeout_ms, int64_t *lease, int64_t *granted, char *err,
		  size_t errlen);
/* Renews lease: 0 with *ttl (0 = the lease has expired), -1 with err (etcd not reached or not answering 200). */
int ft_etcd_keepalive(const char *endpoint, int64_t lease, int timeout_ms, int64_t *ttl, char *err, size_t errlen);
/* Drops lease (its keys go with it); best effort at shutdown. 0 or -1 with err. */
int ft_etcd_revoke(const char *endpoint, int64_t lease, int timeout_ms, char *err, size_t errlen);
/* Reads key: 0 with kv (caller frees kv->value), 1 absent, -1 with err. */
int ft_etcd_get(const char *endpoint, const char *key, int timeout_ms, ft_etcd_kv_t *kv, char *err, size_t errlen);
/*
 * Puts key=value (lease 0: none) when every compare holds: 0 with *revision (the key's new
 * mod_revision; may be NULL), 1 when a compare failed (nothing written), -1 with err (not reached,
 * or the outcome unknown).
 */
int ft_etcd_put_if(const char *endpoint, const ft_etcd_cmp_t *cmp, int n_cmp, const char *key, const void *value,
		   size_t len, int64_t lease, int timeout_ms, int64_t *revision, char *err, size_t errlen);

#endif
