/* SPDX-License-Identifier: Apache-2.0 */
/* AIStore's wire shapes at the proxy: its listing message and msgpack BucketList, cluster map, BMD. */
#include "proxy.h"

#include <inttypes.h>
#include <msgpack.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/util.h"

/*
 * DESIGN
 * AIStore's clients (its Python SDK, CLI, aisloader) speak a protocol close to FastTier's native
 * API but not the same: options of a listing travel in a JSON action message in the body of the
 * GET, answers come as msgpack when asked for, the cluster map and the jobs have their own
 * documents. This module and aiswire_jobs.c, aiswire_mpu.c, aiswire_summ.c only translate: each decodes
 * AIStore's request into the arguments of FastTier's one implementation of the operation
 * (px_list_start, px_jobs_query, the targets' multipart endpoints) and encodes its answer in
 * AIStore's shape. No operation has a second code path here.
 * An action message is AIStore's when it carries a "name" field: AIStore's ActMsg always has one,
 * FastTier's own {"action","value"} never does. Such a message gets AIStore's answers (a job id as
 * bare text rather than {"job_id"}).
 */

#define AIS_ZERO_TIME "0001-01-01T00:00:00Z" /* Go's zero time.Time, AIStore's "not yet" */
#define AIS_ENTRY_PRESENT (1 << 6)           /* LsoEnt flags: the object is stored in the cluster */
#define AIS_ENTRY_IN_ARCH (1 << 7)           /* LsoEnt flags: a member of a shard ("<shard>/<member>") */
#define AIS_LIST_FLAG_CACHED (1 << 0)        /* LsoMsg flags: only what the cluster holds */
#define AIS_LIST_FLAG_ARCH_DIR (1 << 3)      /* LsoMsg flags: shards' members listed too (archive=true) */

bool px_ais_actmsg(const json_t *msg)
{
	return json_is_object(msg) && json_object_get(msg, "name") != NULL;
}

void px_ais_time(int64_t ns, char *out, size_t cap)
{
	struct tm tm;
	time_t s = (time_t)(ns / 1000000000);

	if (ns <= 0 || gmtime_r(&s, &tm) == NULL) {
		snprintf(out, cap, "%s", AIS_ZERO_TIME);
		return;
	}
	size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, cap - n, ".%06dZ", (int)(ns % 1000000000 / 1000));
}

/* ---- msgpack helpers ---- */

static void mp_str(msgpack_packer *pk, const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s != NULL ? s : "", n);
}

static void mp_kv_str(msgpack_packer *pk, const char *k, const char *v)
{
	mp_str(pk, k);
	mp_str(pk, v);
}

static void mp_kv_int(msgpack_packer *pk, const char *k, int64_t v)
{
	mp_str(pk, k);
	msgpack_pack_int64(pk, v);
}

/* A new id for a listing: prefix, the time and a sequence number. */
static void new_id(const char *prefix, char *out, size_t cap)
{
	static atomic_uint seq;

	snprintf(out, cap, "%s-%" PRIx64 "-%x", prefix, (uint64_t)ft_now_ns(), atomic_fetch_add(&seq, 1));
}

/* ---- listing: AIStore's LsoMsg in, LsoRes (BucketList) out ---- */

typedef struct {
	bool msgpack;  /* Accept: application/msgpack */
	char uuid[64]; /* the listing's id: the client's, or a new one on its first page (never "") */
} list_shape_t;

/* An object's access time as AIStore lists it by default (RFC 822, UTC). */
static void list_atime(const json_t *e, char *out, size_t cap)
{
	json_int_t ns = json_integer_value(json_object_get(e, "atime"));
	struct tm tm;
	time_t s = (time_t)(ns / 1000000000);

	out[0] = '\0';
	if (ns > 0 && gmtime_r(&s, &tm) != NULL)
		strftime(out, cap, "%d %b %y %H:%M UTC", &tm);
}

/* The entry's checksum: the stored one, else the backend's ETag (remote listings). */
static const char *list_cksum(const json_t *e)
{
	const char *cs = json_string_value(json_object_get(e, "checksum"));

	return cs != NULL ? cs : json_string_value(json_object_get(e, "etag"));
}

/* LsoEnt flags: present when an ais bucket lists it or a remote listing marks it cached; a shard's member. */
static int64_t list_flags(const json_t *e)
{
	const json_t *cached = json_object_get(e, "cached");

	return (cached == NULL || json_is_true(cached) ? AIS_ENTRY_PRESENT : 0) |
	       (json_is_true(json_object_get(e, "in_archive")) ? AIS_ENTRY_IN_ARCH : 0);
}

