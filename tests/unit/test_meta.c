/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the Smap and BMD: editing, JSON round trips, rejected input, install rules, refcounts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>

#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "cluster/smap.h"

static ft_node_t node(const char *id, ft_node_type_t type, int port)
{
	ft_node_t n;

	memset(&n, 0, sizeof(n));
	snprintf(n.id, sizeof(n.id), "%s", id);
	n.type = type;
	snprintf(n.public_url, sizeof(n.public_url), "http://127.0.0.1:%d", port);
	snprintf(n.control_url, sizeof(n.control_url), "http://127.0.0.1:%d", port + 1);
	return n;
}

static ft_smap_t *sample_smap(void)
{
	ft_smap_t *m = ft_smap_new();
	ft_node_t n;

	assert_non_null(m);
	m->version = 5;
	snprintf(m->primary, sizeof(m->primary), "p1");
	n = node("p1", FT_NODE_PROXY, 51080);
	assert_int_equal(ft_smap_add(m, &n), 0);
	const char *ids[] = {"t3", "t1", "t4", "t2"};
	for (int i = 0; i < 4; i++) {
		n = node(ids[i], FT_NODE_TARGET, 52000 + 2 * i);
		assert_int_equal(ft_smap_add(m, &n), 0);
	}
	return m;
}

static void assert_targets_sorted(const ft_smap_t *m)
{
	for (int i = 0; i < m->n_targets; i++) {
		assert_true(m->targets[i].digest == ft_hrw_digest(m->targets[i].id));
		assert_true(m->target_digests[i] == m->targets[i].digest);
		if (i > 0)
			assert_true(strcmp(m->targets[i - 1].id, m->targets[i].id) < 0);
	}
}

/* ---- Smap ---- */

/* A flagged target gets no objects, keeps its flags through the codec, and is placed again once unflagged. */
static void test_smap_flags(void **state)
{
	ft_smap_t *m = sample_smap(), *back;
	char err[256], name[32];
	int owned = 0;

	(void)state;
	m->targets[1].flags = FT_NODE_MAINTENANCE;
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "o%d", i);
		const ft_node_t *o = ft_smap_owner(m, "ais", "b", name, strlen(name));
		assert_non_null(o);
		assert_string_not_equal(o->id, "t2");
		/* Unflagged targets keep the objects they own in the full map. */
		m->targets[1].flags = 0;
		const ft_node_t *full = ft_smap_owner(m, "ais", "b", name, strlen(name));
		m->targets[1].flags = FT_NODE_MAINTENANCE;
		if (strcmp(full->id, "t2") != 0)
			assert_string_equal(full->id, o->id);
		else
			owned++;
	}
	assert_true(owned > 0);
	json_t *j = ft_smap_to_json(m);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(j, "targets"), 1), "flags")),
			 FT_NODE_MAINTENANCE);
	assert_null(json_object_get(json_array_get(json_object_get(j, "targets"), 0), "flags"));
	back = ft_smap_from_json(j, err, sizeof(err));
	assert_non_null(back);
	assert_int_equal(back->targets[1].flags, FT_NODE_MAINTENANCE);
	assert_int_equal(back->targets[0].flags, 0);
	ft_smap_put(back);
	json_object_set_new(json_array_get(json_object_get(j, "targets"), 1), "flags", json_integer(9));
	assert_null(ft_smap_from_json(j, err, sizeof(err)));
	assert_non_null(strstr(err, "flags"));
	json_decref(j);
	/* Every target flagged: placement as if none were. */
	for (int i = 0; i < m->n_targets; i++)
		m->targets[i].flags = FT_NODE_MAINTENANCE;
	assert_non_null(ft_smap_owner(m, "ais", "b", "x", 1));
	ft_smap_put(m);
}

/* A target's Unix socket and machine id go through the codec; absent when unset; a relative path is refused. */
static void test_smap_local(void **state)
{
	ft_smap_t *m = sample_smap(), *back;
	char err[256];

	(void)state;
	snprintf(m->targets[2].host_id, sizeof(m->targets[2].host_id), "c4b379e7-44dc-4952-b55a-20740b254bc3");
	snprintf(m->targets[2].public_unix, sizeof(m->targets[2].public_unix), "/run/ft/public-52004.sock");
	json_t *j = ft_smap_to_json(m);
	json_t *t0 = json_array_get(json_object_get(j, "targets"), 0),
	       *t2 = json_array_get(json_object_get(j, "targets"), 2);
	assert_null(json_object_get(t0, "host_id"));
	assert_null(json_object_get(t0, "public_unix"));
	assert_string_equal(json_string_value(json_object_get(t2, "public_unix")), "/run/ft/public-52004.sock");
	back = ft_smap_from_json(j, err, sizeof(err));
	assert_non_null(back);
	assert_string_equal(back->targets[2].host_id, m->targets[2].host_id);
	assert_string_equal(back->targets[2].public_unix, m->targets[2].public_unix);
	assert_string_equal(back->targets[0].public_unix, "");
	ft_smap_put(back);
	/* from another node's map a bad value leaves the node without a socket (reached over TCP); a join refuses it */
	json_object_set_new(t2, "public_unix", json_string("run/ft/public.sock"));
	back = ft_smap_from_json(j, err, sizeof(err));
	assert_non_null(back);
	assert_string_equal(back->targets[2].public_unix, "");
	assert_string_equal(back->targets[2].host_id, "");
	ft_smap_put(back);
	ft_node_t n = {0};
	assert_int_equal(ft_node_local_from_json(t2, &n, true, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "absolute"));
	json_object_set_new(t2, "public_unix", json_integer(1));
	assert_int_equal(ft_node_local_from_json(t2, &n, true, err, sizeof(err)), -1);
	back = ft_smap_from_json(j, err, sizeof(err));
	assert_non_null(back);
	assert_string_equal(back->targets[2].public_unix, "");
	ft_smap_put(back);
	json_decref(j);
	ft_smap_put(m);
}

