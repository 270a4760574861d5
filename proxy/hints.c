/* SPDX-License-Identifier: Apache-2.0 */
/* Order hints at the proxy: checks an order-hint bucket action, splits its names by HRW owner, installs each share. */
#include "proxy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/names.h"
#include "base/strbuf.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * POST /v1/buckets/B?provider=P {"action": "order-hint", "value": {"epoch": N, "objnames": [...],
 * "ttl_s": S, "job": J}} (docs/epoch-hints.md). The proxy keeps nothing: on a worker it checks the
 * message, splits the names by their HRW owner in the current Smap keeping their order, and POSTs
 * every target its share (an empty one too: it replaces the job's older epoch there) to
 * /v1/hints on the control port, in parallel. When a target refuses its share, the shares already
 * installed are removed again, so a refused hint leaves the job with none, and the target's status
 * (409, 413, 429) is the answer. Names no target holds simply count as skipped there later.
 * A hint may be far larger than other bucket messages (PX_HINT_BODY_MAX, hint_max_names); a body
 * over PX_BODY_MAX is parsed on the worker, never on a loop thread, and must be an order-hint.
 */

#define HINT_ACTION "order-hint"
#define HINT_TIMEOUT_MS 30000
#define HINT_TTL_DEFAULT 3600
#define HINT_TTL_MAX 604800
#define HINT_JOB_MAX FT_JOB_NAME_MAX
#define HINT_SHARE_MAX (FT_CTL_MAX_BODY - 4096) /* one target's share must fit its control-port body limit */

typedef struct {
	px_t *px;
	char provider[16];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	const char *body; /* request memory */
	size_t len;
} hint_req_t;

/* The installs of one hint: a message per target, its answer. Lives on the worker's stack. */
typedef struct {
	const ft_smap_t *smap;
	json_t **msg;
	long *status;
	json_t **resp;
	char (*err)[200];
	bool *installed;    /* the target took its share (POST answered 200) */
	const char *method; /* POST to install, DELETE to remove */
	char query[FT_BUCKET_NAME_MAX + HINT_JOB_MAX + 64];
} shares_t;

static void share_call(void *arg, int i)
{
	shares_t *s = arg;
	char url[FT_URL_MAX + sizeof(s->query) + 16];

	if (strcmp(s->method, "DELETE") == 0 && !s->installed[i])
		return;
	snprintf(url, sizeof(url), "%s/v1/hints%s", s->smap->targets[i].control_url,
		 strcmp(s->method, "DELETE") == 0 ? s->query : "");
	json_decref(s->resp[i]);
	s->resp[i] = NULL;
	if (ft_client_json(s->method, url, strcmp(s->method, "POST") == 0 ? s->msg[i] : NULL, HINT_TIMEOUT_MS,
			   &s->status[i], &s->resp[i], s->err[i], sizeof(s->err[i])) != 0)
		s->status[i] = 0;
}

static int shares_alloc(shares_t *s, int n)
{
	s->msg = calloc((size_t)n + 1, sizeof(*s->msg));
	s->status = calloc((size_t)n + 1, sizeof(*s->status));
	s->resp = calloc((size_t)n + 1, sizeof(*s->resp));
	s->err = calloc((size_t)n + 1, sizeof(*s->err));
	s->installed = calloc((size_t)n + 1, sizeof(*s->installed));
	return s->msg && s->status && s->resp && s->err && s->installed ? 0 : -1;
}

static void shares_free(shares_t *s, int n)
{
	for (int i = 0; i < n; i++) {
		if (s->msg)
			json_decref(s->msg[i]);
		if (s->resp)
			json_decref(s->resp[i]);
	}
	free(s->msg);
	free(s->status);
	free(s->resp);
	free(s->err);
	free(s->installed);
}

/* ---- checking the message ---- */

/*
 * The names listed in the bucket's object obj, one per line in reading order (a "\r" before the
 * line end and empty lines are ignored), appended to out; read from its owner like any GET (a
 * remote bucket's list is fetched from the backend then). 0, or the status with why.
 */
static int names_from_object(const px_t *px, const hint_req_t *h, const ft_smap_t *smap, const char *obj, json_t *out,
			     char *why, size_t cap)
{
	ft_strbuf_t body = {0};
	int st = px_object_read(smap, h->provider, h->bucket, obj, "url_list_object", HINT_TIMEOUT_MS, &body, why, cap);
	size_t line = 0;
	int rc = st == 0 ? px_text_lines(body.p, body.len, (size_t)px->cfg.hint_max_names, out, &line) : 0;

	if (rc == -E2BIG) {
		snprintf(why, cap, "url_list_object \"%s\": more than hint_max_names %d names", obj,
			 px->cfg.hint_max_names);
		st = 413;
	} else if (rc == -EILSEQ) {
		snprintf(why, cap, "url_list_object \"%s\": line %zu is not UTF-8 text", obj, line);
		st = 400;
	} else if (rc != 0) {
		snprintf(why, cap, "out of memory");
		st = 500;
	}
	ft_strbuf_free(&body);
	return st;
}

/*
 * The names of the value, as a new reference in *names: its objnames, or its template expanded.
 * 0, or the status to answer with why filled (400, 404, 413, 502, 503).
 */
static int value_names(const px_t *px, const hint_req_t *h, const ft_smap_t *smap, const json_t *value, json_t **names,
		       char *why, size_t cap)
{
	const json_t *list = json_object_get(value, "objnames"), *tpl = json_object_get(value, "template");
	const json_t *obj = json_object_get(value, "url_list_object");
	const char *bad;

	if ((list != NULL) + (tpl != NULL) + (obj != NULL) != 1) {
		snprintf(why, cap,
			 "%s: give the names one way: objnames (an array in reading order), a template, or "
			 "url_list_object",
			 HINT_ACTION);
		return 400;
	}
	if (obj != NULL) {
		const char *o = json_string_value(obj);
		if (o == NULL || ft_name_check_object(o, strlen(o), &bad) != 0) {
			snprintf(why, cap, "%s: url_list_object must name an object of the bucket: %s", HINT_ACTION,
				 o == NULL ? "not a string" : bad);
			return 400;
		}
		*names = json_array();
		if (*names == NULL) {
			snprintf(why, cap, "out of memory");
			return 500;
		}
		return names_from_object(px, h, smap, o, *names, why, cap);
	}
	if (tpl != NULL) {
		if (!json_is_string(tpl)) {
			snprintf(why, cap, "%s: template must be a string like prefix{0000..0099}suffix", HINT_ACTION);
			return 400;
		}
		*names = json_array();
		int rc = *names != NULL ? px_expand_template(json_string_value(tpl), (size_t)px->cfg.hint_max_names,
							     *names, &bad)
					: -1;
		if (rc != 0) {
			snprintf(why, cap, "%s: template \"%s\": %s%s", HINT_ACTION, json_string_value(tpl),
				 *names != NULL ? bad : "out of memory", rc == -2 ? " (hint_max_names)" : "");
			return rc == -2 ? 413 : 400;
		}
	} else {
		*names = json_incref((json_t *)list);
	}
	return 0;
}

/*
 * The checked value: epoch, ttl_s, job, names (a new reference the caller drops, also on failure).
 * 0, or the status to answer with why filled (400, 413, 501).
 */
static int value_check(const px_t *px, const hint_req_t *h, const ft_smap_t *smap, const json_t *msg, int64_t *epoch,
		       int64_t *ttl, const char **job, json_t **names, char *why, size_t cap)
{
	static const char *const keys[] = {"epoch", "objnames", "template", "url_list_object", "ttl_s", "job"};
	const json_t *value = json_object_get(msg, "value"), *v;
	const char *key, *bad;

	json_object_foreach((json_t *)msg, key, v) {
		if (strcmp(key, "action") != 0 && strcmp(key, "value") != 0) {
			snprintf(why, cap, "unknown field \"%s\" in the action message", key);
			return 400;
		}
	}
	if (!json_is_object(value)) {
		snprintf(why, cap,
			 HINT_ACTION " needs a value object {\"epoch\": N, \"objnames\": [...], \"ttl_s\": S}");
		return 400;
	}
	json_object_foreach((json_t *)value, key, v) {
		size_t i = 0;
		while (i < sizeof(keys) / sizeof(keys[0]) && strcmp(key, keys[i]) != 0)
			i++;
		if (i < sizeof(keys) / sizeof(keys[0]))
			continue;
		snprintf(why, cap,
			 "%s: unknown field \"%s\" (known: epoch, objnames, template, url_list_object, ttl_s, job)",
			 HINT_ACTION, key);
		return 400;
	}
	v = json_object_get(value, "epoch");
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		snprintf(why, cap, "%s: epoch must be a non-negative integer", HINT_ACTION);
		return 400;
	}
	*epoch = json_integer_value(v);
	v = json_object_get(value, "ttl_s");
	*ttl = HINT_TTL_DEFAULT;
	if (v != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > HINT_TTL_MAX) {
			snprintf(why, cap, "%s: ttl_s must be an integer of 1..%d seconds", HINT_ACTION, HINT_TTL_MAX);
			return 400;
		}
		*ttl = json_integer_value(v);
	}
	v = json_object_get(value, "job");
	*job = "default";
	if (v != NULL) {
		if (!json_is_string(v) || ft_name_check_job(json_string_value(v)) != 0) {
			snprintf(why, cap, "%s: job must be 1..%d characters of [A-Za-z0-9._-]", HINT_ACTION,
				 HINT_JOB_MAX - 1);
			return 400;
		}
		*job = json_string_value(v);
	}
	int st = value_names(px, h, smap, value, names, why, cap);
	if (st != 0)
		return st;
	if (!json_is_array(*names)) {
		snprintf(why, cap, "%s: objnames must be an array of object names in reading order", HINT_ACTION);
		return 400;
	}
	if (json_array_size(*names) == 0) {
		snprintf(why, cap, "%s: objnames is empty", HINT_ACTION);
		return 400;
	}
	if (json_array_size(*names) > (size_t)px->cfg.hint_max_names) {
		snprintf(why, cap, "%s: %zu names, more than hint_max_names %d", HINT_ACTION, json_array_size(*names),
			 px->cfg.hint_max_names);
		return 413;
	}
	for (size_t i = 0; i < json_array_size(*names); i++) {
		const char *n = json_string_value(json_array_get(*names, i));
		if (n == NULL || ft_name_check_object(n, strlen(n), &bad) != 0) {
			snprintf(why, cap, "%s: objnames[%zu]: %s", HINT_ACTION, i, n == NULL ? "not a string" : bad);
			return 400;
		}
	}
	return 0;
}

