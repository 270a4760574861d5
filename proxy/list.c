/* SPDX-License-Identifier: Apache-2.0 */
/* List objects at the proxy: fan-out of a page request to every target and k-way merge; remote buckets via one target. */
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/log.h"
#include "cluster/hrw.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * Each target returns its own names > token with the prefix, sorted, at most pagesize. The merged
 * page is the pagesize smallest distinct names of the union: exact, because a target that returned
 * fewer than pagesize names has nothing more, and one that returned a full page ends at a name no
 * smaller than the last merged name (it alone holds pagesize names up to its last one). The
 * continuation token is the last merged name whenever some target may hold more: it returned a
 * full page, or some of its names were not merged.
 * Cached objects of a remote bucket (cached=true) are listed the same way, with one more rule for
 * exactness: a name counts only from the target that owns it (HRW in the current map), as a GET
 * would find it. Names dropped by that rule break the argument above, so the merge never goes past
 * the smallest last name of a full page (the frontier); a page may then be short, and when nothing
 * was merged the token is the frontier itself (everything up to it has been seen).
 *
 * A remote bucket's own listing (listremote below) pages through its backend on one target (HRW
 * by bucket name, the next ones when it does not answer), whose page token passes through. Each
 * entry is then marked "cached" by asking the owner of each name, in parallel, which of its names
 * it holds (one call per owner per page).
 */

#define PX_PAGESIZE_DEFAULT 1000
#define PX_PAGESIZE_MAX 10000

typedef struct {
	px_t *px;
	const char *provider; /* static string: "ais" or a canonical remote provider name */
	char bucket[FT_BUCKET_NAME_MAX + 1];
	const char *prefix; /* ft_req_alloc memory */
	const char *token;
	const char *delimiter;   /* a remote bucket's backend page rolls names up at it (NULL: none) */
	const char *start_after; /* a remote bucket's first backend page: names after it, where the backend can */
	int pagesize;
	bool owner_only;          /* keep a name only from the target owning it (cached objects of remote buckets) */
	bool archive;             /* archive=true: members of shards listed too (docs/shards.md) */
	const ft_smap_t *smap;    /* the map of the fan-out (list_page sets it) */
	px_list_encode_fn encode; /* the answer's shape: NULL for FastTier's JSON */
	void *encode_arg;
} list_op_t;

/* Sends one page (entries borrowed) in the shape the request asked for. */
static void respond_page(ft_req_t *r, const list_op_t *op, json_t *entries, const char *token)
{
	json_t *body;

	if (op->encode != NULL) {
		op->encode(r, entries, token, op->encode_arg);
		return;
	}
	body = json_pack("{s:O,s:s}", "entries", entries, "continuation_token", token);
	if (body == NULL)
		ft_resp_error(r, 500, "out of memory");
	else
		ft_resp_json(r, 200, body);
}

/* One target's page; filled by fetch_page on a fan-out thread. */
typedef struct {
	const ft_node_t *node;
	char *url; /* owned */
	int rc;    /* ft_client_json result */
	long status;
	json_t *reply; /* owned */
	char err[256];
	const json_t *entries; /* borrowed from reply */
	size_t n, pos;         /* entries and the next one to merge */
} page_t;

static void fetch_page(void *arg, int i)
{
	page_t *p = &((page_t *)arg)[i];

	p->rc = ft_client_json("GET", p->url, NULL, PX_LIST_TIMEOUT_MS, &p->status, &p->reply, p->err, sizeof(p->err));
}

/* The URL of a target's page request; NULL on allocation failure. */
static char *page_url(const ft_node_t *node, const list_op_t *op)
{
	char *bucket = ft_pct_encode_dup(op->bucket, strlen(op->bucket), 0);
	char *prefix = ft_pct_encode_dup(op->prefix, strlen(op->prefix), 0);
	char *token = ft_pct_encode_dup(op->token, strlen(op->token), 0);
	char *url = NULL;

	if (bucket != NULL && prefix != NULL && token != NULL &&
	    asprintf(&url, "%s/v1/list?provider=%s&bucket=%s&prefix=%s&token=%s&pagesize=%d%s", node->control_url,
		     op->provider, bucket, prefix, token, op->pagesize, op->archive ? "&archive=true" : "") < 0)
		url = NULL;
	free(token);
	free(prefix);
	free(bucket);
	return url;
}

