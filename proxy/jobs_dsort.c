/* SPDX-License-Identifier: Apache-2.0 */
/* Proxy side of dsort (reshard): the value checked, the input shards' records listed, ordered and packed into outputs. */
#include "proxy.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/names.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * The proxy is the job's coordinator, once, before the fan-out (on the worker, like a copy's
 * prepare): it asks the owner of every input shard for the shard's members (names and sizes, from
 * the target's member index: the listing with archive=true), groups the members into records by
 * their WebDataset sample key (a record is never split), orders the records (alphanumeric by
 * key, a seeded shuffle of that, or the order of the keys in an order file), and cuts the order
 * into output shards: records are added to a shard until its member bytes reach shard_size, so a
 * shard holds at most shard_size plus one record. The plan (output name -> its members, each
 * [input index, member, size]) goes to every target in the job message; each target builds the
 * outputs it owns (target/xact/dsort.c). Memory here: the plan, O(members) names and sizes.
 */

#define DSORT_NAMES_MAX 100000
#define DSORT_LIST_PAGE 10000
#define DSORT_TIMEOUT_MS 60000
#define DSORT_MSG_MAX (15u << 20) /* the plan travels in the job message: below the control-port body limit */

static const char *const dsort_keys[] = {"template",   "prefix", "to",         "output_template",
					 "shard_size", "order",  "order_file", "seed"};

/* One record: the members of one sample key, in the order they were listed. */
typedef struct {
	char *key;
	json_t *members; /* [[input index, member, size], ...] */
	int64_t size;
	int64_t pos; /* order file: the key's position; INT64_MAX when not listed */
} rec_t;

/* One input shard's member listing, filled on a fan-out thread. */
typedef struct {
	const ft_smap_t *smap;
	const char *bucket;
	const json_t *inputs;
	json_t **members; /* per input: [[name, size], ...] */
	int *status;      /* per input: 0 ok, else the error status */
	char (*why)[600];
} listing_t;

/* ---- the value (loop thread) ---- */

static int known_key(const char *key)
{
	for (size_t i = 0; i < sizeof(dsort_keys) / sizeof(dsort_keys[0]); i++)
		if (strcmp(key, dsort_keys[i]) == 0)
			return 1;
	return 0;
}

/* Whether name ends in a shard extension the targets read and write. */
static int shard_name(const char *name)
{
	static const char *const exts[] = {".tar", ".tgz", ".tar.gz", ".zip", ".tar.lz4"};
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		size_t e = strlen(exts[i]);
		if (n > e && strcmp(name + n - e, exts[i]) == 0)
			return 1;
	}
	return 0;
}

/* The output bucket of value ("to": {"name", "provider": "ais"}; default the source); 0, or -1 after responding. */
static int check_to(ft_req_t *r, const json_t *value, const char *bucket, json_t *msg)
{
	const json_t *to = json_object_get(value, "to");
	const char *name = bucket, *p = "ais", *why = NULL;

	if (to != NULL) {
		name = json_string_value(json_object_get(to, "name"));
		if (json_object_get(to, "provider") != NULL)
			p = json_string_value(json_object_get(to, "provider"));
	}
	if (to != NULL && (!json_is_object(to) || name == NULL || p == NULL)) {
		ft_resp_error(r, 400, "dsort: \"to\" must be {\"name\": \"BUCKET\"}");
		return -1;
	}
	if (strcmp(p, "ais") != 0) {
		ft_resp_error(r, 400, "dsort: the output bucket must be an ais bucket, not %s", p);
		return -1;
	}
	if (ft_name_check_bucket(name, &why) != 0) {
		ft_resp_error(r, 400, "dsort: bad output bucket name \"%s\": %s", name, why);
		return -1;
	}
	if (!px_auth_bucket(r, FT_ROLE_READWRITE, name)) /* the output bucket is written too */
		return -1;
	ft_bmd_t *bmd = ft_bmd_current();
	int found = bmd != NULL && ft_bmd_find(bmd, "ais", name) != NULL;
	ft_bmd_put(bmd);
	if (!found) {
		ft_resp_error(r, 404, "dsort: output bucket \"ais://%s\" does not exist (create it first)", name);
		return -1;
	}
	json_object_set_new(msg, "to_bucket", json_string(name));
	return 0;
}