/* ---- splitting and installing ---- */

/* One message per target with the names it owns, in order. 0, or the status with why (413, 500). */
static int split(const hint_req_t *h, const ft_smap_t *smap, shares_t *s, int64_t epoch, int64_t ttl, const char *job,
		 const json_t *names, char *why, size_t cap)
{
	int n = smap->n_targets;
	size_t *bytes = calloc((size_t)n, sizeof(*bytes));

	if (bytes == NULL)
		goto oom;
	for (int i = 0; i < n; i++) {
		s->msg[i] = json_pack("{s:s, s:s, s:s, s:I, s:I, s:[]}", "provider", h->provider, "bucket", h->bucket,
				      "job", job, "epoch", (json_int_t)epoch, "ttl_s", (json_int_t)ttl, "objnames");
		if (s->msg[i] == NULL)
			goto oom;
	}
	for (size_t k = 0; k < json_array_size(names); k++) {
		json_t *name = json_array_get(names, k);
		const char *str = json_string_value(name);
		const ft_node_t *owner = ft_smap_owner(smap, h->provider, h->bucket, str, strlen(str));
		int i = (int)(owner - smap->targets);
		bytes[i] += json_string_length(name) + 8; /* quotes, comma, some escaping */
		if (bytes[i] > HINT_SHARE_MAX) {
			snprintf(why, cap, "%s: the share of target %s is over %u bytes; send fewer names at once",
				 HINT_ACTION, smap->targets[i].id, (unsigned)HINT_SHARE_MAX);
			free(bytes);
			return 413;
		}
		if (json_array_append(json_object_get(s->msg[i], "objnames"), name) != 0)
			goto oom;
	}
	free(bytes);
	return 0;
oom:
	free(bytes);
	snprintf(why, cap, "out of memory");
	return 500;
}