/* The name of an entry, NULL when the entry is malformed. */
static const char *entry_name(const json_t *e)
{
	return json_string_value(json_object_get(e, "name"));
}

/* Checks a page's reply; fills why and returns -1 when the target failed. */
static int check_page(page_t *p, char *why, size_t cap)
{
	if (p->rc != 0) {
		snprintf(why, cap, "target %s did not answer: %s", p->node->id, p->err);
		return -1;
	}
	if (p->status != 200) {
		const char *msg = json_string_value(json_object_get(p->reply, "message"));
		snprintf(why, cap, "target %s answered %ld%s%s", p->node->id, p->status, msg ? ": " : "",
			 msg ? msg : "");
		return -1;
	}
	p->entries = json_object_get(p->reply, "entries");
	if (!json_is_array(p->entries)) {
		snprintf(why, cap, "target %s sent a list reply without \"entries\"", p->node->id);
		return -1;
	}
	p->n = json_array_size(p->entries);
	for (size_t i = 0; i < p->n; i++) {
		if (entry_name(json_array_get(p->entries, i)) == NULL) {
			snprintf(why, cap, "target %s sent an entry without a name", p->node->id);
			return -1;
		}
	}
	return 0;
}

/* Index of the page whose next name is smallest, -1 when all are consumed. */
static int smallest(const page_t *pages, int n)
{
	int best = -1;
	const char *best_name = NULL;

	for (int i = 0; i < n; i++) {
		if (pages[i].pos >= pages[i].n)
			continue;
		const char *name = entry_name(json_array_get(pages[i].entries, pages[i].pos));
		if (best < 0 || strcmp(name, best_name) < 0) {
			best = i;
			best_name = name;
		}
	}
	return best;
}

/* The smallest last name of the pages that came back full, NULL when none did. */
static const char *frontier(const page_t *pages, int n, int pagesize)
{
	const char *f = NULL;

	for (int i = 0; i < n; i++) {
		if (pages[i].n < (size_t)pagesize || pages[i].n == 0)
			continue;
		const char *last = entry_name(json_array_get(pages[i].entries, pages[i].n - 1));
		if (f == NULL || strcmp(last, f) < 0)
			f = last;
	}
	return f;
}

/*
 * Whether entry e (named name) of page p may be merged: with owner_only, p's target must own the
 * name, or for a shard's member ("in_archive"), the shard's ("shard").
 */
static bool entry_owned(const list_op_t *op, const page_t *p, const json_t *e, const char *name)
{
	if (!op->owner_only)
		return true;
	const char *shard = json_string_value(json_object_get(e, "shard"));
	if (shard != NULL && json_is_true(json_object_get(e, "in_archive")))
		name = shard;
	const ft_node_t *owner = ft_smap_owner(op->smap, op->provider, op->bucket, name, strlen(name));
	return owner != NULL && strcmp(owner->id, p->node->id) == 0;
}

/*
 * Merges the pages into one array of at most op->pagesize entries; *token is where the next page
 * starts ("" when nothing follows; borrowed from the pages). NULL on allocation failure.
 */
static json_t *merge(page_t *pages, int n, const list_op_t *op, const char **token)
{
	json_t *out = json_array();
	const char *last = NULL, *front = frontier(pages, n, op->pagesize);
	bool more = false;
	int count = 0;

	*token = "";
	if (out == NULL)
		return NULL;
	while (count < op->pagesize) {
		int i = smallest(pages, n);
		if (i < 0)
			break;
		json_t *e = json_array_get(pages[i].entries, pages[i].pos);
		const char *name = entry_name(e);
		if (front != NULL && strcmp(name, front) > 0)
			break; /* a full page stopped before this name: it may hold smaller ones */
		pages[i].pos++;
		if (strcmp(name, op->token) <= 0 || (last != NULL && strcmp(name, last) == 0))
			continue; /* not after the token, or the same name from another target */
		if (!entry_owned(op, &pages[i], e, name))
			continue;
		if (op->owner_only)
			json_object_set_new(e, "cached", json_true());
		json_array_append(out, e);
		last = name;
		count++;
	}
	if (count < op->pagesize) { /* every name up to the frontier was seen */
		*token = front != NULL ? front : "";
		return out;
	}
	/* Full: more follows when a page was full or holds names after the last (not copies of it). */
	more = front != NULL;
	for (int i = 0; i < n; i++) {
		while (pages[i].pos < pages[i].n &&
		       strcmp(entry_name(json_array_get(pages[i].entries, pages[i].pos)), last) == 0)
			pages[i].pos++;
		if (pages[i].pos < pages[i].n)
			more = true;
	}
	*token = more ? last : "";
	return out;
}