/* The output names and the order of value into spec; 0, or -1 after responding 400. */
static int check_output(ft_req_t *r, const json_t *value, json_t *spec)
{
	const char *tpl = json_string_value(json_object_get(value, "output_template"));
	const json_t *size = json_object_get(value, "shard_size"), *seed = json_object_get(value, "seed");
	const char *order = json_string_value(json_object_get(value, "order"));
	const json_t *file = json_object_get(value, "order_file");
	json_t *names = json_array();
	const char *why = NULL;

	if (tpl == NULL || px_expand_template(tpl, DSORT_NAMES_MAX, names, &why) != 0) {
		ft_resp_error(r, 400, "dsort: bad output_template \"%s\": %s", tpl ? tpl : "",
			      tpl ? why : "missing (e.g. \"out-{0000..0099}.tar\")");
		goto fail;
	}
	why = NULL;
	for (size_t i = 0; i < json_array_size(names); i++) {
		const char *n = json_string_value(json_array_get(names, i));
		if (ft_name_check_object(n, strlen(n), &why) != 0 || !shard_name(n)) {
			ft_resp_error(r, 400, "dsort: output_template gives \"%s\": %s", n,
				      why ? why : "not a shard name (.tar, .tgz, .tar.gz, .zip or .tar.lz4)");
			goto fail;
		}
	}
	if (!json_is_integer(size) || json_integer_value(size) < 1) {
		ft_resp_error(r, 400, "dsort: shard_size must be a positive integer (bytes)");
		goto fail;
	}
	if (order == NULL)
		order = file != NULL ? "file" : "alphanumeric";
	if (strcmp(order, "alphanumeric") != 0 && strcmp(order, "shuffle") != 0 && strcmp(order, "file") != 0) {
		ft_resp_error(r, 400, "dsort: order must be \"alphanumeric\", \"shuffle\" or \"file\"");
		goto fail;
	}
	if ((strcmp(order, "file") == 0) != (file != NULL) ||
	    (file != NULL && (!json_is_string(file) ||
			      ft_name_check_object(json_string_value(file), json_string_length(file), &why) != 0))) {
		ft_resp_error(r, 400, "dsort: order \"file\" needs order_file (an object of the bucket), and only it");
		goto fail;
	}
	if (seed != NULL && !json_is_integer(seed)) {
		ft_resp_error(r, 400, "dsort: seed must be an integer");
		goto fail;
	}
	json_object_set_new(spec, "outputs", names);
	json_object_set_new(spec, "shard_size", json_integer(json_integer_value(size)));
	json_object_set_new(spec, "order", json_string(order));
	json_object_set_new(spec, "seed", json_integer(seed != NULL ? json_integer_value(seed) : 0));
	if (file != NULL)
		json_object_set(spec, "order_file", (json_t *)file);
	return 0;
fail:
	json_decref(names);
	return -1;
}

/* The input shards of value (template or prefix) into spec; 0, or -1 after responding 400. */
static int check_input(ft_req_t *r, const json_t *value, json_t *spec)
{
	const char *tpl = json_string_value(json_object_get(value, "template"));
	const json_t *prefix = json_object_get(value, "prefix");
	const char *why = NULL;

	if ((tpl != NULL) == (prefix != NULL) || (prefix != NULL && !json_is_string(prefix))) {
		ft_resp_error(r, 400, "dsort needs the input shards as exactly one of \"template\" or \"prefix\"");
		return -1;
	}
	if (prefix != NULL) {
		json_object_set(spec, "prefix", (json_t *)prefix);
		return 0;
	}
	json_t *names = json_array();
	if (px_expand_template(tpl, DSORT_NAMES_MAX, names, &why) != 0) {
		json_decref(names);
		ft_resp_error(r, 400, "dsort: bad template \"%s\": %s", tpl, why);
		return -1;
	}
	json_object_set_new(spec, "inputs", names);
	return 0;
}

/* ---- the plan (worker) ---- */