static void test_smap_edit(void **state)
{
	ft_smap_t *m;
	ft_node_t n;

	(void)state;
	m = ft_smap_new();
	assert_non_null(m);
	assert_int_equal(m->version, 0);
	assert_int_equal(m->refs, 1);
	assert_int_equal(strlen(m->uuid), 32);
	assert_int_equal(strspn(m->uuid, "0123456789abcdef"), 32);
	assert_null(ft_smap_owner(m, "ais", "b", "o", 1));
	ft_smap_put(m);

	m = sample_smap();
	assert_int_equal(m->n_proxies, 1);
	assert_int_equal(m->n_targets, 4);
	assert_string_equal(m->targets[0].id, "t1");
	assert_string_equal(m->targets[3].id, "t4");
	assert_targets_sorted(m);

	/* Replace by id keeps the count and updates the fields. */
	n = node("t2", FT_NODE_TARGET, 60000);
	n.digest = 12345; /* ignored: recomputed from the id */
	assert_int_equal(ft_smap_add(m, &n), 0);
	assert_int_equal(m->n_targets, 4);
	assert_string_equal(ft_smap_find(m, "t2")->public_url, "http://127.0.0.1:60000");
	assert_targets_sorted(m);

	/* An id moving to the other list is not kept twice. */
	n = node("t1", FT_NODE_PROXY, 61000);
	assert_int_equal(ft_smap_add(m, &n), 0);
	assert_int_equal(m->n_targets, 3);
	assert_int_equal(m->n_proxies, 2);
	assert_int_equal(ft_smap_find(m, "t1")->type, FT_NODE_PROXY);
	assert_targets_sorted(m);

	/* Invalid nodes are refused and change nothing. */
	n = node("", FT_NODE_TARGET, 1);
	assert_int_equal(ft_smap_add(m, &n), -1);
	n = node("x", (ft_node_type_t)7, 1);
	assert_int_equal(ft_smap_add(m, &n), -1);
	assert_int_equal(m->n_targets, 3);

	assert_int_equal(ft_smap_remove(m, "t3"), 0);
	assert_int_equal(ft_smap_remove(m, "t3"), -1);
	assert_int_equal(ft_smap_remove(m, "p1"), 0);
	assert_null(ft_smap_find(m, "t3"));
	assert_null(ft_smap_find(m, "p1"));
	assert_non_null(ft_smap_find(m, "t4"));
	assert_int_equal(m->n_targets, 2);
	assert_targets_sorted(m);
	ft_smap_put(m);
}

static void test_smap_clone(void **state)
{
	ft_smap_t *m = sample_smap(), *c;
	ft_node_t n;

	(void)state;
	c = ft_smap_clone(m);
	assert_non_null(c);
	assert_int_equal(c->refs, 1);
	assert_string_equal(c->uuid, m->uuid);
	assert_true(c->version == m->version);
	n = node("t9", FT_NODE_TARGET, 1000);
	assert_int_equal(ft_smap_add(c, &n), 0);
	assert_int_equal(ft_smap_remove(c, "t1"), 0);
	assert_int_equal(m->n_targets, 4);
	assert_non_null(ft_smap_find(m, "t1"));
	assert_null(ft_smap_find(m, "t9"));
	assert_targets_sorted(c);
	ft_smap_put(c);
	ft_smap_put(m);
	ft_smap_put(NULL);
}

/* Encodes to text and back, as the wire does. */
static ft_smap_t *smap_via_text(const ft_smap_t *m)
{
	char err[256] = "";
	json_t *j = ft_smap_to_json(m);
	char *text;
	ft_smap_t *out;

	assert_non_null(j);
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	assert_non_null(text);
	j = json_loads(text, 0, NULL);
	free(text);
	assert_non_null(j);
	out = ft_smap_from_json(j, err, sizeof(err));
	json_decref(j);
	if (out == NULL)
		fail_msg("from_json: %s", err);
	return out;
}

static void test_smap_round_trip(void **state)
{
	ft_smap_t *m = sample_smap(), *r;

	(void)state;
	r = smap_via_text(m);
	assert_true(r->version == 5);
	assert_int_equal(r->refs, 1);
	assert_string_equal(r->uuid, m->uuid);
	assert_string_equal(r->primary, "p1");
	assert_int_equal(r->n_proxies, m->n_proxies);
	assert_int_equal(r->n_targets, m->n_targets);
	for (int i = 0; i < m->n_targets; i++) {
		assert_string_equal(r->targets[i].id, m->targets[i].id);
		assert_int_equal(r->targets[i].type, FT_NODE_TARGET);
		assert_string_equal(r->targets[i].public_url, m->targets[i].public_url);
		assert_string_equal(r->targets[i].control_url, m->targets[i].control_url);
	}
	assert_string_equal(r->proxies[0].id, "p1");
	assert_int_equal(r->proxies[0].type, FT_NODE_PROXY);
	assert_targets_sorted(r);

	/* Every node computes the same owner from the map it received. */
	for (int i = 0; i < 2000; i++) {
		char obj[32];
		int len = snprintf(obj, sizeof(obj), "dir/obj-%d", i);
		const ft_node_t *a = ft_smap_owner(m, "ais", "bkt", obj, (size_t)len);
		const ft_node_t *b = ft_smap_owner(r, "ais", "bkt", obj, (size_t)len);
		assert_non_null(a);
		assert_non_null(b);
		assert_string_equal(a->id, b->id);
	}
	ft_smap_put(r);
	ft_smap_put(m);
}