static void list_msgpack(ft_req_t *r, const json_t *entries, const char *token, const char *uuid)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	size_t n = json_array_size(entries);
	char atime[64];

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4);
	mp_kv_str(&pk, "UUID", uuid);
	mp_kv_str(&pk, "ContinuationToken", token);
	mp_kv_int(&pk, "Flags", 0);
	mp_str(&pk, "Entries");
	msgpack_pack_array(&pk, n);
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(entries, i);
		list_atime(e, atime, sizeof(atime));
		msgpack_pack_map(&pk, 6);
		mp_kv_str(&pk, "n", json_string_value(json_object_get(e, "name")));
		mp_kv_int(&pk, "s", json_integer_value(json_object_get(e, "size")));
		mp_kv_str(&pk, "cs", list_cksum(e));
		mp_kv_str(&pk, "v", json_string_value(json_object_get(e, "version")));
		mp_kv_str(&pk, "a", atime);
		mp_kv_int(&pk, "f", list_flags(e));
	}
	ft_resp_bytes(r, 200, "application/msgpack", sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

static void list_json(ft_req_t *r, const json_t *entries, const char *token, const char *uuid)
{
	json_t *out = json_array();
	char atime[64];

	for (size_t i = 0; out != NULL && i < json_array_size(entries); i++) {
		const json_t *e = json_array_get(entries, i);
		const char *v = json_string_value(json_object_get(e, "version"));
		const char *cs = list_cksum(e);
		list_atime(e, atime, sizeof(atime));
		json_array_append_new(
			out, json_pack("{s:O, s:I, s:s, s:s, s:s, s:I}", "name", json_object_get(e, "name"), "size",
				       json_integer_value(json_object_get(e, "size")), "checksum", cs ? cs : "",
				       "version", v ? v : "", "atime", atime, "flags", (json_int_t)list_flags(e)));
	}
	json_t *body = json_pack("{s:s, s:s, s:I, s:o}", "uuid", uuid, "continuation_token", token, "flags",
				 (json_int_t)0, "entries", out);
	if (body == NULL)
		ft_resp_error(r, 500, "out of memory");
	else
		ft_resp_json(r, 200, body);
}

static void list_encode(ft_req_t *r, const json_t *entries, const char *token, void *arg)
{
	const list_shape_t *shape = arg;

	if (shape->msgpack)
		list_msgpack(r, entries, token, shape->uuid);
	else
		list_json(r, entries, token, shape->uuid);
}

/* LsoMsg flags: a decimal string (the SDK) or a number (Go). -1 when neither. */
static int64_t lso_flags(const json_t *f)
{
	if (f == NULL || json_is_null(f))
		return 0;
	if (json_is_integer(f))
		return json_integer_value(f);
	const char *s = json_string_value(f);
	char *end;
	if (s == NULL)
		return -1;
	if (s[0] == '\0')
		return 0;
	long long v = strtoll(s, &end, 10);
	return *end == '\0' && v >= 0 ? v : -1;
}

/* Decodes LsoMsg {"prefix","pagesize","continuation_token","start_after","flags",...} into a; 0 or -1 (why). */
static int lso_decode(ft_req_t *r, const json_t *v, px_list_args_t *a, const char **why)
{
	const json_t *ps = json_object_get(v, "pagesize");
	const char *after = json_string_value(json_object_get(v, "start_after"));
	int64_t flags = lso_flags(json_object_get(v, "flags"));

	if (v != NULL && !json_is_null(v) && !json_is_object(v)) {
		*why = "the list message's value must be an object";
		return -1;
	}
	if (ps != NULL && !json_is_null(ps) && (!json_is_integer(ps) || json_integer_value(ps) < 0)) {
		*why = "pagesize must be a non-negative integer";
		return -1;
	}
	if (flags < 0) {
		*why = "flags must be a decimal bit mask";
		return -1;
	}
	a->prefix = ft_req_strdup(r, json_string_value(json_object_get(v, "prefix")) ?: "");
	a->token = ft_req_strdup(r, json_string_value(json_object_get(v, "continuation_token")) ?: "");
	if (a->token[0] == '\0' && after != NULL) /* names come after the token: start_after is the same */
		a->token = ft_req_strdup(r, after);
	a->pagesize = ps != NULL ? (int)(json_integer_value(ps) > 100000 ? 100000 : json_integer_value(ps)) : 0;
	a->archive = (flags & AIS_LIST_FLAG_ARCH_DIR) != 0;
	a->cached_only = (flags & AIS_LIST_FLAG_CACHED) != 0 || a->archive; /* members of what the cluster holds */
	return 0;
}

/* Go's strconv.ParseBool true ("1", "t", "T", "TRUE", "true", "True"), as AIStore reads its query flags. */
static bool go_true(const char *v)
{
	static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};

	for (size_t i = 0; v != NULL && i < sizeof(yes) / sizeof(yes[0]); i++)
		if (strcmp(v, yes[i]) == 0)
			return true;
	return false;
}