/* A target's page of members of shard i (prefix = its name) into l->members[i]; the next token or NULL. */
static char *list_members(listing_t *l, int i, const ft_node_t *owner, const char *shard, const char *token, int *found)
{
	char *b = ft_pct_encode_dup(l->bucket, strlen(l->bucket), 0), *p = ft_pct_encode_dup(shard, strlen(shard), 0);
	char *t = ft_pct_encode_dup(token, strlen(token), 0), *url = NULL, *next = NULL;
	json_t *reply = NULL;
	long status = 0;
	char err[200];
	size_t n = strlen(shard);

	if (b == NULL || p == NULL || t == NULL ||
	    asprintf(&url, "%s/v1/list?provider=ais&bucket=%s&prefix=%s&token=%s&pagesize=%d&archive=true",
		     owner->control_url, b, p, t, DSORT_LIST_PAGE) < 0) {
		url = NULL;
		l->status[i] = 500;
		snprintf(l->why[i], sizeof(l->why[i]), "out of memory");
	} else if (ft_client_json("GET", url, NULL, DSORT_TIMEOUT_MS, &status, &reply, err, sizeof(err)) != 0 ||
		   status != 200 || !json_is_array(json_object_get(reply, "entries"))) {
		l->status[i] = 502;
		snprintf(l->why[i], sizeof(l->why[i]), "input shard \"%s\": target %s cannot list it: %s", shard,
			 owner->id, status != 0 ? "bad answer" : err);
	} else {
		const json_t *entries = json_object_get(reply, "entries");
		for (size_t k = 0; k < json_array_size(entries); k++) {
			const json_t *e = json_array_get(entries, k);
			const char *name = json_string_value(json_object_get(e, "name"));
			if (name == NULL)
				continue;
			if (strcmp(name, shard) == 0)
				*found = 1;
			else if (strncmp(name, shard, n) == 0 && name[n] == '/')
				json_array_append_new(l->members[i],
						      json_pack("[s, I]", name + n + 1,
								json_integer_value(json_object_get(e, "size"))));
		}
		const char *last = json_string_value(
			json_object_get(json_array_get(entries, json_array_size(entries) - 1), "name"));
		if (json_array_size(entries) == DSORT_LIST_PAGE && last != NULL)
			next = strdup(last);
	}
	json_decref(reply);
	free(url);
	free(t);
	free(p);
	free(b);
	return next;
}

/* Fan-out thread: every member of input shard i, from its owner. */
static void list_one(void *arg, int i)
{
	listing_t *l = arg;
	const char *shard = json_string_value(json_array_get(l->inputs, (size_t)i));
	const ft_node_t *owner = ft_smap_owner(l->smap, "ais", l->bucket, shard, strlen(shard));
	char *token = strdup("");
	int found = 0;

	l->members[i] = json_array();
	while (token != NULL && owner != NULL && l->status[i] == 0) {
		char *next = list_members(l, i, owner, shard, token, &found);
		free(token);
		token = next;
	}
	free(token);
	if (l->status[i] != 0)
		return;
	if (owner == NULL) {
		l->status[i] = 503;
		snprintf(l->why[i], sizeof(l->why[i]), "the cluster map has no targets");
	} else if (!found) {
		l->status[i] = 404;
		snprintf(l->why[i], sizeof(l->why[i]), "input shard \"%s\" does not exist", shard);
	} else if (json_array_size(l->members[i]) == 0) {
		l->status[i] = 422;
		snprintf(l->why[i], sizeof(l->why[i]),
			 "input shard \"%s\" has no readable members (corrupt, truncated, empty or not an archive)",
			 shard);
	}
}