/* The JSON of api.md, plus an unknown key, decodes; targets come out sorted. */
static void test_smap_from_doc(void **state)
{
	const char *doc =
		"{\"version\": 5, \"uuid\": \"abc\", \"primary\": \"p1\", \"future\": [1],"
		" \"proxies\": [{\"id\": \"p1\", \"public_url\": \"http://127.0.0.1:51080\","
		" \"control_url\": \"http://127.0.0.1:51081\"}],"
		" \"targets\": [{\"id\": \"tb\", \"public_url\": \"http://h:2\", \"control_url\": \"http://h:3\"},"
		" {\"id\": \"ta\", \"public_url\": \"http://h:4\", \"control_url\": \"http://h:5\"}]}";
	char err[256];
	json_t *j = json_loads(doc, 0, NULL);
	ft_smap_t *m;

	(void)state;
	assert_non_null(j);
	m = ft_smap_from_json(j, err, sizeof(err));
	json_decref(j);
	assert_non_null(m);
	assert_string_equal(m->targets[0].id, "ta");
	assert_string_equal(m->targets[1].id, "tb");
	assert_string_equal(ft_smap_find(m, "tb")->control_url, "http://h:3");
	assert_targets_sorted(m);
	ft_smap_put(m);
}

static void test_smap_bad_json(void **state)
{
	static const char *const bad[] = {
		"[]",
		"{}",
		"{\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":[]}",
		"{\"version\":\"1\",\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":[]}",
		"{\"version\":-1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":[]}",
		"{\"version\":1.5,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":[]}",
		"{\"version\":1,\"primary\":\"\",\"proxies\":[],\"targets\":[]}",
		"{\"version\":1,\"uuid\":7,\"primary\":\"\",\"proxies\":[],\"targets\":[]}",
		"{\"version\":1,\"uuid\":\"\",\"primary\":\"\",\"proxies\":[],\"targets\":[]}",
		"{\"version\":1,\"uuid\":\"u\",\"proxies\":[],\"targets\":[]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":null,\"proxies\":[],\"targets\":[]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"targets\":[]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":{},\"targets\":[]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":[\"t1\"]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":"
		"[{\"public_url\":\"a\",\"control_url\":\"b\"}]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":"
		"[{\"id\":\"\",\"public_url\":\"a\",\"control_url\":\"b\"}]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":"
		"[{\"id\":1,\"public_url\":\"a\",\"control_url\":\"b\"}]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":"
		"[{\"id\":\"t\\u00001\",\"public_url\":\"a\",\"control_url\":\"b\"}]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":"
		"[{\"id\":\"t1\",\"control_url\":\"b\"}]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":"
		"[{\"id\":\"t1\",\"public_url\":\"a\",\"control_url\":false}]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":"
		"[{\"id\":\"t1\",\"public_url\":\"a\",\"control_url\":\"b\"},"
		"{\"id\":\"t1\",\"public_url\":\"c\",\"control_url\":\"d\"}]}",
		"{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":"
		"[{\"id\":\"n1\",\"public_url\":\"a\",\"control_url\":\"b\"}],\"targets\":"
		"[{\"id\":\"n1\",\"public_url\":\"c\",\"control_url\":\"d\"}]}",
	};
	const char *good = "{\"version\":1,\"uuid\":\"u\",\"primary\":\"\",\"proxies\":[],\"targets\":"
			   "[{\"id\":\"t1\",\"public_url\":\"a\",\"control_url\":\"b\"}]}";
	char err[256];
	json_t *j;
	ft_smap_t *m;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = json_loads(bad[i], JSON_ALLOW_NUL, NULL);
		assert_non_null(j);
		err[0] = '\0';
		m = ft_smap_from_json(j, err, sizeof(err));
		json_decref(j);
		if (m != NULL)
			fail_msg("accepted bad smap #%zu: %s", i, bad[i]);
		assert_true(err[0] != '\0');
	}
	/* The control case passes, so the failures above are about the one thing changed. */
	j = json_loads(good, 0, NULL);
	m = ft_smap_from_json(j, err, sizeof(err));
	json_decref(j);
	assert_non_null(m);
	ft_smap_put(m);
	assert_null(ft_smap_from_json(NULL, err, sizeof(err)));

	/* A url too long for ft_node_t. */
	char *url = malloc(FT_URL_MAX + 1);
	memset(url, 'u', FT_URL_MAX);
	url[FT_URL_MAX] = '\0';
	j = json_loads(good, 0, NULL);
	json_object_set_new(json_array_get(json_object_get(j, "targets"), 0), "public_url", json_string(url));
	assert_null(ft_smap_from_json(j, err, sizeof(err)));
	json_decref(j);
	free(url);
}

static ft_smap_t *smap_version(int64_t v)
{
	ft_smap_t *m = ft_smap_new();

	assert_non_null(m);
	m->version = v;
	return m;
}

