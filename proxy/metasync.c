/* SPDX-License-Identifier: Apache-2.0 */
/* Metasync: pushing the cluster map and bucket metadata to every node's control port, in parallel. */
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "rpc/client.h"

typedef struct {
	const ft_node_t *node;
	json_t *body; /* owned: one copy per node, so no JSON value is shared between threads */
	bool ok;
} push_t;

static void push_one(void *arg, int i)
{
	push_t *p = &((push_t *)arg)[i];
	char url[FT_URL_MAX + 32];
	char err[256] = "";
	long status = 0;
	json_t *reply = NULL;

	snprintf(url, sizeof(url), "%s/v1/metasync", p->node->control_url);
	if (ft_client_json("POST", url, p->body, PX_PUSH_TIMEOUT_MS, &status, &reply, err, sizeof(err)) != 0) {
		ft_warn("metasync to %s (%s) failed: %s", p->node->id, url, err);
		return;
	}
	if (status != 200) {
		const char *msg = json_string_value(json_object_get(reply, "message"));
		ft_warn("metasync to %s (%s): status %ld%s%s", p->node->id, url, status, msg ? ": " : "",
			msg ? msg : "");
	} else {
		p->ok = true;
	}
	json_decref(reply);
}

/* The body for one node; NULL on allocation failure. */
static json_t *push_body(const ft_smap_t *smap, const ft_bmd_t *bmd, bool with_smap, bool with_bmd)
{
	json_t *b = json_object();

	if (b == NULL)
		return NULL;
	if (with_smap && json_object_set_new(b, "smap", ft_smap_to_json(smap)) != 0)
		goto fail;
	if (with_bmd && bmd != NULL && json_object_set_new(b, "bmd", ft_bmd_to_json(bmd)) != 0)
		goto fail;
	return b;
fail:
	json_decref(b);
	return NULL;
}

int px_metasync_node(const ft_node_t *node, const ft_smap_t *smap, const ft_bmd_t *bmd)
{
	push_t p = {.node = node, .body = push_body(smap, bmd, true, true), .ok = false};

	if (p.body == NULL)
		return -1;
	push_one(&p, 0);
	json_decref(p.body);
	return p.ok ? 0 : -1;
}

int px_metasync(px_t *px, const ft_smap_t *smap, const ft_bmd_t *bmd, bool smap_all, bool bmd_all, const char *extra_id)
{
	int total = smap->n_proxies + smap->n_targets;
	push_t *pushes = calloc((size_t)(total > 0 ? total : 1), sizeof(*pushes));
	int n = 0, failed = 0;

	if (pushes == NULL) {
		ft_error("metasync: out of memory");
		return total;
	}
	for (int i = 0; i < total; i++) {
		const ft_node_t *node = i < smap->n_proxies ? &smap->proxies[i] : &smap->targets[i - smap->n_proxies];
		bool extra = extra_id != NULL && strcmp(node->id, extra_id) == 0;
		if (strcmp(node->id, px->id) == 0)
			continue;
		if (!extra && !smap_all && !bmd_all)
			continue;
		pushes[n].node = node;
		pushes[n].body = push_body(smap, bmd, smap_all || extra, bmd_all || extra);
		if (pushes[n].body == NULL) {
			ft_error("metasync to %s: out of memory", node->id);
			failed++;
			continue;
		}
		n++;
	}
	ft_fanout_run(px->fanout, push_one, pushes, n);
	for (int i = 0; i < n; i++) {
		if (!pushes[i].ok)
			failed++;
		json_decref(pushes[i].body);
	}
	free(pushes);
	return failed;
}