/* ---- GET /v1/buckets/B with an action message ---- */

typedef struct {
	px_t *px;
	const char *provider;
	char *bucket;
	list_shape_t shape;
} bucket_get_t;

static void bucket_get_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	bucket_get_t *g = arg;
	json_error_t jerr;
	json_t *msg = NULL;
	const char *why = NULL;

	if (err != 0) {
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
		return;
	}
	if (len > 0 && (msg = json_loadb(body, len, 0, &jerr)) == NULL) {
		ft_resp_error(r, 400, "malformed JSON action message: %s", jerr.text);
		return;
	}
	const char *action = len > 0 ? json_string_value(json_object_get(msg, "action")) : "list";
	const json_t *value = json_object_get(msg, "value");
	if (action == NULL) {
		ft_resp_error(r, 400, "action message must be an object with a string \"action\"");
	} else if (strcmp(action, "list") == 0) {
		px_list_args_t a = {.encode = list_encode, .encode_arg = &g->shape};
		const char *uuid = json_string_value(json_object_get(value, "uuid"));
		/* AIStore's clients stop paging on an empty token only once a listing has an id */
		if (uuid != NULL && uuid[0] != '\0' && strlen(uuid) < sizeof(g->shape.uuid))
			snprintf(g->shape.uuid, sizeof(g->shape.uuid), "%s", uuid);
		else
			new_id("lst", g->shape.uuid, sizeof(g->shape.uuid));
		if (lso_decode(r, value, &a, &why) != 0)
			ft_resp_error(r, 400, "bad list message: %s", why);
		else
			px_list_start(g->px, r, g->provider, g->bucket, &a);
	} else if (strcmp(action, "summary-bck") == 0) {
		px_ais_summary(g->px, r, g->provider, g->bucket, json_string_value(json_object_get(value, "prefix")),
			       json_string_value(json_object_get(value, "uuid")), false,
			       !json_is_true(json_object_get(value, "cached")));
	} else {
		ft_resp_error(r, 400,
			      "unknown action \"%s\" for GET of a bucket (expected \"list\" or \"summary-bck\")",
			      action);
	}
	json_decref(msg);
}

/* Whether the client asked for msgpack. */
static bool wants_msgpack(ft_req_t *r)
{
	const char *accept = ft_req_header(r, "Accept");

	return accept != NULL && strstr(accept, "application/msgpack") != NULL;
}

bool px_ais_bucket(px_t *px, ft_req_t *r, const char *provider, const char *bucket)
{
	ft_method_t m = ft_req_method(r);

	if (m == FT_HTTP_GET && (ft_req_content_length(r) != 0 || wants_msgpack(r))) {
		bucket_get_t *g = ft_req_alloc(r, sizeof(*g));
		memset(g, 0, sizeof(*g));
		g->px = px;
		g->provider = provider;
		g->bucket = ft_req_strdup(r, bucket);
		g->shape.msgpack = wants_msgpack(r);
		if (ft_req_content_length(r) == 0)
			bucket_get_body(r, g, "", 0, 0);
		else
			ft_req_read_body_all(r, PX_BODY_MAX, bucket_get_body, g);
		return true;
	}
	if (m == FT_HTTP_HEAD && (ft_req_query(r, "bsumm_remote") != NULL || ft_req_query(r, "uuid") != NULL)) {
		px_ais_summary(px, r, provider, bucket, NULL, ft_req_query(r, "uuid"), true,
			       go_true(ft_req_query(r, "bsumm_remote")));
		return true;
	}
	return px_ais_archive(px, r, provider, bucket) || px_ais_bck_to(px, r, provider, bucket);
}

/* ---- DELETE /v1/buckets/B with AIStore's actions ---- */

bool px_ais_evict_forgets(ft_req_t *r, const char *provider, const json_t *msg)
{
	const char *action = json_string_value(json_object_get(msg, "action"));
	const char *keep = ft_req_query(r, "keep_bck_md");

	if (action == NULL || strcmp(action, "evict-remote-bck") != 0 || strcmp(provider, "ais") == 0)
		return false;
	/* keep_bck_md as Go's ParseBool reads it (Python's str(True) is "True") */
	return keep == NULL || !go_true(keep);
}

/* ---- GET /v1/daemon?what=...: this proxy's view in AIStore's documents ---- */