/* The input shard names under prefix (shard extensions only), sorted; NULL after responding. */
static json_t *list_inputs(px_t *px, ft_req_t *r, const char *bucket, const char *prefix)
{
	json_t *out = json_array();
	char *token = strdup("");
	char why[400];
	int status = 0;
	bool more = true;

	while (more && token != NULL) {
		json_t *entries = NULL;
		if (px_list_page(px, bucket, prefix, token, DSORT_LIST_PAGE, &entries, &more, &status, why,
				 sizeof(why)) != 0) {
			ft_resp_error(r, status, "dsort: listing the input shards: %s", why);
			free(token);
			json_decref(out);
			return NULL;
		}
		for (size_t i = 0; i < json_array_size(entries); i++) {
			const char *n = json_string_value(json_object_get(json_array_get(entries, i), "name"));
			if (n != NULL && shard_name(n))
				json_array_append_new(out, json_string(n));
		}
		const char *last = json_string_value(
			json_object_get(json_array_get(entries, json_array_size(entries) - 1), "name"));
		free(token);
		token = more && last != NULL ? strdup(last) : NULL;
		json_decref(entries);
	}
	free(token);
	if (json_array_size(out) == 0) {
		ft_resp_error(r, 404, "dsort: no input shards under prefix \"%s\"", prefix);
		json_decref(out);
		return NULL;
	}
	return out;
}

/* The sample key of a member name: up to the first '.' of its last segment. */
static size_t key_len(const char *name)
{
	const char *slash = strrchr(name, '/');
	const char *dot = strchr(slash ? slash + 1 : name, '.');

	return dot ? (size_t)(dot - name) : strlen(name);
}

/* Groups the members of every input into records (*recs, *n); 0, or the status with why. */
static int group(const json_t *inputs, json_t *const *members, rec_t **recs, size_t *n, char *why, size_t cap)
{
	json_t *by_key = json_object(), *seen = json_object();
	size_t total = 0;
	int st = 0;

	for (size_t i = 0; i < json_array_size(inputs); i++)
		total += json_array_size(members[i]);
	*recs = calloc(total + 1, sizeof(**recs));
	*n = 0;
	if (*recs == NULL || by_key == NULL || seen == NULL) {
		snprintf(why, cap, "out of memory");
		st = 500;
	}
	for (size_t i = 0; st == 0 && i < json_array_size(inputs); i++) {
		for (size_t k = 0; st == 0 && k < json_array_size(members[i]); k++) {
			const json_t *m = json_array_get(members[i], k);
			const char *name = json_string_value(json_array_get(m, 0));
			json_int_t size = json_integer_value(json_array_get(m, 1));
			const json_t *prev = json_object_get(seen, name);
			if (prev != NULL) {
				snprintf(why, cap, "member \"%s\" is in input shards \"%s\" and \"%s\"", name,
					 json_string_value(prev), json_string_value(json_array_get(inputs, i)));
				st = 400;
				break;
			}
			json_object_set_new(seen, name, json_string(json_string_value(json_array_get(inputs, i))));
			char *key = strndup(name, key_len(name));
			const json_t *at = key != NULL ? json_object_get(by_key, key) : NULL;
			rec_t *rec = at != NULL ? &(*recs)[json_integer_value(at)] : &(*recs)[*n];
			if (at == NULL) {
				json_object_set_new(by_key, key, json_integer((json_int_t)(*n)++));
				rec->key = key;
				rec->members = json_array();
				rec->pos = INT64_MAX;
			} else {
				free(key);
			}
			json_array_append_new(rec->members, json_pack("[I, s, I]", (json_int_t)i, name, size));
			rec->size += size;
		}
	}
	json_decref(by_key);
	json_decref(seen);
	return st;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const rec_t *)a)->key, ((const rec_t *)b)->key);
}

static int cmp_pos(const void *a, const void *b)
{
	const rec_t *x = a, *y = b;

	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* splitmix64: the shuffle's generator, the same sequence for the same seed on every build. */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Fisher-Yates over recs (alphanumeric first, so the result depends on the seed only). */
static void shuffle(rec_t *recs, size_t n, uint64_t seed)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(next_rand(&seed) % i);
		rec_t t = recs[i - 1];
		recs[i - 1] = recs[j];
		recs[j] = t;
	}
}

/*
 * Reads the order file (an object of the bucket) into key -> position: a JSON array of keys, a JSON
 * object key -> number, or text/CSV with the key as the first field of each line. 0, or the status.
 */