/*
 * Posts the shares; on a refusal removes those this request installed (that job and epoch, on the
 * targets that took it). 0, or the status to answer with why.
 */
static int install(px_t *px, const hint_req_t *h, const ft_smap_t *smap, shares_t *s, const char *job, int64_t epoch,
		   char *why, size_t cap)
{
	int n = smap->n_targets, bad = -1;

	s->method = "POST";
	ft_fanout_run(px->fanout, share_call, s, n);
	for (int i = 0; i < n; i++) {
		s->installed[i] = s->status[i] == 200;
		if (!s->installed[i] && bad < 0)
			bad = i;
	}
	if (bad < 0)
		return 0;
	const char *m = json_string_value(json_object_get(s->resp[bad], "message"));
	int st = s->status[bad] >= 400 && s->status[bad] < 500 ? (int)s->status[bad] : 502;
	snprintf(why, cap, "target %s: %s", smap->targets[bad].id,
		 m != NULL             ? m
		 : s->status[bad] == 0 ? s->err[bad]
				       : "failed");
	/* Take back what was installed: a refused hint leaves the job without one on every target. */
	s->method = "DELETE";
	snprintf(s->query, sizeof(s->query), "?provider=%s&bucket=%s&job=%s&epoch=%lld", h->provider, h->bucket, job,
		 (long long)epoch);
	ft_fanout_run(px->fanout, share_call, s, n);
	return st;
}

