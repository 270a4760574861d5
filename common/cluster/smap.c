/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster map (Smap): node lists, HRW owner lookup, JSON codec, refcounts and the installed copy. */
#include "cluster/smap.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/codec.h"
#include "cluster/hrw.h"

/*
 * DESIGN
 * A map is mutable only while its creator holds the single reference (new, clone, from_json);
 * once installed it is shared read-only, so readers need no lock beyond taking a reference.
 * The current map pointer is swapped under a mutex, and ft_smap_current() takes its reference
 * under the same mutex, so a reader never sees a map freed under it.
 * Node ids are unique across proxies and targets. Both lists are kept sorted by id (targets must
 * be, for ft_hrw_pick to agree on every node; proxies are sorted for a stable JSON form).
 */

static pthread_mutex_t smap_lock = PTHREAD_MUTEX_INITIALIZER;
static ft_smap_t *smap_cur; /* guarded by smap_lock; holds one reference */

static void smap_free(ft_smap_t *m)
{
	free(m->target_digests);
	free(m->targets);
	free(m->proxies);
	free(m);
}

ft_smap_t *ft_smap_new(void)
{
	ft_smap_t *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	ft_random_id(m->uuid);
	m->refs = 1;
	return m;
}

static void *dup_array(const void *src, size_t n, size_t size, int *failed)
{
	void *p;

	if (n == 0)
		return NULL;
	p = malloc(n * size);
	if (p == NULL)
		*failed = 1;
	else
		memcpy(p, src, n * size);
	return p;
}

ft_smap_t *ft_smap_clone(const ft_smap_t *m)
{
	ft_smap_t *c = calloc(1, sizeof(*c));
	int failed = 0;

	if (c == NULL)
		return NULL;
	c->version = m->version;
	memcpy(c->uuid, m->uuid, sizeof(c->uuid));
	memcpy(c->primary, m->primary, sizeof(c->primary));
	c->n_proxies = m->n_proxies;
	c->n_targets = m->n_targets;
	c->proxies = dup_array(m->proxies, (size_t)m->n_proxies, sizeof(ft_node_t), &failed);
	c->targets = dup_array(m->targets, (size_t)m->n_targets, sizeof(ft_node_t), &failed);
	c->target_digests = dup_array(m->target_digests, (size_t)m->n_targets, sizeof(uint64_t), &failed);
	c->refs = 1;
	if (failed) {
		smap_free(c);
		return NULL;
	}
	return c;
}

/* Index of id in list, or -(insertion point + 1) when absent. */
static int list_search(const ft_node_t *list, int n, const char *id)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(list[mid].id, id);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -(lo + 1);
}

static void list_delete(ft_node_t *list, int *n, int i)
{
	memmove(&list[i], &list[i + 1], (size_t)(*n - i - 1) * sizeof(*list));
	(*n)--;
}

static void refresh_digests(ft_smap_t *m)
{
	for (int i = 0; i < m->n_targets; i++)
		m->target_digests[i] = m->targets[i].digest;
}

static int node_valid(const ft_node_t *n)
{
	return n->id[0] != '\0' && strnlen(n->id, FT_ID_MAX) < FT_ID_MAX &&
	       strnlen(n->public_url, FT_URL_MAX) < FT_URL_MAX && strnlen(n->control_url, FT_URL_MAX) < FT_URL_MAX &&
	       (n->type == FT_NODE_PROXY || n->type == FT_NODE_TARGET);
}

/*
 * Also -1 (map unchanged) for an invalid node: empty or unterminated id or url, unknown type.
 * The digest is always recomputed from the id. A node of the same id in the other list is removed.
 */
int ft_smap_add(ft_smap_t *m, const ft_node_t *n)
{
	ft_node_t node;
	ft_node_t **list, **other;
	int *count, *other_count;
	int i;

	if (!node_valid(n))
		return -1;
	node = *n;
	node.digest = ft_hrw_digest(node.id);
	list = n->type == FT_NODE_TARGET ? &m->targets : &m->proxies;
	count = n->type == FT_NODE_TARGET ? &m->n_targets : &m->n_proxies;
	other = n->type == FT_NODE_TARGET ? &m->proxies : &m->targets;
	other_count = n->type == FT_NODE_TARGET ? &m->n_proxies : &m->n_targets;

	i = list_search(*list, *count, node.id);
	if (i < 0) {
		/* Grow first, so that a failure leaves the map as it was. */
		ft_node_t *grown = realloc(*list, (size_t)(*count + 1) * sizeof(ft_node_t));
		if (grown == NULL)
			return -1;
		*list = grown;
		if (n->type == FT_NODE_TARGET) {
			uint64_t *d = realloc(m->target_digests, (size_t)(*count + 1) * sizeof(uint64_t));
			if (d == NULL)
				return -1;
			m->target_digests = d;
		}
		i = -i - 1;
		memmove(&grown[i + 1], &grown[i], (size_t)(*count - i) * sizeof(ft_node_t));
		(*count)++;
	}
	(*list)[i] = node;
	int j = list_search(*other, *other_count, node.id);
	if (j >= 0)
		list_delete(*other, other_count, j);
	refresh_digests(m);
	return 0;
}