static int read_order(const ft_smap_t *smap, const char *bucket, const char *obj, json_t *pos, char *why, size_t cap)
{
	ft_strbuf_t body = {0};
	int st = px_object_read(smap, "ais", bucket, obj, "order_file", DSORT_TIMEOUT_MS, &body, why, cap);

	if (st == 0 && px_order_parse(body.p, body.len, pos) != 0) {
		snprintf(why, cap, "order_file \"%s\" lists no keys", obj);
		st = 400;
	}
	ft_strbuf_free(&body);
	return st;
}

/* Cuts the ordered records into the output names of spec; into msg "objnames" and "outputs". 0 or the status. */
static int pack(const rec_t *recs, size_t n, const json_t *spec, json_t *msg, char *why, size_t cap)
{
	const json_t *names = json_object_get(spec, "outputs");
	int64_t limit = json_integer_value(json_object_get(spec, "shard_size")), cur = 0;
	json_t *objnames = json_array(), *outputs = json_object(), *members = NULL;
	size_t used = 0;

	json_object_set_new(msg, "objnames", objnames);
	json_object_set_new(msg, "outputs", outputs);
	for (size_t i = 0; i < n; i++) {
		if (members == NULL) {
			if (used == json_array_size(names)) {
				snprintf(why, cap,
					 "output_template gives %zu names, too few for the records at shard_size "
					 "%" PRId64 " (%zu records placed of %zu)",
					 json_array_size(names), limit, i, n);
				return 400;
			}
			const char *name = json_string_value(json_array_get(names, used++));
			members = json_array();
			json_array_append_new(objnames, json_string(name));
			json_object_set_new(outputs, name, members);
			cur = 0;
		}
		json_array_extend(members, recs[i].members);
		cur += recs[i].size;
		if (cur >= limit)
			members = NULL;
	}
	return 0;
}

/* Orders recs as spec says (order file read from the bucket); 0, or the status with why. */
static int order(const ft_smap_t *smap, const char *bucket, const json_t *spec, rec_t *recs, size_t n, char *why,
		 size_t cap)
{
	const char *how = json_string_value(json_object_get(spec, "order"));

	qsort(recs, n, sizeof(*recs), cmp_key);
	if (strcmp(how, "shuffle") == 0) {
		shuffle(recs, n, (uint64_t)json_integer_value(json_object_get(spec, "seed")));
	} else if (strcmp(how, "file") == 0) {
		json_t *pos = json_object();
		int st =
			read_order(smap, bucket, json_string_value(json_object_get(spec, "order_file")), pos, why, cap);
		for (size_t i = 0; st == 0 && i < n; i++) {
			const json_t *p = json_object_get(pos, recs[i].key);
			if (p != NULL)
				recs[i].pos = json_integer_value(p);
		}
		json_decref(pos);
		if (st != 0)
			return st;
		qsort(recs, n, sizeof(*recs), cmp_pos);
	}
	return 0;
}

/* Lists every input's members on the fan-out threads into members[]; 0, or the status with why. */
static int list_all(px_t *px, const ft_smap_t *smap, const char *bucket, const json_t *inputs, json_t **members,
		    char *why, size_t cap)
{
	size_t n = json_array_size(inputs);
	listing_t l = {.smap = smap, .bucket = bucket, .inputs = inputs, .members = members};
	int st = 0;

	l.status = calloc(n + 1, sizeof(*l.status));
	l.why = calloc(n + 1, sizeof(*l.why));
	if (l.status == NULL || l.why == NULL) {
		snprintf(why, cap, "out of memory");
		st = 500;
	} else {
		ft_fanout_run(px->fanout, list_one, &l, (int)n);
	}
	for (size_t i = 0; st == 0 && i < n; i++)
		if (l.status[i] != 0) {
			st = l.status[i];
			snprintf(why, cap, "%s", l.why[i]);
		}
	free(l.status);
	free(l.why);
	return st;
}