/* The answer: the names each target took. */
static json_t *summary(const ft_smap_t *smap, const shares_t *s, const char *job, int64_t epoch, size_t total)
{
	json_t *targets = json_array();

	for (int i = 0; i < smap->n_targets; i++)
		json_array_append_new(targets, json_pack("{s:s, s:O?, s:O?}", "node", smap->targets[i].id, "names",
							 json_object_get(s->resp[i], "names"), "duplicates",
							 json_object_get(s->resp[i], "duplicates")));
	return json_pack("{s:s, s:I, s:I, s:o}", "job", job, "epoch", (json_int_t)epoch, "names", (json_int_t)total,
			 "targets", targets);
}

static void hint_work(ft_req_t *r, void *arg)
{
	hint_req_t *h = arg;
	json_error_t jerr;
	json_t *msg = json_loadb(h->body, h->len, 0, &jerr);
	ft_smap_t *smap = ft_smap_current();
	ft_bmd_t *bmd = ft_bmd_current();
	shares_t s = {.smap = smap};
	json_t *names = NULL;
	const char *job = NULL;
	int64_t epoch = 0, ttl = 0;
	char why[400] = "";
	int n = smap != NULL ? smap->n_targets : 0, st;

	if (msg == NULL) {
		ft_resp_error(r, 400, "malformed JSON action message: %s", jerr.text);
		goto out;
	}
	const char *action = json_string_value(json_object_get(msg, "action"));
	if (action == NULL || strcmp(action, HINT_ACTION) != 0) {
		ft_resp_error(r, 413, "a bucket action message over %u bytes must be an %s", (unsigned)PX_BODY_MAX,
			      HINT_ACTION);
		goto out;
	}
	if (bmd == NULL || ft_bmd_find(bmd, h->provider, h->bucket) == NULL) {
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", h->provider, h->bucket);
		goto out;
	}
	st = value_check(h->px, h, smap, msg, &epoch, &ttl, &job, &names, why, sizeof(why));
	if (st != 0) {
		ft_resp_error(r, st, "%s", why);
		goto out;
	}
	if (n == 0) {
		ft_resp_error(r, 503, "the cluster map has no targets");
		goto out;
	}
	if (shares_alloc(&s, n) != 0) {
		ft_resp_error(r, 500, "out of memory");
		goto out;
	}
	st = split(h, smap, &s, epoch, ttl, job, names, why, sizeof(why));
	if (st == 0)
		st = install(h->px, h, smap, &s, job, epoch, why, sizeof(why));
	if (st != 0) {
		ft_resp_error(r, st, "%s of %s/%s: %s", HINT_ACTION, h->provider, h->bucket, why);
		goto out;
	}
	ft_info("order hint %s/%s job %s epoch %lld: %zu names over %d targets, ttl %llds", h->provider, h->bucket, job,
		(long long)epoch, json_array_size(names), n, (long long)ttl);
	ft_resp_json(r, 200, summary(smap, &s, job, epoch, json_array_size(names)));
out:
	shares_free(&s, n);
	json_decref(names);
	json_decref(msg);
	ft_bmd_put(bmd);
	ft_smap_put(smap);
}

/* Whether body is an order-hint: any body over PX_BODY_MAX is taken as one (checked on the worker). */
static bool is_hint(const char *body, size_t len)
{
	if (len > PX_BODY_MAX)
		return true;
	json_t *peek = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	const char *action = json_string_value(json_object_get(peek, "action"));
	bool yes = action != NULL && strcmp(action, HINT_ACTION) == 0;

	json_decref(peek);
	return yes;
}

bool px_hints_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *body, size_t len)
{
	if (!is_hint(body, len))
		return false;
	hint_req_t *h = ft_req_alloc(r, sizeof(*h));
	memset(h, 0, sizeof(*h));
	h->px = px;
	snprintf(h->provider, sizeof(h->provider), "%s", provider);
	snprintf(h->bucket, sizeof(h->bucket), "%s", bucket);
	h->body = body;
	h->len = len;
	ft_req_defer(r, hint_work, h);
	return true;
}