/* The process-wide current map: starts empty, only ever moves to a newer version. */
static void test_smap_install(void **state)
{
	ft_smap_t *held, *cur;

	(void)state;
	assert_null(ft_smap_current());
	assert_int_equal(ft_smap_install(smap_version(3)), 0);
	held = ft_smap_current();
	assert_non_null(held);
	assert_true(held->version == 3);
	assert_int_equal(held->refs, 2);

	/* Equal and older versions are refused (and released: ASan checks both). */
	assert_int_equal(ft_smap_install(smap_version(3)), 1);
	assert_int_equal(ft_smap_install(smap_version(2)), 1);
	assert_int_equal(ft_smap_install(smap_version(0)), 1);
	cur = ft_smap_current();
	assert_ptr_equal(cur, held);
	ft_smap_put(cur);

	/* A newer one replaces it; the reader's reference keeps the old one alive. */
	assert_int_equal(ft_smap_install(smap_version(4)), 0);
	assert_true(held->version == 3);
	assert_int_equal(held->refs, 1);
	ft_smap_put(held);
	cur = ft_smap_current();
	assert_true(cur->version == 4);
	ft_smap_put(cur);
	assert_int_equal(ft_smap_install(smap_version(1)), 1);
	cur = ft_smap_current();
	assert_true(cur->version == 4);
	ft_smap_put(cur);
}

/* Readers racing an installer only ever see versions go up (also a TSan target). */
static void *smap_reader(void *arg)
{
	int64_t last = 0;

	(void)arg;
	for (int i = 0; i < 20000; i++) {
		ft_smap_t *m = ft_smap_current();
		if (m == NULL)
			continue;
		if (m->version < last)
			return (void *)1;
		last = m->version;
		ft_smap_put(m);
	}
	return NULL;
}

static void test_smap_install_race(void **state)
{
	pthread_t th[3];
	void *ret;
	ft_smap_t *cur = ft_smap_current();
	int64_t base = cur != NULL ? cur->version : 0;

	(void)state;
	ft_smap_put(cur);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, smap_reader, NULL), 0);
	for (int64_t v = base + 1; v <= base + 2000; v++) {
		assert_int_equal(ft_smap_install(smap_version(v)), 0);
		assert_int_equal(ft_smap_install(smap_version(v - 1)), 1);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(pthread_join(th[i], &ret), 0);
		assert_null(ret);
	}
	cur = ft_smap_current();
	assert_true(cur->version == base + 2000);
	ft_smap_put(cur);
}

/* ---- BMD ---- */

static ft_bucket_t bucket(const char *provider, const char *name, ft_cksum_type_t ck, int64_t created)
{
	ft_bucket_t b;

	memset(&b, 0, sizeof(b));
	snprintf(b.provider, sizeof(b.provider), "%s", provider);
	snprintf(b.name, sizeof(b.name), "%s", name);
	b.cksum = ck;
	b.created_ns = created;
	return b;
}

static ft_bmd_t *sample_bmd(void)
{
	ft_bmd_t *b = ft_bmd_new();
	ft_bucket_t bk;

	assert_non_null(b);
	b->version = 3;
	bk = bucket("ais", "zeta", FT_CKSUM_XXHASH, 1);
	assert_int_equal(ft_bmd_add(b, &bk), 0);
	bk = bucket("ais", "alpha", FT_CKSUM_MD5, 1763760000000000000LL);
	assert_int_equal(ft_bmd_add(b, &bk), 0);
	bk = bucket("aws", "alpha", FT_CKSUM_NONE, 3);
	assert_int_equal(ft_bmd_add(b, &bk), 0);
	return b;
}

static void test_bmd_edit(void **state)
{
	ft_bmd_t *b = sample_bmd(), *c;
	ft_bucket_t bk;

	(void)state;
	assert_int_equal(strlen(b->uuid), 32);
	assert_int_equal(b->refs, 1);
	assert_int_equal(b->n, 3);
	assert_string_equal(b->buckets[0].name, "alpha");
	assert_string_equal(b->buckets[0].provider, "ais");
	assert_string_equal(b->buckets[1].name, "zeta");
	assert_string_equal(b->buckets[2].provider, "aws");

	bk = bucket("ais", "zeta", FT_CKSUM_MD5, 9);
	assert_int_equal(ft_bmd_add(b, &bk), 1);
	assert_int_equal(ft_bmd_find(b, "ais", "zeta")->cksum, FT_CKSUM_XXHASH);
	bk = bucket("ais", ".bad", FT_CKSUM_MD5, 9);
	assert_int_equal(ft_bmd_add(b, &bk), -1);
	bk = bucket("", "ok", FT_CKSUM_MD5, 9);
	assert_int_equal(ft_bmd_add(b, &bk), -1);
	bk = bucket("ais", "ok", (ft_cksum_type_t)9, 9);
	assert_int_equal(ft_bmd_add(b, &bk), -1);
	assert_int_equal(b->n, 3);

	assert_null(ft_bmd_find(b, "gcp", "alpha"));
	assert_non_null(ft_bmd_find(b, "aws", "alpha"));

	c = ft_bmd_clone(b);
	assert_non_null(c);
	assert_int_equal(ft_bmd_remove(c, "ais", "alpha"), 0);
	assert_int_equal(ft_bmd_remove(c, "ais", "alpha"), -1);
	assert_int_equal(c->n, 2);
	assert_int_equal(b->n, 3);
	assert_non_null(ft_bmd_find(b, "ais", "alpha"));
	ft_bmd_put(c);
	ft_bmd_put(b);
	ft_bmd_put(NULL);
}

