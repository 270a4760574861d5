/* List objects at the proxy: parallel fan-out of one page request to every target, k-way merge of the pages. */
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "httputil.h"
#include "log.h"

/*
 * DESIGN
 * Each target returns its own names > token with the prefix, sorted, at most pagesize. The merged
 * page is the pagesize smallest distinct names of the union: exact, because a target that returned
 * fewer than pagesize names has nothing more, and one that returned a full page ends at a name no
 * smaller than the last merged name (it alone holds pagesize names up to its last one). The
 * continuation token is the last merged name whenever some target may hold more: it returned a
 * full page, or some of its names were not merged.
 */

#define PX_PAGESIZE_DEFAULT 1000
#define PX_PAGESIZE_MAX 10000

typedef struct {
	px_t *px;
	char bucket[FT_BUCKET_NAME_MAX + 1];
	const char *prefix; /* ft_req_alloc memory */
	const char *token;
	int pagesize;
} list_op_t;

/* One target's page; filled by fetch_page on a pool thread. */
typedef struct {
	const ft_node_t *node;
	char *url;         /* owned */
	int rc;            /* ft_client_json result */
	long status;
	json_t *reply;     /* owned */
	char err[256];
	const json_t *entries; /* borrowed from reply */
	size_t n, pos;     /* entries and the next one to merge */
} page_t;

static void fetch_page(void *arg, int i)
{
	page_t *p = &((page_t *)arg)[i];

	p->rc = ft_client_json("GET", p->url, NULL, PX_LIST_TIMEOUT_MS, &p->status, &p->reply, p->err,
			       sizeof(p->err));
}

/* The URL of a target's page request; NULL on allocation failure. */
static char *page_url(const ft_node_t *node, const list_op_t *op)
{
	char *bucket = ft_url_escape_query(op->bucket);
	char *prefix = ft_url_escape_query(op->prefix);
	char *token = ft_url_escape_query(op->token);
	char *url = NULL;

	if (bucket != NULL && prefix != NULL && token != NULL &&
	    asprintf(&url, "%s/v1/list?provider=ais&bucket=%s&prefix=%s&token=%s&pagesize=%d", node->control_url,
		     bucket, prefix, token, op->pagesize) < 0)
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

/*
 * Merges the pages into one array of at most op->pagesize entries; *more is set when some target
 * may hold names after the last one. NULL on allocation failure.
 */
static json_t *merge(page_t *pages, int n, const list_op_t *op, bool *more)
{
	json_t *out = json_array();
	const char *last = NULL;
	int count = 0;

	*more = false;
	if (out == NULL)
		return NULL;
	for (int i = 0; i < n; i++)
		if (pages[i].n >= (size_t)op->pagesize)
			*more = true;
	while (count < op->pagesize) {
		int i = smallest(pages, n);
		if (i < 0)
			break;
		json_t *e = json_array_get(pages[i].entries, pages[i].pos++);
		const char *name = entry_name(e);
		if (strcmp(name, op->token) <= 0 || (last != NULL && strcmp(name, last) == 0))
			continue; /* not after the token, or the same name from another target */
		json_array_append(out, e);
		last = name;
		count++;
	}
	/* Copies of the last name on other targets are not "more". */
	for (int i = 0; i < n && last != NULL; i++) {
		while (pages[i].pos < pages[i].n &&
		       strcmp(entry_name(json_array_get(pages[i].entries, pages[i].pos)), last) == 0)
			pages[i].pos++;
		if (pages[i].pos < pages[i].n)
			*more = true;
	}
	if (last == NULL)
		*more = false;
	return out;
}

/* Fans one page request out to every target of the current map and merges the replies. */
static int list_page(const list_op_t *op, json_t **entries, bool *more, int *status, char *why, size_t cap)
{
	ft_smap_t *smap = ft_smap_current();
	page_t *pages = NULL;
	int n = smap != NULL ? smap->n_targets : 0;
	int rc = -1;

	*entries = NULL;
	*more = false;
	*status = 500;
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
	px_pool_run(op->px->pool, fetch_page, pages, n);
	for (int i = 0; i < n; i++) {
		if (check_page(&pages[i], why, cap) != 0) {
			ft_warn("list %s: %s", op->bucket, why);
			*status = 503;
			goto out;
		}
	}
	*entries = merge(pages, n, op, more);
	if (*entries == NULL) {
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
	ft_smap_put(smap);
	return rc;
}

int px_list_page(px_t *px, const char *bucket, const char *prefix, const char *token, int pagesize,
		 json_t **entries, bool *more, int *status, char *why, size_t cap)
{
	list_op_t op = { .px = px, .prefix = prefix, .token = token, .pagesize = pagesize };

	if (pagesize < 1 || pagesize > PX_PAGESIZE_MAX || strlen(bucket) >= sizeof(op.bucket)) {
		*entries = NULL;
		*more = false;
		*status = 500;
		snprintf(why, cap, "bad list arguments");
		return -1;
	}
	snprintf(op.bucket, sizeof(op.bucket), "%s", bucket);
	return list_page(&op, entries, more, status, why, cap);
}

/* Worker thread: fans out, merges, responds {"entries", "continuation_token"}. */
static void list_work(ft_req_t *r, void *arg)
{
	list_op_t *op = arg;
	json_t *entries, *body;
	bool more;
	int status;
	char why[512];

	if (list_page(op, &entries, &more, &status, why, sizeof(why)) != 0) {
		if (status == 503 && strcmp(why, "no targets in the cluster map") != 0)
			ft_resp_error(r, 503, "list objects in \"%s\": %s", op->bucket, why);
		else
			ft_resp_error(r, status, "%s", why);
		return;
	}
	size_t n = json_array_size(entries);
	const char *last = n > 0 ? entry_name(json_array_get(entries, n - 1)) : "";
	body = json_pack("{s:o,s:s}", "entries", entries, "continuation_token", more ? last : "");
	if (body == NULL)
		ft_resp_error(r, 500, "out of memory");
	else
		ft_resp_json(r, 200, body);
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

void px_list_objects(px_t *px, ft_req_t *r, const char *bucket)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const char *prefix = ft_req_query(r, "prefix");
	const char *token = ft_req_query(r, "continuation_token");
	int pagesize = parse_pagesize(ft_req_query(r, "pagesize"));
	list_op_t *op;

	if (bmd == NULL || ft_bmd_find(bmd, "ais", bucket) == NULL) {
		ft_resp_error(r, 404, "bucket \"%s\" does not exist", bucket);
		goto out;
	}
	if (pagesize < 0) {
		ft_resp_error(r, 400, "pagesize must be a non-negative integer, got \"%s\"", ft_req_query(r, "pagesize"));
		goto out;
	}
	op = ft_req_alloc(r, sizeof(*op));
	op->px = px;
	snprintf(op->bucket, sizeof(op->bucket), "%s", bucket);
	op->prefix = ft_req_strdup(r, prefix != NULL ? prefix : "");
	op->token = ft_req_strdup(r, token != NULL ? token : "");
	op->pagesize = pagesize;
	ft_req_defer(r, list_work, op);
out:
	ft_bmd_put(bmd);
}