int ft_smap_remove(ft_smap_t *m, const char *id)
{
	int i = list_search(m->targets, m->n_targets, id);

	if (i >= 0) {
		list_delete(m->targets, &m->n_targets, i);
		refresh_digests(m);
		return 0;
	}
	i = list_search(m->proxies, m->n_proxies, id);
	if (i >= 0) {
		list_delete(m->proxies, &m->n_proxies, i);
		return 0;
	}
	return -1;
}

const ft_node_t *ft_smap_find(const ft_smap_t *m, const char *id)
{
	int i = list_search(m->targets, m->n_targets, id);

	if (i >= 0)
		return &m->targets[i];
	i = list_search(m->proxies, m->n_proxies, id);
	return i >= 0 ? &m->proxies[i] : NULL;
}

const ft_node_t *ft_smap_owner_hash(const ft_smap_t *m, uint64_t name_hash)
{
	int best = -1;
	uint64_t best_score = 0;

	for (int i = 0; i < m->n_targets; i++) {
		uint64_t s = ft_hrw_score(name_hash, m->target_digests[i]);
		if (m->targets[i].flags == 0 && (best < 0 || s > best_score)) {
			best = i;
			best_score = s;
		}
	}
	if (best < 0 && m->n_targets > 0) /* every target flagged: placement as if none were */
		best = ft_hrw_pick(name_hash, m->target_digests, m->n_targets);
	return best < 0 ? NULL : &m->targets[best];
}

const ft_node_t *ft_smap_owner(const ft_smap_t *m, const char *provider, const char *bucket, const char *obj,
			       size_t obj_len)
{
	return ft_smap_owner_hash(m, ft_hrw_name_hash(provider, bucket, obj, obj_len));
}