static void test_bmd_round_trip(void **state)
{
	ft_bmd_t *b = sample_bmd(), *r;
	char err[256] = "";
	json_t *j;
	char *text;

	(void)state;
	j = ft_bmd_to_json(b);
	assert_non_null(j);
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	j = json_loads(text, 0, NULL);
	free(text);
	r = ft_bmd_from_json(j, err, sizeof(err));
	json_decref(j);
	if (r == NULL)
		fail_msg("from_json: %s", err);
	assert_true(r->version == 3);
	assert_string_equal(r->uuid, b->uuid);
	assert_int_equal(r->n, b->n);
	for (int i = 0; i < b->n; i++) {
		assert_string_equal(r->buckets[i].name, b->buckets[i].name);
		assert_string_equal(r->buckets[i].provider, b->buckets[i].provider);
		assert_int_equal(r->buckets[i].cksum, b->buckets[i].cksum);
		assert_true(r->buckets[i].created_ns == b->buckets[i].created_ns);
	}

	/* One bucket's JSON, as GET /v1/buckets lists it. */
	j = ft_bucket_to_json(ft_bmd_find(b, "ais", "alpha"));
	assert_string_equal(json_string_value(json_object_get(j, "name")), "alpha");
	assert_string_equal(json_string_value(json_object_get(j, "provider")), "ais");
	assert_string_equal(json_string_value(json_object_get(j, "checksum")), "md5");
	assert_true(json_integer_value(json_object_get(j, "created")) == 1763760000000000000LL);
	json_decref(j);
	ft_bmd_put(r);
	ft_bmd_put(b);
}

/*
 * Buckets of the later checksum types (xxh3, crc32c, sha256, sha512) travel through the BMD JSON by name; the next
 * number does not.
 */
static void test_bmd_later_cksum_types(void **state)
{
	static const struct {
		const char *name;
		ft_cksum_type_t type;
	} later[] = {{"bx", FT_CKSUM_XXH3}, {"bc", FT_CKSUM_CRC32C}, {"bs", FT_CKSUM_SHA256}, {"b5", FT_CKSUM_SHA512}};
	ft_bmd_t *b = ft_bmd_new(), *r;
	ft_bucket_t bk;
	char err[256];

	(void)state;
	assert_non_null(b);
	for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++) {
		bk = bucket("ais", later[i].name, later[i].type, 1);
		assert_int_equal(ft_bmd_add(b, &bk), 0);
	}
	bk = bucket("ais", "next", (ft_cksum_type_t)(FT_CKSUM_LAST + 1), 1);
	assert_int_equal(ft_bmd_add(b, &bk), -1);
	json_t *j = ft_bmd_to_json(b);
	json_t *bs = json_object_get(j, "buckets");
	assert_int_equal(json_array_size(bs), sizeof(later) / sizeof(later[0]));
	r = ft_bmd_from_json(j, err, sizeof(err));
	assert_non_null(r);
	for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++) {
		const ft_bucket_t *got = ft_bmd_find(r, "ais", later[i].name);
		assert_non_null(got);
		assert_int_equal(got->cksum, later[i].type);
	}
	ft_bmd_put(r);
	/* An unknown name in a BMD (a later build's type, say) refuses the document. */
	json_object_set_new(json_array_get(bs, 0), "checksum", json_string("sha384"));
	r = ft_bmd_from_json(j, err, sizeof(err));
	assert_null(r);
	assert_non_null(strstr(err, "sha384"));
	json_decref(j);
	ft_bmd_put(b);
}

static void test_bmd_bad_json(void **state)
{
	static const char *const bad[] = {
		"[]",
		"{\"uuid\":\"u\",\"buckets\":[]}",
		"{\"version\":\"3\",\"uuid\":\"u\",\"buckets\":[]}",
		"{\"version\":-3,\"uuid\":\"u\",\"buckets\":[]}",
		"{\"version\":3,\"buckets\":[]}",
		"{\"version\":3,\"uuid\":[],\"buckets\":[]}",
		"{\"version\":3,\"uuid\":\"u\"}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":{}}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[1]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"provider\":\"ais\",\"checksum\":\"md5\",\"created\":1}]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"name\":\"../x\",\"provider\":\"ais\",\"checksum\":\"md5\","
		"\"created\":1}]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"name\":\"b\",\"checksum\":\"md5\",\"created\":1}]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"name\":\"b\",\"provider\":\"\",\"checksum\":\"md5\","
		"\"created\":1}]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"name\":\"b\",\"provider\":\"ais\",\"checksum\":\"sha1\","
		"\"created\":1}]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"name\":\"b\",\"provider\":\"ais\",\"created\":1}]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"name\":\"b\",\"provider\":\"ais\",\"checksum\":\"md5\","
		"\"created\":\"1\"}]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"name\":\"b\",\"provider\":\"ais\",\"checksum\":\"md5\"}]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"name\":\"b\",\"provider\":\"ais\",\"checksum\":\"md5\","
		"\"created\":1},{\"name\":\"b\",\"provider\":\"ais\",\"checksum\":\"xxhash\",\"created\":2}]}",
		"{\"version\":3,\"uuid\":\"u\",\"buckets\":[],\"etl\":[]}",
	};
	const char *good = "{\"version\":3,\"uuid\":\"u\",\"buckets\":[{\"name\":\"b\",\"provider\":\"ais\","
			   "\"checksum\":\"md5\",\"created\":1},{\"name\":\"b\",\"provider\":\"aws\","
			   "\"checksum\":\"xxhash\",\"created\":2}]}";
	char err[256];
	json_t *j;
	ft_bmd_t *b;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = json_loads(bad[i], 0, NULL);
		assert_non_null(j);
		err[0] = '\0';
		b = ft_bmd_from_json(j, err, sizeof(err));
		json_decref(j);
		if (b != NULL)
			fail_msg("accepted bad bmd #%zu: %s", i, bad[i]);
		assert_true(err[0] != '\0');
	}
	j = json_loads(good, 0, NULL);
	b = ft_bmd_from_json(j, err, sizeof(err));
	json_decref(j);
	assert_non_null(b);
	assert_int_equal(b->n, 2);
	ft_bmd_put(b);
}

