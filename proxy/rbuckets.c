/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/buckets?provider=aws|gcp|azure: the buckets of a remote provider's account, listed through one target. */
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cluster/hrw.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * The proxy holds no backend credentials (they are the targets' environment, docs/backends.md),
 * so the account is listed on one target: HRW by provider name picks it, the next ones are asked
 * only when it does not answer. The target answers every name at once, with the endpoint it
 * listed (target/obj/rbuckets.c). Each name is then marked "present" from this proxy's BMD: a
 * cluster bucket of the provider whose backend bucket is that name, and whose endpoint is unset
 * (the targets' own) or the one listed. AIStore's presence filter (query "presence", its Flt*
 * values) selects: 0 or 1 every bucket the account sees (the default), 2, 3 or 4 the buckets the
 * cluster knows (the BMD alone: no backend call, and the one listing an ht provider has), 5 only
 * those the cluster does not know.
 */

#define PX_RBUCKETS_TIMEOUT_MS 60000 /* every page of an account's listing, on one target */

enum { PRESENCE_EXISTS = 0, PRESENCE_PRESENT = 2, PRESENCE_PRESENT_CLUSTER = 4, PRESENCE_OUTSIDE = 5 };

typedef struct {
	px_t *px;
	const char *provider; /* canonical, static */
	bool outside_only;    /* presence=5 */
} rbuckets_op_t;

/* The presence query: absent or "" -> 0; a number 0..5; -1 otherwise. */
static int parse_presence(const char *s)
{
	if (s == NULL || s[0] == '\0')
		return PRESENCE_EXISTS;
	if (s[0] < '0' || s[0] > '0' + PRESENCE_OUTSIDE || s[1] != '\0')
		return -1;
	return s[0] - '0';
}

/* The backend bucket a cluster bucket fronts: its backend's "bucket", else its own name. */
static const char *backend_name(const ft_bucket_t *b)
{
	const char *n = json_string_value(json_object_get(b->backend, "bucket"));

	return n != NULL && n[0] != '\0' ? n : b->name;
}

/* Whether a cluster bucket's endpoint (NULL or "": the targets' own) is the listed one, up to a trailing '/'. */
static bool same_endpoint(const char *mine, const char *listed)
{
	size_t a, b;

	if (mine == NULL || mine[0] == '\0')
		return true;
	a = strlen(mine);
	b = strlen(listed);
	while (a > 0 && mine[a - 1] == '/')
		a--;
	while (b > 0 && listed[b - 1] == '/')
		b--;
	return a == b && memcmp(mine, listed, a) == 0;
}

/* The names of the cluster buckets fronting remote bucket name of provider at endpoint (a new array). */
static json_t *fronts(const ft_bmd_t *bmd, const char *provider, const char *name, const char *endpoint)
{
	json_t *out = json_array();

	for (int i = 0; out != NULL && bmd != NULL && i < bmd->n; i++) {
		const ft_bucket_t *b = &bmd->buckets[i];
		if (strcmp(b->provider, provider) != 0 || strcmp(backend_name(b), name) != 0 ||
		    !same_endpoint(json_string_value(json_object_get(b->backend, "endpoint")), endpoint))
			continue;
		if (json_array_append_new(out, json_string(b->name)) != 0) {
			json_decref(out);
			out = NULL;
		}
	}
	return out;
}

/* Presence 2, 3, 4: the cluster's buckets of provider (px_buckets_list's entries), each "present". */
static void list_present(ft_req_t *r, const char *provider)
{
	ft_bmd_t *bmd = ft_bmd_current();
	json_t *list = json_array();

	for (int i = 0; list != NULL && bmd != NULL && i < bmd->n; i++) {
		if (strcmp(bmd->buckets[i].provider, provider) != 0)
			continue;
		json_t *e = ft_bucket_to_json(&bmd->buckets[i]);
		if (e == NULL || json_object_set_new(e, "present", json_true()) != 0 ||
		    json_array_append_new(list, e) != 0) {
			json_decref(list);
			list = NULL;
		}
	}
	ft_bmd_put(bmd);
	if (list == NULL)
		ft_resp_error(r, 500, "out of memory");
	else
		ft_resp_json(r, 200, list);
}

/*
 * Asks the target HRW picks by provider (the next ones when it does not answer) for the account's
 * buckets. 0 with *reply (caller owns); -1 after responding.
 */
static int fetch(ft_req_t *r, const rbuckets_op_t *op, const ft_smap_t *smap, json_t **reply)
{
	int n = smap->n_targets;
	int first = ft_hrw_pick(ft_hrw_name_hash(op->provider, "", "", 0), smap->target_digests, n);
	char err[256] = "";

	*reply = NULL;
	for (int k = 0; k < n; k++) {
		const ft_node_t *node = &smap->targets[(first + k) % n];
		char *url = NULL;
		long status = 0;
		if (asprintf(&url, "%s/v1/buckets?provider=%s", node->control_url, op->provider) < 0) {
			ft_resp_error(r, 500, "out of memory");
			return -1;
		}
		int rc = ft_client_json("GET", url, NULL, PX_RBUCKETS_TIMEOUT_MS, &status, reply, err, sizeof(err));
		free(url);
		if (rc != 0) {
			ft_warn("list the buckets of %s: target %s: %s", op->provider, node->id, err);
			continue; /* no answer: the next target lists */
		}
		const char *msg = json_string_value(json_object_get(*reply, "message"));
		if (status != 200 || !json_is_array(json_object_get(*reply, "buckets"))) {
			ft_resp_error(r, status >= 400 && status < 600 ? (int)status : 502, "%s",
				      msg != NULL ? msg : "bad reply from target");
			json_decref(*reply);
			*reply = NULL;
			return -1;
		}
		return 0;
	}
	ft_resp_error(r, 503, "listing the buckets of %s: no target answered (%s)", op->provider, err);
	return -1;
}

/* The answer: one entry per remote name, marked present (with the cluster buckets fronting it) or not. */
static json_t *entries(const rbuckets_op_t *op, const json_t *reply)
{
	const char *endpoint = json_string_value(json_object_get(reply, "endpoint"));
	const json_t *names = json_object_get(reply, "buckets");
	ft_bmd_t *bmd = ft_bmd_current();
	json_t *list = json_array();
	size_t i;
	json_t *v;

	json_array_foreach(names, i, v) {
		const char *name = json_string_value(v);
		json_t *front = name != NULL ? fronts(bmd, op->provider, name, endpoint != NULL ? endpoint : "") : NULL;
		json_t *e = front != NULL ? json_pack("{s:s, s:s, s:b}", "name", name, "provider", op->provider,
						      "present", json_array_size(front) > 0)
					  : NULL;
		if (list == NULL || e == NULL) {
			json_decref(front);
			json_decref(list);
			list = NULL;
			break;
		}
		if (json_array_size(front) > 0 && !op->outside_only)
			json_object_set(e, "cluster_buckets", front);
		json_decref(front);
		if (op->outside_only && json_is_true(json_object_get(e, "present")))
			json_decref(e);
		else if (json_array_append_new(list, e) != 0) {
			json_decref(list);
			list = NULL;
			break;
		}
	}
	ft_bmd_put(bmd);
	return list;
}

/* Worker thread: one target lists, the BMD marks. */
static void rbuckets_work(ft_req_t *r, void *arg)
{
	rbuckets_op_t *op = arg;
	ft_smap_t *smap = ft_smap_current();
	json_t *reply = NULL, *list;

	if (smap == NULL || smap->n_targets == 0) {
		ft_resp_error(r, 503, "listing the buckets of %s: no targets in the cluster map", op->provider);
		goto out;
	}
	if (fetch(r, op, smap, &reply) != 0)
		goto out;
	list = entries(op, reply);
	if (list == NULL)
		ft_resp_error(r, 500, "out of memory");
	else
		ft_resp_json(r, 200, list);
out:
	json_decref(reply);
	ft_smap_put(smap);
}

void px_buckets_list_remote(px_t *px, ft_req_t *r, const char *provider)
{
	int presence = parse_presence(ft_req_query(r, "presence"));
	rbuckets_op_t *op;

	if (presence < 0) {
		ft_resp_error(r, 400, "presence must be 0 to 5 (AIStore's presence filter), got \"%s\"",
			      ft_req_query(r, "presence"));
		return;
	}
	if (presence >= PRESENCE_PRESENT && presence <= PRESENCE_PRESENT_CLUSTER) {
		list_present(r, provider);
		return;
	}
	if (strcmp(provider, "ht") == 0) {
		ft_resp_error(r, 400,
			      "provider ht has no bucket listing: an HTTP origin is a URL prefix, not an account "
			      "with buckets (presence=2 lists the ht buckets the cluster knows)");
		return;
	}
	op = ft_req_alloc(r, sizeof(*op));
	op->px = px;
	op->provider = provider;
	op->outside_only = presence == PRESENCE_OUTSIDE;
	ft_req_defer(r, rbuckets_work, op);
}