static json_t *nodes_to_json(const ft_node_t *list, int n)
{
	json_t *a = json_array();

	if (a == NULL)
		return NULL;
	for (int i = 0; i < n; i++) {
		json_t *o = json_pack("{s:s, s:s, s:s}", "id", list[i].id, "public_url", list[i].public_url,
				      "control_url", list[i].control_url);
		if (o != NULL && ((list[i].flags != 0 &&
				   json_object_set_new(o, "flags", json_integer((json_int_t)list[i].flags)) != 0) ||
				  ft_node_local_to_json(&list[i], o) != 0)) {
			json_decref(o);
			o = NULL;
		}
		if (o == NULL || json_array_append_new(a, o) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* NULL on allocation failure. */
json_t *ft_smap_to_json(const ft_smap_t *m)
{
	json_t *j =
		json_pack("{s:I, s:s, s:s}", "version", (json_int_t)m->version, "uuid", m->uuid, "primary", m->primary);

	if (j == NULL)
		return NULL;
	if (json_object_set_new(j, "proxies", nodes_to_json(m->proxies, m->n_proxies)) != 0 ||
	    json_object_set_new(j, "targets", nodes_to_json(m->targets, m->n_targets)) != 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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

/* Copies the string member key of o into dst[cap]; required, no NUL inside, may be empty if allow_empty. */
static int get_string(const json_t *o, const char *key, char *dst, size_t cap, int allow_empty, const char *what,
		      char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, key);
	size_t len;

	if (v == NULL)
		return fail(err, errlen, "smap: %s: missing \"%s\"", what, key);
	if (!json_is_string(v))
		return fail(err, errlen, "smap: %s: \"%s\" must be a string", what, key);
	len = json_string_length(v);
	if (len != strlen(json_string_value(v)))
		return fail(err, errlen, "smap: %s: \"%s\" holds a NUL byte", what, key);
	if (len >= cap)
		return fail(err, errlen, "smap: %s: \"%s\" is longer than %zu bytes", what, key, cap - 1);
	if (len == 0 && !allow_empty)
		return fail(err, errlen, "smap: %s: \"%s\" is empty", what, key);
	memcpy(dst, json_string_value(v), len + 1);
	return 0;
}

int ft_node_local_to_json(const ft_node_t *n, json_t *o)
{
	if (n->host_id[0] != '\0' && json_object_set_new(o, "host_id", json_string(n->host_id)) != 0)
		return -1;
	if (n->public_unix[0] != '\0' && json_object_set_new(o, "public_unix", json_string(n->public_unix)) != 0)
		return -1;
	return 0;
}

int ft_node_local_from_json(const json_t *o, ft_node_t *n, bool strict, char *err, size_t errlen)
{
	const char *what = n->id[0] != '\0' ? n->id : "node";
	int rc = 0;

	n->host_id[0] = n->public_unix[0] = '\0';
	if (json_object_get(o, "host_id") != NULL &&
	    get_string(o, "host_id", n->host_id, sizeof(n->host_id), 1, what, err, errlen) != 0)
		rc = -1;
	else if (json_object_get(o, "public_unix") != NULL &&
		 get_string(o, "public_unix", n->public_unix, sizeof(n->public_unix), 1, what, err, errlen) != 0)
		rc = -1;
	else if (n->public_unix[0] != '\0' && n->public_unix[0] != '/')
		rc = fail(err, errlen, "smap: %s: \"public_unix\" must be an absolute path", what);
	if (rc != 0) {
		n->host_id[0] = n->public_unix[0] = '\0';
		if (!strict)
			rc = 0;
	}
	return rc;
}

static int nodes_from_json(ft_smap_t *m, const json_t *j, const char *key, ft_node_type_t type, char *err,
			   size_t errlen)
{
	const json_t *a = json_object_get(j, key);
	const json_t *o;
	size_t i;

	if (a == NULL)
		return fail(err, errlen, "smap: missing \"%s\"", key);
	if (!json_is_array(a))
		return fail(err, errlen, "smap: \"%s\" must be an array", key);
	json_array_foreach(a, i, o) {
		ft_node_t n;
		char what[48];

		memset(&n, 0, sizeof(n));
		n.type = type;
		snprintf(what, sizeof(what), "%s[%zu]", key, i);
		if (!json_is_object(o))
			return fail(err, errlen, "smap: %s must be an object", what);
		if (get_string(o, "id", n.id, sizeof(n.id), 0, what, err, errlen) != 0 ||
		    get_string(o, "public_url", n.public_url, sizeof(n.public_url), 0, what, err, errlen) != 0 ||
		    get_string(o, "control_url", n.control_url, sizeof(n.control_url), 0, what, err, errlen) != 0)
			return -1;
		const json_t *flags = json_object_get(o, "flags");
		if (flags != NULL &&
		    (!json_is_integer(flags) || json_integer_value(flags) < 0 ||
		     json_integer_value(flags) > (json_int_t)(FT_NODE_MAINTENANCE | FT_NODE_DECOMMISSION)))
			return fail(err, errlen, "smap: %s: \"flags\" must be an integer in 0..3", what);
		n.flags = flags != NULL ? (unsigned)json_integer_value(flags) : 0;
		ft_node_local_from_json(o, &n, false, NULL, 0); /* lenient: never fails */
		if (ft_smap_find(m, n.id) != NULL)
			return fail(err, errlen, "smap: duplicate node id \"%s\"", n.id);
		if (ft_smap_add(m, &n) != 0)
			return fail(err, errlen, "smap: out of memory");
	}
	return 0;
}

ft_smap_t *ft_smap_from_json(const json_t *j, char *err, size_t errlen)
{
	ft_smap_t *m = NULL;
	const json_t *v;

	if (!json_is_object(j)) {
		fail(err, errlen, "smap: not a JSON object");
		goto fail;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		fail(err, errlen, "smap: out of memory");
		goto fail;
	}
	m->refs = 1;
	v = json_object_get(j, "version");
	if (v == NULL || !json_is_integer(v) || json_integer_value(v) < 0) {
		fail(err, errlen, "smap: \"version\" must be a non-negative integer");
		goto fail;
	}
	m->version = json_integer_value(v);
	if (get_string(j, "uuid", m->uuid, sizeof(m->uuid), 0, "map", err, errlen) != 0 ||
	    get_string(j, "primary", m->primary, sizeof(m->primary), 1, "map", err, errlen) != 0 ||
	    nodes_from_json(m, j, "proxies", FT_NODE_PROXY, err, errlen) != 0 ||
	    nodes_from_json(m, j, "targets", FT_NODE_TARGET, err, errlen) != 0)
		goto fail;
	return m;
fail:
	if (m != NULL)
		smap_free(m);
	return NULL;
}

void ft_smap_get(ft_smap_t *m)
{
	__atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
}

void ft_smap_put(ft_smap_t *m)
{
	if (m == NULL)
		return;
	if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0)
		smap_free(m);
}

ft_smap_t *ft_smap_current(void)
{
	ft_smap_t *m;

	pthread_mutex_lock(&smap_lock);
	m = smap_cur;
	if (m != NULL)
		ft_smap_get(m);
	pthread_mutex_unlock(&smap_lock);
	return m;
}

/* Also returns 1 for m == NULL. The previous map is released outside the lock. */
int ft_smap_install(ft_smap_t *m)
{
	ft_smap_t *old;

	if (m == NULL)
		return 1;
	pthread_mutex_lock(&smap_lock);
	old = smap_cur;
	if (old != NULL && m->version <= old->version) {
		pthread_mutex_unlock(&smap_lock);
		ft_smap_put(m);
		return 1;
	}
	smap_cur = m;
	pthread_mutex_unlock(&smap_lock);
	ft_smap_put(old);
	return 0;
}