/* The transformer registry ("etl"): kept by clone and the JSON round trip, absent when empty. */
static void test_bmd_etl(void **state)
{
	ft_bmd_t *b = sample_bmd(), *c, *r;
	char err[256];
	json_t *j;

	(void)state;
	j = ft_bmd_to_json(b);
	assert_null(json_object_get(j, "etl"));
	json_decref(j);
	b->etl = json_pack("{s:{s:s, s:[s]}}", "upper", "name", "upper", "command", "cat");
	c = ft_bmd_clone(b);
	assert_non_null(c);
	assert_true(c->etl != b->etl && json_equal(c->etl, b->etl));
	j = ft_bmd_to_json_public(c);
	r = ft_bmd_from_json(j, err, sizeof(err));
	json_decref(j);
	assert_non_null(r);
	assert_true(json_equal(r->etl, b->etl));
	ft_bmd_put(r);
	ft_bmd_put(c);
	ft_bmd_put(b);
}

/* What answers show of a remote bucket's backend: no secret keys, the endpoint without user:password@ or query values. */
static void test_bucket_public_endpoint(void **state)
{
	ft_bucket_t bk = bucket("ht", "origin", FT_CKSUM_XXHASH, 1);
	json_t *j, *be;

	(void)state;
	bk.backend = json_pack("{s:s, s:s, s:s}", "provider", "ht", "endpoint", "http://u:pw@h:8/p?sig=S&provider=ht",
			       "secret_key", "K");
	j = ft_bucket_to_json(&bk);
	be = json_object_get(j, "backend");
	assert_string_equal(json_string_value(json_object_get(be, "endpoint")), "http://h:8/p?sig=***&provider=ht");
	assert_null(json_object_get(be, "secret_key"));
	assert_string_equal(json_string_value(json_object_get(bk.backend, "endpoint")),
			    "http://u:pw@h:8/p?sig=S&provider=ht");
	json_decref(j);
	json_decref(bk.backend);
}

/* What answers show of a transformer: its URLs without user:password@ or query values; the stored spec as it was. */
static void test_etl_spec_public(void **state)
{
	json_t *spec = json_pack("{s:s, s:s, s:[s, s, s]}", "name", "t", "url",
				 "https://u:pw@h:1/x?token=T&provider=aws", "command", "fetch",
				 "--src=https://u:pw@h/o?sig=S", "plain"),
	       *copy = json_deep_copy(spec), *pub = ft_etl_spec_public(spec);
	ft_bmd_t *b = sample_bmd();
	json_t *j;

	(void)state;
	assert_non_null(pub);
	assert_string_equal(json_string_value(json_object_get(pub, "url")), "https://h:1/x?token=***&provider=aws");
	assert_string_equal(json_string_value(json_array_get(json_object_get(pub, "command"), 1)),
			    "--src=https://h/o?sig=***");
	assert_string_equal(json_string_value(json_array_get(json_object_get(pub, "command"), 2)), "plain");
	assert_string_equal(json_string_value(json_object_get(pub, "name")), "t");
	assert_true(json_equal(spec, copy));
	b->etl = json_pack("{s:O}", "t", spec);
	j = ft_bmd_to_json_public(b);
	assert_true(json_equal(json_object_get(json_object_get(j, "etl"), "t"), pub));
	json_decref(j);
	j = ft_bmd_to_json(b); /* the control plane's and bmd.json's form: whole */
	assert_true(json_equal(json_object_get(json_object_get(j, "etl"), "t"), spec));
	json_decref(j);
	ft_bmd_put(b);
	json_decref(pub);
	json_decref(copy);
	json_decref(spec);
}