/* AIStore's NetInfo of a URL http://host:port. */
static json_t *net_info(const char *url)
{
	const char *host = strstr(url, "://");
	const char *colon;
	char h[FT_URL_MAX] = "", port[16] = "";

	host = host != NULL ? host + 3 : url;
	colon = strrchr(host, ':');
	if (colon != NULL) {
		snprintf(h, sizeof(h), "%.*s", (int)(colon - host), host);
		snprintf(port, sizeof(port), "%.15s", colon + 1);
		char *slash = strchr(port, '/');
		if (slash != NULL)
			*slash = '\0';
	} else {
		snprintf(h, sizeof(h), "%s", host);
	}
	return json_pack("{s:s, s:s, s:s}", "node_ip_addr", h, "daemon_port", port, "direct_url", url);
}

/* AIStore's Snode. id_digest is FastTier's HRW digest (63 bits: JSON integers are signed). */
static json_t *snode(const ft_node_t *n)
{
	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:i, s:I}", "daemon_id", n->id, "daemon_type",
			 n->type == FT_NODE_PROXY ? "proxy" : "target", "public_net", net_info(n->public_url),
			 "intra_control_net", net_info(n->control_url), "intra_data_net", net_info(n->control_url),
			 "flags", 0, "id_digest", (json_int_t)(n->digest & INT64_MAX));
}

json_t *px_ais_smap(const ft_smap_t *m)
{
	json_t *pmap = json_object(), *tmap = json_object(), *primary = NULL;
	char version[24];

	for (int i = 0; i < m->n_proxies; i++) {
		json_object_set_new(pmap, m->proxies[i].id, snode(&m->proxies[i]));
		if (strcmp(m->proxies[i].id, m->primary) == 0)
			primary = snode(&m->proxies[i]);
	}
	for (int i = 0; i < m->n_targets; i++)
		json_object_set_new(tmap, m->targets[i].id, snode(&m->targets[i]));
	snprintf(version, sizeof(version), "%" PRId64, m->version);
	return json_pack("{s:o, s:o, s:o, s:s, s:s, s:s}", "pmap", pmap, "tmap", tmap, "proxy_si",
			 primary != NULL ? primary : json_object(), "uuid", m->uuid, "creation_time", "", "version",
			 version);
}

/* AIStore's BMD: providers -> namespaces ("#" the default one) -> buckets -> properties. */
static json_t *ais_bmd(const ft_bmd_t *b)
{
	json_t *providers = json_object();
	char version[24];

	for (int i = 0; i < b->n; i++) {
		const ft_bucket_t *bk = &b->buckets[i];
		json_t *ns = json_object_get(providers, bk->provider);
		if (ns == NULL) {
			ns = json_pack("{s:{}}", "#");
			json_object_set_new(providers, bk->provider, ns);
		}
		json_t *props = ft_bucket_to_json(bk);
		json_object_set_new(props, "created", json_integer(bk->created_ns));
		json_object_set_new(json_object_get(ns, "#"), bk->name, props);
	}
	snprintf(version, sizeof(version), "%" PRId64, b->version);
	return json_pack("{s:o, s:s, s:s}", "providers", providers, "uuid", b->uuid, "version", version);
}

void px_ais_daemon(px_t *px, ft_req_t *r)
{
	const char *what = ft_req_query(r, "what");
	ft_method_t m = ft_req_method(r);
	json_t *doc = NULL;

	if (m != FT_HTTP_GET && m != FT_HTTP_HEAD) {
		ft_resp_header(r, "Allow", "GET, HEAD");
		ft_resp_error(r, 405, "method %s not allowed on /v1/daemon (allowed: GET, HEAD)",
			      ft_req_method_name(r));
		return;
	}
	if (what == NULL || strcmp(what, "smap") == 0) {
		ft_smap_t *smap = ft_smap_current();
		doc = smap != NULL ? px_ais_smap(smap) : NULL;
		ft_smap_put(smap);
	} else if (strcmp(what, "bmd") == 0) {
		ft_bmd_t *bmd = ft_bmd_current();
		doc = bmd != NULL ? ais_bmd(bmd) : NULL;
		ft_bmd_put(bmd);
	} else if (strcmp(what, "snode") == 0) {
		ft_smap_t *smap = ft_smap_current();
		const ft_node_t *self = smap != NULL ? ft_smap_find(smap, px->id) : NULL;
		doc = self != NULL ? snode(self) : NULL;
		ft_smap_put(smap);
	} else {
		ft_resp_error(r, 400, "what=\"%s\" is not served here (expected smap, bmd or snode)", what);
		return;
	}
	if (doc == NULL)
		ft_resp_error(r, 503, "no cluster map yet");
	else
		ft_resp_json(r, 200, doc);
}