/* Worker: the plan into msg ("inputs", "objnames", "outputs"), "spec" removed. 0, or -1 after responding. */
static int dsort_prepare(px_t *px, ft_req_t *r, json_t *msg)
{
	const char *bucket = json_string_value(json_object_get(msg, "bucket"));
	json_t *spec = json_incref(json_object_get(msg, "spec"));
	json_t *inputs = json_incref(json_object_get(spec, "inputs")), **members = NULL;
	ft_smap_t *smap = ft_smap_current();
	rec_t *recs = NULL;
	size_t n = 0, n_in = 0;
	char why[800];
	int st = 0;

	json_object_del(msg, "spec");
	if (inputs == NULL &&
	    (inputs = list_inputs(px, r, bucket, json_string_value(json_object_get(spec, "prefix")))) == NULL)
		goto out;
	n_in = json_array_size(inputs);
	members = calloc(n_in + 1, sizeof(*members));
	st = members == NULL ? 500 : list_all(px, smap, bucket, inputs, members, why, sizeof(why));
	if (st == 0)
		st = group(inputs, members, &recs, &n, why, sizeof(why));
	if (st == 0)
		st = order(smap, bucket, spec, recs, n, why, sizeof(why));
	if (st == 0)
		st = pack(recs, n, spec, msg, why, sizeof(why));
	if (st == 0)
		json_object_set(msg, "inputs", inputs);
	size_t len = st == 0 ? json_dumpb(msg, NULL, 0, JSON_COMPACT) : 0;
	if (len > DSORT_MSG_MAX) {
		snprintf(why, sizeof(why),
			 "the plan of %zu records is %zu bytes, over the %u the job message carries: reshard in "
			 "parts (by prefix or template)",
			 n, len, DSORT_MSG_MAX);
		st = 413;
	}
	if (members == NULL)
		snprintf(why, sizeof(why), "out of memory");
	if (st != 0)
		ft_resp_error(r, st, "dsort: %s", why);
	else
		ft_info("dsort %s: %zu input shards, %zu records into %zu output shards",
			json_string_value(json_object_get(msg, "id")), n_in, n,
			json_array_size(json_object_get(msg, "objnames")));
out:
	for (size_t i = 0; i < n; i++) {
		free(recs[i].key);
		json_decref(recs[i].members);
	}
	for (size_t i = 0; members != NULL && i < n_in; i++)
		json_decref(members[i]);
	free(members);
	free(recs);
	json_decref(inputs);
	json_decref(spec);
	ft_smap_put(smap);
	return st == 0 && inputs != NULL ? 0 : -1;
}

bool px_dsort_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *action,
		     const json_t *value)
{
	json_t *msg, *spec;
	const char *k;
	json_t *v;
	char id[48];

	if (action == NULL || strcmp(action, "dsort") != 0)
		return false;
	if (!json_is_object(value)) {
		ft_resp_error(r, 400, "dsort needs a value object (docs/jobs.md \"dsort\")");
		return true;
	}
	json_object_foreach((json_t *)value, k, v) {
		if (!known_key(k)) {
			ft_resp_error(r, 400,
				      "dsort: unknown field \"%s\" (known: template, prefix, to, output_template, "
				      "shard_size, order, order_file, seed)",
				      k);
			return true;
		}
	}
	ft_bmd_t *bmd = ft_bmd_current();
	int found = bmd != NULL && ft_bmd_find(bmd, provider, bucket) != NULL;
	ft_bmd_put(bmd);
	if (strcmp(provider, "ais") != 0) {
		ft_resp_error(r, 400, "dsort reads shards of ais buckets; \"%s\" is %s", bucket, provider);
		return true;
	}
	if (!found) {
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", provider, bucket);
		return true;
	}
	px_jobs_new_id(id, sizeof(id));
	msg = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "kind", "dsort", "provider", provider, "bucket", bucket);
	spec = json_object();
	if (msg == NULL || spec == NULL) {
		json_decref(msg);
		json_decref(spec);
		ft_resp_error(r, 500, "out of memory");
		return true;
	}
	json_object_set_new(msg, "spec", spec);
	if (check_input(r, value, spec) != 0 || check_output(r, value, spec) != 0 ||
	    check_to(r, value, bucket, msg) != 0) {
		json_decref(msg);
		return true;
	}
	px_jobs_submit(px, r, msg, dsort_prepare, false);
	return true;
}