/* Data protection properties: JSON round trip, public form, partial updates, rejected values. */
static void test_bmd_props(void **state)
{
	static const char *const bad[] = {
		"{\"mirror\":2}",
		"{\"mirror\":{\"copies\":0}}",
		"{\"mirror\":{\"copies\":17}}",
		"{\"mirror\":{\"copies\":\"2\"}}",
		"{\"mirror\":{\"copies\":2,\"enabled\":true}}",
		"{\"ec\":{\"data_slices\":2}}",
		"{\"ec\":{\"parity_slices\":1}}",
		"{\"ec\":{\"data_slices\":33,\"parity_slices\":1}}",
		"{\"ec\":{\"data_slices\":2,\"parity_slices\":-1}}",
		"{\"ec\":{\"data_slices\":2,\"parity_slices\":1,\"objsize_limit\":-5}}",
		"{\"ec\":{\"data_slices\":2.5,\"parity_slices\":1}}",
		"{\"ec\":[2,1]}",
		"{\"checksum_validate_warm_get\":1}",
		"{\"mirror\":{\"copies\":2,\"scope\":\"disks\"}}",
		"{\"mirror\":{\"copies\":2,\"scope\":1}}",
		"{\"mirror\":{\"copies\":2,\"scope\":\"targets\"},\"ec\":{\"data_slices\":2,\"parity_slices\":1}}",
	};
	ft_bmd_t *b = ft_bmd_new(), *r;
	ft_bucket_t bk = bucket("ais", "prot", FT_CKSUM_XXHASH, 5), *got;
	char err[256] = "";
	json_t *j;

	(void)state;
	j = json_loads("{\"mirror\":{\"copies\":3},\"ec\":{\"data_slices\":4,\"parity_slices\":2,"
		       "\"objsize_limit\":262144},\"checksum_validate_warm_get\":true}",
		       0, NULL);
	if (ft_bucket_props_apply(&bk, j, err, sizeof(err)) != 0)
		fail_msg("apply: %s", err);
	json_decref(j);
	assert_int_equal(bk.mirror_copies, 3);
	assert_int_equal(bk.ec_data, 4);
	assert_int_equal(bk.ec_parity, 2);
	assert_true(bk.ec_objsize_limit == 262144);
	assert_int_equal(bk.validate_warm_get, 1);

	/* Partial: only what is given changes. */
	j = json_loads("{\"ec\":{\"objsize_limit\":0},\"mirror\":{}}", 0, NULL);
	assert_int_equal(ft_bucket_props_apply(&bk, j, err, sizeof(err)), 0);
	json_decref(j);
	assert_int_equal(bk.mirror_copies, 3);
	assert_int_equal(bk.ec_data, 4);
	assert_true(bk.ec_objsize_limit == 0);
	j = json_loads("{\"ec\":{\"data_slices\":0,\"parity_slices\":0}}", 0, NULL);
	assert_int_equal(ft_bucket_props_apply(&bk, j, err, sizeof(err)), 0);
	json_decref(j);
	assert_int_equal(bk.ec_data, 0);
	assert_int_equal(bk.ec_parity, 0);
	bk.ec_data = 2;
	bk.ec_parity = 1;

	/* Through a whole BMD and back. */
	assert_int_equal(ft_bmd_add(b, &bk), 0);
	bk = bucket("ais", "plain", FT_CKSUM_MD5, 6);
	assert_int_equal(ft_bmd_add(b, &bk), 0);
	j = ft_bmd_to_json(b);
	r = ft_bmd_from_json(j, err, sizeof(err));
	json_decref(j);
	if (r == NULL)
		fail_msg("from_json: %s", err);
	got = (ft_bucket_t *)ft_bmd_find(r, "ais", "prot");
	assert_int_equal(got->mirror_copies, 3);
	assert_int_equal(got->ec_data, 2);
	assert_int_equal(got->ec_parity, 1);
	assert_int_equal(got->validate_warm_get, 1);
	got = (ft_bucket_t *)ft_bmd_find(r, "ais", "plain");
	assert_int_equal(got->mirror_copies, 1); /* written as 1 copy: the same as none */
	assert_int_equal(got->ec_data, 0);
	assert_int_equal(got->validate_warm_get, 0);

	/* The public form shows every property. */
	j = ft_bucket_to_json(ft_bmd_find(b, "ais", "prot"));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "mirror"), "copies")), 3);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "ec"), "parity_slices")), 1);
	assert_true(json_is_true(json_object_get(j, "checksum_validate_warm_get")));
	json_decref(j);
	ft_bmd_put(r);

	/* An out-of-bounds bucket is refused by ft_bmd_add, bad JSON by apply and from_json. */
	bk = bucket("ais", "wrong", FT_CKSUM_MD5, 7);
	bk.ec_data = 3;
	assert_int_equal(ft_bmd_add(b, &bk), -1);
	bk.ec_data = 0;
	bk.mirror_copies = 17;
	assert_int_equal(ft_bmd_add(b, &bk), -1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char doc[512];

		bk = bucket("ais", "x", FT_CKSUM_XXHASH, 1);
		j = json_loads(bad[i], 0, NULL);
		assert_non_null(j);
		err[0] = '\0';
		if (ft_bucket_props_apply(&bk, j, err, sizeof(err)) == 0)
			fail_msg("accepted bad props #%zu: %s", i, bad[i]);
		assert_true(err[0] != '\0');
		json_decref(j);
		snprintf(doc, sizeof(doc),
			 "{\"version\":1,\"uuid\":\"u\",\"buckets\":[{\"name\":\"b\",\"provider\":\"ais\","
			 "\"checksum\":\"md5\",\"created\":1,%.*s}]}",
			 (int)strlen(bad[i]) - 2, bad[i] + 1);
		j = json_loads(doc, 0, NULL);
		assert_non_null(j);
		r = ft_bmd_from_json(j, err, sizeof(err));
		json_decref(j);
		if (r != NULL)
			fail_msg("bmd accepted bad props #%zu: %s", i, bad[i]);
	}
	ft_bmd_put(b);
}

/* mirror.scope: "targets" applied, written only when set, read back; EC on top of it refused. */
static void test_bmd_mirror_scope(void **state)
{
	ft_bmd_t *b = ft_bmd_new(), *r;
	ft_bucket_t bk = bucket("ais", "mt", FT_CKSUM_MD5, 1), plain = bucket("ais", "mp", FT_CKSUM_MD5, 2);
	char err[256] = "";
	json_t *props, *j;

	(void)state;
	props = json_loads("{\"mirror\":{\"copies\":3,\"scope\":\"targets\"}}", 0, NULL);
	assert_int_equal(ft_bucket_props_apply(&bk, props, err, sizeof(err)), 0);
	json_decref(props);
	assert_int_equal(bk.mirror_scope, FT_MIRROR_SCOPE_TARGETS);
	assert_true(ft_bucket_mirror_targets(&bk));
	j = ft_bucket_to_json(&bk);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "mirror"), "scope")), "targets");
	json_decref(j);
	j = ft_bucket_to_json(&plain);
	assert_null(json_object_get(json_object_get(j, "mirror"), "scope")); /* the default is not written */
	json_decref(j);
	assert_int_equal(ft_bmd_add(b, &bk), 0);
	j = ft_bmd_to_json(b);
	r = ft_bmd_from_json(j, err, sizeof(err));
	json_decref(j);
	if (r == NULL)
		fail_msg("from_json: %s", err);
	assert_int_equal(ft_bmd_find(r, "ais", "mt")->mirror_scope, FT_MIRROR_SCOPE_TARGETS);
	ft_bmd_put(r);

	/* EC on a bucket with copies on targets, in a later change: refused, named. */
	props = json_loads("{\"ec\":{\"data_slices\":2,\"parity_slices\":1}}", 0, NULL);
	assert_int_equal(ft_bucket_props_apply(&bk, props, err, sizeof(err)), -1);
	json_decref(props);
	assert_non_null(strstr(err, "cannot be combined"));
	/* One copy with scope "targets" is no mirroring at all: EC is fine then. */
	bk = bucket("ais", "one", FT_CKSUM_MD5, 3);
	props = json_loads("{\"mirror\":{\"copies\":1,\"scope\":\"targets\"},\"ec\":{\"data_slices\":2,"
			   "\"parity_slices\":1}}",
			   0, NULL);
	assert_int_equal(ft_bucket_props_apply(&bk, props, err, sizeof(err)), 0);
	json_decref(props);
	assert_false(ft_bucket_mirror_targets(&bk));
	/* Back to the mountpaths. */
	props = json_loads("{\"mirror\":{\"scope\":\"mountpaths\"}}", 0, NULL);
	assert_int_equal(ft_bucket_props_apply(&bk, props, err, sizeof(err)), 0);
	json_decref(props);
	assert_int_equal(bk.mirror_scope, FT_MIRROR_SCOPE_MOUNTPATHS);
	ft_bmd_put(b);
}

