/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for rpc/etcd.c: the JSON gateway's request bodies (base64 keys, decimal int64) and range replies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rpc/client.h"
#include "rpc/etcd.h"

static void test_range_body(void **state)
{
	(void)state;
	json_t *b = ft_etcd_range_body("/fasttier/smap");
	assert_non_null(b);
	assert_string_equal(json_string_value(json_object_get(b, "key")), "L2Zhc3R0aWVyL3NtYXA=");
	json_decref(b);
}

/* The fenced commit: mod_revision of the document and the lease of the primary key, then one put. */
static void test_txn_body(void **state)
{
	(void)state;
	ft_etcd_cmp_t cmp[2] = {
		{.key = "/p/smap", .target = FT_ETCD_CMP_MOD, .value = 42},
		{.key = "/p/primary", .target = FT_ETCD_CMP_LEASE, .value = 7587869563385563660LL},
	};
	json_t *t = ft_etcd_txn_body(cmp, 2, "/p/smap", "{}", 2, 0);
	assert_non_null(t);
	json_t *c = json_object_get(t, "compare");
	assert_int_equal(json_array_size(c), 2);
	json_t *c0 = json_array_get(c, 0), *c1 = json_array_get(c, 1);
	assert_string_equal(json_string_value(json_object_get(c0, "target")), "MOD");
	assert_string_equal(json_string_value(json_object_get(c0, "result")), "EQUAL");
	assert_string_equal(json_string_value(json_object_get(c0, "mod_revision")), "42");
	assert_string_equal(json_string_value(json_object_get(c0, "key")), "L3Avc21hcA==");
	assert_string_equal(json_string_value(json_object_get(c1, "target")), "LEASE");
	assert_string_equal(json_string_value(json_object_get(c1, "lease")), "7587869563385563660");
	json_t *put = json_object_get(json_array_get(json_object_get(t, "success"), 0), "request_put");
	assert_non_null(put);
	assert_string_equal(json_string_value(json_object_get(put, "value")), "e30=");
	assert_null(json_object_get(put, "lease")); /* 0: none */
	json_decref(t);

	/* the campaign: create_revision 0, put with a lease */
	ft_etcd_cmp_t create = {.key = "/p/primary", .target = FT_ETCD_CMP_CREATE, .value = 0};
	t = ft_etcd_txn_body(&create, 1, "/p/primary", "x", 1, 99);
	c0 = json_array_get(json_object_get(t, "compare"), 0);
	assert_string_equal(json_string_value(json_object_get(c0, "target")), "CREATE");
	assert_string_equal(json_string_value(json_object_get(c0, "create_revision")), "0");
	put = json_object_get(json_array_get(json_object_get(t, "success"), 0), "request_put");
	assert_string_equal(json_string_value(json_object_get(put, "lease")), "99");
	json_decref(t);

	/* no compares: an unconditional put (a proxy's presence key) */
	t = ft_etcd_txn_body(NULL, 0, "/p/proxies/p1", "u", 1, 5);
	assert_int_equal(json_array_size(json_object_get(t, "compare")), 0);
	json_decref(t);
}

static void test_int(void **state)
{
	(void)state;
	json_t *o = json_pack("{s:s,s:i,s:s,s:s}", "a", "123", "b", 5, "c", "12x", "d", "");
	assert_int_equal(ft_etcd_int(o, "a", -1), 123);
	assert_int_equal(ft_etcd_int(o, "b", -1), 5);
	assert_int_equal(ft_etcd_int(o, "c", -1), -1);
	assert_int_equal(ft_etcd_int(o, "d", -1), -1);
	assert_int_equal(ft_etcd_int(o, "missing", 7), 7);
	json_decref(o);
}

/* A reply as etcd 3.4's gateway sends it. */
static void test_parse_range(void **state)
{
	char err[256];
	ft_etcd_kv_t kv;
	(void)state;
	json_t *r = json_loads("{\"header\":{\"revision\":\"2\"},\"kvs\":[{\"key\":\"cA==\",\"create_revision\":\"2\","
			       "\"mod_revision\":\"3\",\"version\":\"1\",\"value\":\"eyJhIjoxfQ==\","
			       "\"lease\":\"2324035596712028679\"}],\"count\":\"1\"}",
			       0, NULL);
	assert_int_equal(ft_etcd_parse_range(r, &kv, err, sizeof(err)), 0);
	assert_string_equal(kv.value, "{\"a\":1}");
	assert_int_equal(kv.len, 7);
	assert_int_equal(kv.mod_revision, 3);
	assert_int_equal(kv.create_revision, 2);
	assert_true(kv.lease == 2324035596712028679LL);
	free(kv.value);
	json_decref(r);

	/* absent key: no kvs */
	r = json_loads("{\"header\":{\"revision\":\"4\"}}", 0, NULL);
	assert_int_equal(ft_etcd_parse_range(r, &kv, err, sizeof(err)), 1);
	json_decref(r);

	/* no header, bad base64, a NUL inside the value: refused */
	r = json_loads("{\"kvs\":[]}", 0, NULL);
	assert_int_equal(ft_etcd_parse_range(r, &kv, err, sizeof(err)), -1);
	json_decref(r);
	r = json_loads("{\"header\":{},\"kvs\":[{\"value\":\"abc\"}]}", 0, NULL);
	assert_int_equal(ft_etcd_parse_range(r, &kv, err, sizeof(err)), -1);
	json_decref(r);
	r = json_loads("{\"header\":{},\"kvs\":[{\"value\":\"YQBi\"}]}", 0, NULL);
	assert_int_equal(ft_etcd_parse_range(r, &kv, err, sizeof(err)), -1);
	assert_null(kv.value);
	json_decref(r);
}

/* Nothing listening: every call fails with a message, none claims success. */
static void test_unreachable(void **state)
{
	char err[256] = "";
	int64_t lease = 0, ttl = 0;
	ft_etcd_kv_t kv;
	(void)state;
	assert_int_equal(ft_client_global_init(), 0);
	assert_int_equal(ft_etcd_grant("http://127.0.0.1:1", 3, 500, &lease, &ttl, err, sizeof(err)), -1);
	assert_true(err[0] != '\0');
	assert_int_equal(ft_etcd_keepalive("http://127.0.0.1:1", 5, 500, &ttl, err, sizeof(err)), -1);
	assert_int_equal(ft_etcd_get("http://127.0.0.1:1/", "/k", 500, &kv, err, sizeof(err)), -1);
	ft_etcd_cmp_t cmp = {.key = "/k", .target = FT_ETCD_CMP_MOD, .value = 0};
	assert_int_equal(ft_etcd_put_if("http://127.0.0.1:1", &cmp, 1, "/k", "v", 1, 0, 500, NULL, err, sizeof(err)),
			 -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range_body),  cmocka_unit_test(test_txn_body),    cmocka_unit_test(test_int),
		cmocka_unit_test(test_parse_range), cmocka_unit_test(test_unreachable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