/*
 * Fans one page request out to every target of the current map and merges the replies. *token:
 * where the next page starts, "" at the end (a copy, caller frees; NULL on failure).
 */
static int list_page(list_op_t *op, json_t **entries, char **token, int *status, char *why, size_t cap)
{
	ft_smap_t *smap = ft_smap_current();
	page_t *pages = NULL;
	int n = smap != NULL ? smap->n_targets : 0;
	const char *next = NULL;
	int rc = -1;

	*entries = NULL;
	*token = NULL;
	*status = 500;
	op->smap = smap;
	if (n == 0) {
		*status = 503;
		snprintf(why, cap, "no targets in the cluster map");
		goto out;
	}
	pages = calloc((size_t)n, sizeof(*pages));
	if (pages == NULL) {
		snprintf(why, cap, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		pages[i].node = &smap->targets[i];
		pages[i].url = page_url(pages[i].node, op);
		if (pages[i].url == NULL) {
			snprintf(why, cap, "out of memory");
			goto out;
		}
	}
	ft_fanout_run(op->px->fanout, fetch_page, pages, n);
	for (int i = 0; i < n; i++) {
		if (check_page(&pages[i], why, cap) != 0) {
			ft_warn("list %s: %s", op->bucket, why);
			*status = 503;
			goto out;
		}
	}
	*entries = merge(pages, n, op, &next);
	if (*entries == NULL || (*token = strdup(next)) == NULL) {
		json_decref(*entries);
		*entries = NULL;
		snprintf(why, cap, "out of memory");
		goto out;
	}
	rc = 0;
out:
	for (int i = 0; pages != NULL && i < n; i++) {
		json_decref(pages[i].reply);
		free(pages[i].url);
	}
	free(pages);
	op->smap = NULL;
	ft_smap_put(smap);
	return rc;
}

int px_list_page(px_t *px, const char *bucket, const char *prefix, const char *token, int pagesize, json_t **entries,
		 bool *more, int *status, char *why, size_t cap)
{
	char *next = NULL;
	int rc = px_list_page_of(px, "ais", bucket, prefix, token, pagesize, entries, &next, status, why, cap);

	*more = rc == 0 && next[0] != '\0';
	free(next);
	return rc;
}

int px_list_page_of(px_t *px, const char *provider, const char *bucket, const char *prefix, const char *token,
		    int pagesize, json_t **entries, char **next, int *status, char *why, size_t cap)
{
	list_op_t op = {.px = px,
			.provider = provider,
			.prefix = prefix,
			.token = token,
			.pagesize = pagesize,
			.owner_only = strcmp(provider, "ais") != 0};
	*next = NULL;
	if (pagesize < 1 || pagesize > PX_PAGESIZE_MAX || strlen(bucket) >= sizeof(op.bucket)) {
		*entries = NULL;
		*status = 500;
		snprintf(why, cap, "bad list arguments");
		return -1;
	}
	snprintf(op.bucket, sizeof(op.bucket), "%s", bucket);
	return list_page(&op, entries, next, status, why, cap);
}

/* Worker thread: fans out, merges, responds {"entries", "continuation_token"}. */
static void list_work(ft_req_t *r, void *arg)
{
	list_op_t *op = arg;
	json_t *entries;
	char *next;
	int status;
	char why[512];

	if (list_page(op, &entries, &next, &status, why, sizeof(why)) != 0) {
		if (status == 503 && strcmp(why, "no targets in the cluster map") != 0)
			ft_resp_error(r, 503, "list objects in \"%s\": %s", op->bucket, why);
		else
			ft_resp_error(r, status, "%s", why);
		return;
	}
	respond_page(r, op, entries, next);
	json_decref(entries);
	free(next);
}

/* Parses pagesize: absent, empty or 0 -> default; larger than the maximum -> the maximum; -1 if not a number. */
static int parse_pagesize(const char *s)
{
	long v = 0;

	if (s == NULL || s[0] == '\0')
		return PX_PAGESIZE_DEFAULT;
	for (const char *c = s; *c != '\0'; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		if (v <= PX_PAGESIZE_MAX)
			v = v * 10 + (*c - '0');
	}
	if (v == 0)
		return PX_PAGESIZE_DEFAULT;
	return v > PX_PAGESIZE_MAX ? PX_PAGESIZE_MAX : (int)v;
}

/* ---- remote buckets: the backend's listing through one target, cached flags from the owners ---- */

#define PX_RLIST_TIMEOUT_MS 60000 /* a page of up to 10000 names may take 10 backend calls */

/* The cached question to one owner: which of these names (entries at idx[]) do you hold. */
typedef struct {
	const ft_node_t *node;
	char *url;     /* owned */
	json_t *names; /* owned: {"names": [...]} */
	size_t *idx;   /* owned: index of each name in the page's entries */
	size_t n;
	int rc;
	long status;
	json_t *reply; /* owned */
	char err[256];
} owner_ask_t;

static void ask_owner(void *arg, int i)
{
	owner_ask_t *a = &((owner_ask_t *)arg)[i];

	if (a->n == 0)
		return;
	a->rc = ft_client_json("GET", a->url, a->names, PX_LIST_TIMEOUT_MS, &a->status, &a->reply, a->err,
			       sizeof(a->err));
}

/* The URL of a backend page request (page) or of the cached question; NULL on allocation failure. */
static char *rlist_url(const ft_node_t *node, const list_op_t *op, bool page)
{
	char *bucket = ft_pct_encode_dup(op->bucket, strlen(op->bucket), 0);
	char *prefix = ft_pct_encode_dup(op->prefix, strlen(op->prefix), 0);
	char *token = ft_pct_encode_dup(op->token, strlen(op->token), 0);
	const char *delim = op->delimiter != NULL ? op->delimiter : "",
		   *sa = op->start_after != NULL ? op->start_after : "";
	char *delimiter = ft_pct_encode_dup(delim, strlen(delim), 0),
	     *start_after = ft_pct_encode_dup(sa, strlen(sa), 0);
	char *url = NULL;
	int rc = -1;

	if (bucket != NULL && prefix != NULL && token != NULL && delimiter != NULL && start_after != NULL) {
		if (page)
			rc = asprintf(
				&url,
				"%s/v1/list?provider=%s&bucket=%s&remote=true&prefix=%s&token=%s&pagesize=%d%s%s%s%s",
				node->control_url, op->provider, bucket, prefix, token, op->pagesize,
				*delimiter != '\0' ? "&delimiter=" : "", delimiter,
				*start_after != '\0' ? "&start_after=" : "", start_after);
		else
			rc = asprintf(&url, "%s/v1/list?provider=%s&bucket=%s", node->control_url, op->provider,
				      bucket);
	}
	if (rc < 0)
		url = NULL;
	free(start_after);
	free(delimiter);
	free(token);
	free(prefix);
	free(bucket);
	return url;
}

/*
 * One page of the backend's listing from the target HRW picks by bucket name (the next targets
 * when it does not answer). 0 with *reply (its "entries" an array); -1 with *status and why.
 */
static int rlist_get(const list_op_t *op, const ft_smap_t *smap, json_t **reply, int *status, char *why, size_t cap)
{
	int n = smap->n_targets;
	int first = ft_hrw_pick(ft_hrw_name_hash(op->provider, op->bucket, "", 0), smap->target_digests, n);
	char err[256] = "";

	*reply = NULL;
	for (int k = 0; k < n; k++) {
		const ft_node_t *node = &smap->targets[(first + k) % n];
		char *url = rlist_url(node, op, true);
		long st = 0;
		if (url == NULL) {
			*status = 500;
			snprintf(why, cap, "out of memory");
			return -1;
		}
		int rc = ft_client_json("GET", url, NULL, PX_RLIST_TIMEOUT_MS, &st, reply, err, sizeof(err));
		free(url);
		if (rc != 0) {
			ft_warn("list %s/%s: target %s: %s", op->provider, op->bucket, node->id, err);
			continue; /* no answer: the next target lists */
		}
		const char *msg = json_string_value(json_object_get(*reply, "message"));
		if (st != 200 || !json_is_array(json_object_get(*reply, "entries"))) {
			*status = st >= 400 && st < 600 ? (int)st : 502;
			snprintf(why, cap, "list objects in %s bucket \"%s\": %s", op->provider, op->bucket,
				 msg != NULL ? msg : "bad reply from target");
			json_decref(*reply);
			*reply = NULL;
			return -1;
		}
		return 0;
	}
	*status = 503;
	snprintf(why, cap, "list objects in %s bucket \"%s\": no target answered (%s)", op->provider, op->bucket, err);
	return -1;
}

/* rlist_get for a request: 0 with *reply; -1 after responding. */
static int rlist_fetch(ft_req_t *r, const list_op_t *op, const ft_smap_t *smap, json_t **reply)
{
	char why[512];
	int status;

	if (rlist_get(op, smap, reply, &status, why, sizeof(why)) == 0)
		return 0;
	ft_resp_error(r, status, "%s", why);
	return -1;
}

int px_rlist_page(px_t *px, const char *provider, const char *bucket, const px_rlist_args_t *a, json_t **entries,
		  char **next, int *status, char *why, size_t cap)
{
	list_op_t op = {.px = px,
			.provider = provider,
			.prefix = a->prefix,
			.token = a->token,
			.delimiter = a->delimiter,
			.start_after = a->start_after,
			.pagesize = a->pagesize};
	ft_smap_t *smap = ft_smap_current();
	json_t *reply = NULL;
	int rc = -1;

	*entries = NULL;
	*next = NULL;
	if (a->pagesize < 1 || a->pagesize > PX_PAGESIZE_MAX || strlen(bucket) >= sizeof(op.bucket)) {
		*status = 500;
		snprintf(why, cap, "bad list arguments");
		goto out;
	}
	if (smap == NULL || smap->n_targets == 0) {
		*status = 503;
		snprintf(why, cap, "no targets in the cluster map");
		goto out;
	}
	snprintf(op.bucket, sizeof(op.bucket), "%s", bucket);
	if (rlist_get(&op, smap, &reply, status, why, cap) != 0)
		goto out;
	const char *t = json_string_value(json_object_get(reply, "continuation_token"));
	*entries = json_incref(json_object_get(reply, "entries"));
	if ((*next = strdup(t != NULL ? t : "")) == NULL) {
		json_decref(*entries);
		*entries = NULL;
		*status = 500;
		snprintf(why, cap, "out of memory");
		goto out;
	}
	rc = 0;
out:
	json_decref(reply);
	ft_smap_put(smap);
	return rc;
}

static void owners_free(owner_ask_t *asks, int n)
{
	for (int i = 0; asks != NULL && i < n; i++) {
		free(asks[i].url);
		json_decref(asks[i].names);
		free(asks[i].idx);
		json_decref(asks[i].reply);
	}
	free(asks);
}

/* Sets "cached" on every entry by asking each name's owner. 0, or -1 after responding. */
static int rlist_mark(ft_req_t *r, const list_op_t *op, const ft_smap_t *smap, json_t *entries)
{
	int n = smap->n_targets, rc = -1;
	size_t ne = json_array_size(entries);
	owner_ask_t *asks = calloc((size_t)n, sizeof(*asks));

	if (asks == NULL)
		goto oom;
	for (int i = 0; i < n; i++) {
		asks[i].node = &smap->targets[i];
		asks[i].names = json_pack("{s:[]}", "names");
		asks[i].idx = calloc(ne + 1, sizeof(*asks[i].idx));
		asks[i].url = rlist_url(asks[i].node, op, false);
		if (asks[i].names == NULL || asks[i].idx == NULL || asks[i].url == NULL)
			goto oom;
	}
	for (size_t k = 0; k < ne; k++) {
		const char *name = entry_name(json_array_get(entries, k));
		if (name == NULL) {
			ft_resp_error(r, 502, "list objects in %s bucket \"%s\": a target sent an entry without a name",
				      op->provider, op->bucket);
			goto out;
		}
		int o = ft_hrw_pick(ft_hrw_name_hash(op->provider, op->bucket, name, strlen(name)),
				    smap->target_digests, n);
		json_array_append_new(json_object_get(asks[o].names, "names"), json_string(name));
		asks[o].idx[asks[o].n++] = k;
	}
	ft_fanout_run(op->px->fanout, ask_owner, asks, n);
	for (int i = 0; i < n; i++) {
		owner_ask_t *a = &asks[i];
		const json_t *cached = json_object_get(a->reply, "cached");
		if (a->n == 0)
			continue;
		if (a->rc != 0 || a->status != 200 || json_array_size(cached) != a->n) {
			const char *msg = json_string_value(json_object_get(a->reply, "message"));
			ft_resp_error(
				r, 503,
				"list objects in %s bucket \"%s\": cannot tell which objects are cached: target %s: %s",
				op->provider, op->bucket, a->node->id,
				a->rc != 0    ? a->err
				: msg != NULL ? msg
					      : "bad reply");
			goto out;
		}
		for (size_t k = 0; k < a->n; k++)
			json_object_set_new(json_array_get(entries, a->idx[k]), "cached",
					    json_boolean(json_is_true(json_array_get(cached, k))));
	}
	rc = 0;
	goto out;
oom:
	ft_resp_error(r, 500, "out of memory");
out:
	owners_free(asks, n);
	return rc;
}

/* Worker thread: a backend page through one target, cached flags from the owners. */
static void rlist_work(ft_req_t *r, void *arg)
{
	list_op_t *op = arg;
	ft_smap_t *smap = ft_smap_current();
	json_t *reply = NULL;

	if (smap == NULL || smap->n_targets == 0) {
		ft_resp_error(r, 503, "no targets in the cluster map");
		goto out;
	}
	if (rlist_fetch(r, op, smap, &reply) != 0)
		goto out;
	json_t *entries = json_object_get(reply, "entries");
	if (rlist_mark(r, op, smap, entries) != 0)
		goto out;
	const char *token = json_string_value(json_object_get(reply, "continuation_token"));
	respond_page(r, op, entries, token != NULL ? token : "");
out:
	json_decref(reply);
	ft_smap_put(smap);
}

/* A boolean query parameter: absent, "false" or "0" -> false; "true" or "1" -> true; -1 for another value. */
static int query_bool(ft_req_t *r, const char *key, bool *out)
{
	const char *v = ft_req_query(r, key);

	*out = v != NULL && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
	if (v == NULL || *out || strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
		return 0;
	ft_resp_error(r, 400, "%s must be true or false, got \"%s\"", key, v);
	return -1;
}

void px_list_objects(px_t *px, ft_req_t *r, const char *bucket)
{
	px_list_objects_provider(px, r, "ais", bucket);
}

void px_list_objects_provider(px_t *px, ft_req_t *r, const char *provider, const char *bucket)
{
	px_list_args_t a = {.prefix = ft_req_query(r, "prefix"),
			    .token = ft_req_query(r, "continuation_token"),
			    .pagesize = parse_pagesize(ft_req_query(r, "pagesize"))};

	if (a.pagesize < 0) {
		ft_resp_error(r, 400, "pagesize must be a non-negative integer, got \"%s\"",
			      ft_req_query(r, "pagesize"));
		return;
	}
	if (query_bool(r, "cached", &a.cached_only) != 0 || query_bool(r, "archive", &a.archive) != 0)
		return;
	px_list_start(px, r, provider, bucket, &a);
}

void px_list_start(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const px_list_args_t *a)
{
	ft_bmd_t *bmd = ft_bmd_current();
	bool remote = strcmp(provider, "ais") != 0;
	list_op_t *op;

	if (bmd == NULL || ft_bmd_find(bmd, provider, bucket) == NULL) {
		if (remote)
			ft_resp_error(r, 404, "%s bucket \"%s://%s\" does not exist", provider, provider, bucket);
		else
			ft_resp_error(r, 404, "bucket \"ais://%s\" does not exist", bucket);
		goto out;
	}
	if (remote && !a->cached_only && strcmp(provider, "ht") == 0) {
		ft_resp_error(r, 400,
			      "ht bucket \"%s\" cannot be listed: an HTTP origin has no listing "
			      "(cached=true lists the objects cached in the cluster)",
			      bucket);
		goto out;
	}
	op = ft_req_alloc(r, sizeof(*op));
	memset(op, 0, sizeof(*op));
	op->px = px;
	op->provider = provider;
	snprintf(op->bucket, sizeof(op->bucket), "%s", bucket);
	op->prefix = ft_req_strdup(r, a->prefix != NULL ? a->prefix : "");
	op->token = ft_req_strdup(r, a->token != NULL ? a->token : "");
	op->pagesize = a->pagesize == 0                ? PX_PAGESIZE_DEFAULT
		       : a->pagesize > PX_PAGESIZE_MAX ? PX_PAGESIZE_MAX
						       : a->pagesize;
	op->owner_only = remote && a->cached_only;
	op->archive = a->archive;
	op->encode = a->encode;
	op->encode_arg = a->encode_arg;
	ft_req_defer(r, remote && !a->cached_only ? rlist_work : list_work, op);
out:
	ft_bmd_put(bmd);
}