/* The canned ACL: "acl" applied, written only when public-read, read back; other values refused. */
static void test_bmd_acl(void **state)
{
	ft_bmd_t *b = ft_bmd_new(), *r;
	ft_bucket_t bk = bucket("ais", "pub", FT_CKSUM_MD5, 1);
	char err[200] = "";
	json_t *props, *j;

	(void)state;
	props = json_loads("{\"acl\":\"public-read\"}", 0, NULL);
	assert_int_equal(ft_bucket_props_apply(&bk, props, err, sizeof(err)), 0);
	json_decref(props);
	assert_int_equal(bk.public_read, 1);
	j = ft_bucket_to_json(&bk);
	assert_string_equal(json_string_value(json_object_get(j, "acl")), "public-read");
	json_decref(j);
	assert_int_equal(ft_bmd_add(b, &bk), 0);
	bk = bucket("ais", "priv", FT_CKSUM_MD5, 1);
	assert_int_equal(ft_bmd_add(b, &bk), 0);
	j = ft_bmd_to_json(b);
	r = ft_bmd_from_json(j, err, sizeof(err));
	json_decref(j);
	assert_non_null(r);
	assert_int_equal(ft_bmd_find(r, "ais", "pub")->public_read, 1);
	assert_int_equal(ft_bmd_find(r, "ais", "priv")->public_read, 0);
	j = ft_bucket_to_json(ft_bmd_find(r, "ais", "priv"));
	assert_null(json_object_get(j, "acl")); /* private is the absence */
	json_decref(j);
	static const char *const bad[] = {"{\"acl\":\"public-read-write\"}", "{\"acl\":1}", "{\"acl\":\"\"}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		props = json_loads(bad[i], 0, NULL);
		assert_int_equal(ft_bucket_props_apply(&bk, props, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "public-read"));
		json_decref(props);
	}
	props = json_loads("{\"acl\":\"private\"}", 0, NULL);
	bk.public_read = 1;
	assert_int_equal(ft_bucket_props_apply(&bk, props, err, sizeof(err)), 0);
	assert_int_equal(bk.public_read, 0);
	json_decref(props);
	ft_bmd_put(r);
	ft_bmd_put(b);
}

static ft_bmd_t *bmd_version(int64_t v)
{
	ft_bmd_t *b = ft_bmd_new();

	assert_non_null(b);
	b->version = v;
	return b;
}

static void test_bmd_install(void **state)
{
	ft_bmd_t *held, *cur;

	(void)state;
	assert_null(ft_bmd_current());
	assert_int_equal(ft_bmd_install(bmd_version(7)), 0);
	held = ft_bmd_current();
	assert_true(held->version == 7);
	assert_int_equal(ft_bmd_install(bmd_version(7)), 1);
	assert_int_equal(ft_bmd_install(bmd_version(6)), 1);
	assert_int_equal(ft_bmd_install(bmd_version(8)), 0);
	assert_true(held->version == 7); /* still valid: we hold a reference */
	ft_bmd_put(held);
	assert_int_equal(ft_bmd_install(bmd_version(2)), 1);
	cur = ft_bmd_current();
	assert_true(cur->version == 8);
	ft_bmd_put(cur);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smap_edit),
		cmocka_unit_test(test_smap_flags),
		cmocka_unit_test(test_smap_local),
		cmocka_unit_test(test_smap_clone),
		cmocka_unit_test(test_smap_round_trip),
		cmocka_unit_test(test_smap_from_doc),
		cmocka_unit_test(test_smap_bad_json),
		cmocka_unit_test(test_smap_install),
		cmocka_unit_test(test_smap_install_race),
		cmocka_unit_test(test_bmd_edit),
		cmocka_unit_test(test_bmd_round_trip),
		cmocka_unit_test(test_bmd_bad_json),
		cmocka_unit_test(test_bmd_etl),
		cmocka_unit_test(test_etl_spec_public),
		cmocka_unit_test(test_bucket_public_endpoint),
		cmocka_unit_test(test_bmd_later_cksum_types),
		cmocka_unit_test(test_bmd_props),
		cmocka_unit_test(test_bmd_mirror_scope),
		cmocka_unit_test(test_bmd_install),
		cmocka_unit_test(test_bmd_acl),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
