/* SPDX-License-Identifier: Apache-2.0 */
/* AIStore's native multipart upload at the proxy (mpt-upload, parts, mpt-complete, mpt-abort) over the targets' uploads. */
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "auth/auth.h"
#include "auth/urlsig.h"
#include "base/codec.h"
#include "base/strbuf.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * AIStore's client starts an upload with POST /v1/objects/B/O {"action":"mpt-upload"} and reads
 * the upload id from the body; parts are PUT ?uploadId=ID&partNumber=N; complete is POST
 * ?uploadId=ID {"action":"mpt-complete","value":[{"part-number":N,"etag":""}...]}, abort DELETE
 * ?uploadId=ID. FastTier keeps uploads on the object's owner (target/obj/mpu*.c) as the S3 front
 * end does; here the proxy makes the id, starts, completes and aborts there, and redirects each
 * part to the owner under the target's own query (mpu=ID&part=N). The client lists no ETags:
 * complete takes each part's from the owner's list of parts. The rules are the owner's (S3's:
 * every part but the last at least 5 MiB).
 * With auth on, the owner takes these calls only with the cluster's word for them: the proxy's own
 * calls carry a URL signature for any method on that object (they never leave the cluster), a part's
 * redirect one for PUT, as every object redirect does (objects.c).
 */

#define MPU_CALL_TIMEOUT_MS 600000 /* completion concatenates up to 10000 parts */
#define MPU_ID_RAW 18              /* random bytes of an upload id: 24 characters */

typedef struct {
	px_t *px;
	char *url;                           /* the owner's URL of the object, without a query (ft_req_alloc memory) */
	char *query;                         /* "provider=P&mpu=ID" */
	const char *provider, *bucket, *obj; /* the object the calls are signed for (request-owned) */
	size_t obj_len;
	char id[40];
	json_t *parts; /* complete: the part numbers listed (owned; released by op_done) */
	enum { MPU_START, MPU_COMPLETE, MPU_ABORT } step;
} mpu_op_t;

static void op_done(void *arg)
{
	mpu_op_t *op = arg;

	json_decref(op->parts);
	op->parts = NULL;
}

/* Forwards a target's failure: its status and message. */
static void target_error(ft_req_t *r, int rc, long status, const json_t *reply, const char *err, const char *what)
{
	const char *msg = json_string_value(json_object_get(reply, "message"));

	if (rc != 0)
		ft_resp_error(r, 502, "%s: the object's target did not answer: %s", what, err);
	else
		ft_resp_error(r, status >= 400 && status < 600 ? (int)status : 502, "%s: %s", what,
			      msg != NULL ? msg : "failed");
}

static int call(const mpu_op_t *op, const char *method, const char *action, const json_t *body, long *status,
		json_t **reply, char *err, size_t cap)
{
	ft_strbuf_t url = {0};
	int rc;

	ft_strbuf_addf(&url, "%s?%s&action=%s", op->url, op->query, action);
	if (ft_auth()->enabled) /* the proxy speaks for a client it authenticated */
		ft_urlsig_append(&url, true, ft_auth()->url_key, FT_URLSIG_ANY_METHOD, op->provider, op->bucket,
				 op->obj, op->obj_len, time(NULL));
	if (url.failed) {
		ft_strbuf_free(&url);
		snprintf(err, cap, "out of memory");
		return -1;
	}
	rc = ft_client_json(method, url.p, body, MPU_CALL_TIMEOUT_MS, status, reply, err, cap);
	ft_strbuf_free(&url);
	return rc;
}

/* {"parts":[{"part","etag"}...]} for the listed part numbers, ETags from the owner's parts; NULL with why. */
static json_t *complete_body(const json_t *listed, const json_t *stored, char *why, size_t cap)
{
	json_t *out = json_array();
	const json_t *have = json_object_get(stored, "parts");
	int prev = 0;

	for (size_t i = 0; out != NULL && i < json_array_size(listed); i++) {
		int want = (int)json_integer_value(json_array_get(listed, i));
		const char *etag = NULL;
		if (want <= prev) {
			snprintf(why, cap, "part numbers must be listed in ascending order, each once");
			goto fail;
		}
		prev = want;
		for (size_t k = 0; k < json_array_size(have) && etag == NULL; k++) {
			const json_t *p = json_array_get(have, k);
			if (json_integer_value(json_object_get(p, "part")) == want)
				etag = json_string_value(json_object_get(p, "etag"));
		}
		if (etag == NULL) {
			snprintf(why, cap, "part %d was not uploaded", want);
			goto fail;
		}
		json_array_append_new(out, json_pack("{s:i, s:s}", "part", want, "etag", etag));
	}
	return json_pack("{s:o}", "parts", out);
fail:
	json_decref(out);
	return NULL;
}

static void mpu_work(ft_req_t *r, void *arg)
{
	mpu_op_t *op = arg;
	json_t *reply = NULL, *body = NULL;
	long status = 0;
	char err[512];
	int rc;

	switch (op->step) {
	case MPU_START:
		rc = call(op, "POST", "start", NULL, &status, &reply, err, sizeof(err));
		if (rc != 0 || status != 200)
			target_error(r, rc, status, reply, err, "mpt-upload");
		else
			ft_resp_bytes(r, 200, "text/plain", op->id, strlen(op->id));
		break;
	case MPU_COMPLETE:
		rc = call(op, "GET", "parts&max_parts=10000", NULL, &status, &reply, err, sizeof(err));
		if (rc != 0 || status != 200) {
			target_error(r, rc, status, reply, err, "mpt-complete");
			break;
		}
		body = complete_body(op->parts, reply, err, sizeof(err));
		json_decref(reply);
		reply = NULL;
		if (body == NULL) {
			ft_resp_error(r, 400, "mpt-complete of upload %s: %s", op->id, err);
			break;
		}
		rc = call(op, "POST", "complete", body, &status, &reply, err, sizeof(err));
		if (rc != 0 || status != 200)
			target_error(r, rc, status, reply, err, "mpt-complete");
		else
			ft_resp_bytes(r, 200, NULL, NULL, 0);
		break;
	case MPU_ABORT:
		rc = call(op, "POST", "abort", NULL, &status, &reply, err, sizeof(err));
		if (rc != 0 || status != 200)
			target_error(r, rc, status, reply, err, "mpt-abort");
		else
			ft_resp_bytes(r, 200, NULL, NULL, 0);
		break;
	}
	json_decref(body);
	json_decref(reply);
}

/* The part numbers of mpt-complete's value [{"part-number":N,...}]; NULL when malformed. */
static json_t *listed_parts(const json_t *value)
{
	json_t *out = json_array();

	if (!json_is_array(value) || json_array_size(value) == 0 || json_array_size(value) > 10000)
		goto fail;
	for (size_t i = 0; i < json_array_size(value); i++) {
		const json_t *n = json_object_get(json_array_get(value, i), "part-number");
		if (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > 10000)
			goto fail;
		json_array_append_new(out, json_integer(json_integer_value(n)));
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

typedef struct {
	px_t *px;
	const char *provider, *bucket, *obj;
	size_t obj_len;
	const ft_node_t *owner; /* in smap */
	ft_smap_t *smap;        /* reference held until the response */
} mpu_req_t;

static void req_done(void *arg)
{
	mpu_req_t *q = arg;

	ft_smap_put(q->smap);
	q->smap = NULL;
}

/* The owner's URL of the object (the client's encoding of the path kept). */
static char *owner_url(ft_req_t *r, const mpu_req_t *q)
{
	const char *target = ft_req_target(r);
	const char *path = strstr(target, "/v1/");
	size_t plen = strcspn(path != NULL ? path : "", "?");
	size_t n = strlen(q->owner->public_url) + plen + 1;
	char *url = ft_req_alloc(r, n);

	snprintf(url, n, "%s%.*s", q->owner->public_url, (int)plen, path != NULL ? path : "");
	return url;
}

static mpu_op_t *op_new(ft_req_t *r, const mpu_req_t *q, const char *id)
{
	mpu_op_t *op = ft_req_alloc(r, sizeof(*op));
	size_t n = strlen(q->provider) + strlen(id) + 32;

	memset(op, 0, sizeof(*op));
	op->px = q->px;
	op->url = owner_url(r, q);
	op->provider = q->provider;
	op->bucket = q->bucket;
	op->obj = q->obj;
	op->obj_len = q->obj_len;
	op->query = ft_req_alloc(r, n);
	snprintf(op->query, n, "provider=%s&mpu=%s", q->provider, id);
	snprintf(op->id, sizeof(op->id), "%s", id);
	ft_req_on_done(r, op_done, op);
	return op;
}

/* Whether id can be an upload id the proxy made (anything else is no upload of ours). */
static bool id_ok(const char *id)
{
	size_t n = strlen(id);

	if (n < 16 || n >= 40)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
		      c == '_'))
			return false;
	}
	return true;
}

static void post_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	mpu_req_t *q = arg;
	const char *id = ft_req_query(r, "uploadId");
	json_t *msg = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	const char *action = json_string_value(json_object_get(msg, "action"));
	mpu_op_t *op;

	if (err != 0) {
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
		goto out;
	}
	if (id == NULL && (action == NULL || strcmp(action, "mpt-upload") != 0)) {
		/* not a multipart step: the owner's, as any object request (the client re-sends the body) */
		px_object_redirect_provider(q->px, r, q->provider, q->bucket, q->obj, q->obj_len);
		goto out;
	}
	if (id == NULL) {
		uint8_t raw[MPU_ID_RAW];
		char fresh[FT_BASE64_LEN(MPU_ID_RAW) + 1];
		if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
			ft_resp_error(r, 500, "no random bytes for an upload id");
			goto out;
		}
		ft_base64url_encode(raw, sizeof(raw), fresh);
		op = op_new(r, q, fresh);
		op->step = MPU_START;
		ft_req_defer(r, mpu_work, op);
		goto out;
	}
	if (action == NULL || strcmp(action, "mpt-complete") != 0) {
		ft_resp_error(r, 400, "POST with uploadId: expected {\"action\":\"mpt-complete\",\"value\":[...]}");
		goto out;
	}
	json_t *parts = listed_parts(json_object_get(msg, "value"));
	if (parts == NULL) {
		ft_resp_error(r, 400, "mpt-complete: value must list 1..10000 parts as [{\"part-number\": N}, ...]");
		goto out;
	}
	op = op_new(r, q, id);
	op->parts = parts;
	op->step = MPU_COMPLETE;
	ft_req_defer(r, mpu_work, op);
out:
	json_decref(msg);
}

/* DELETE ?uploadId with {"action":"mpt-abort"}: the body says nothing more. */
static void abort_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	(void)body;
	(void)len;
	if (err != 0)
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
	else
		ft_req_defer(r, mpu_work, arg);
}

/* PUT of a part: to the owner, under the target's query. */
static void part_redirect(ft_req_t *r, const mpu_req_t *q, const char *id, const char *part)
{
	char *end;
	long n = strtol(part, &end, 10);

	if (part[0] == '\0' || *end != '\0' || n < 1 || n > 10000) {
		ft_resp_error(r, 400, "partNumber must be 1..10000, got \"%s\"", part);
		return;
	}
	ft_strbuf_t loc = {0};
	ft_strbuf_addf(&loc, "%s?provider=%s&mpu=%s&part=%ld", owner_url(r, q), q->provider, id, n);
	if (ft_auth()->enabled) /* clients drop Authorization on a redirect to another port */
		ft_urlsig_append(&loc, true, ft_auth()->url_key, "PUT", q->provider, q->bucket, q->obj, q->obj_len,
				 time(NULL));
	if (loc.failed) {
		ft_strbuf_free(&loc);
		ft_resp_error(r, 500, "out of memory");
		return;
	}
	char *location = ft_req_alloc(r, loc.len + 1);
	memcpy(location, loc.p, loc.len + 1);
	ft_strbuf_free(&loc);
	ft_resp_redirect(r, 307, location);
}

bool px_ais_object_mpu(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *obj, size_t obj_len)
{
	ft_method_t m = ft_req_method(r);
	const char *id = ft_req_query(r, "uploadId");
	const char *part = ft_req_query(r, "partNumber");
	ft_bmd_t *bmd;

	if (id == NULL && (m != FT_HTTP_POST || ft_req_query(r, "mpu") != NULL || ft_req_content_length(r) == 0))
		return false; /* not AIStore's multipart: the usual redirect */
	bmd = ft_bmd_current();
	bool known = bmd != NULL && ft_bmd_find(bmd, provider, bucket) != NULL;
	ft_bmd_put(bmd);
	if (!known) {
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", provider, bucket);
		return true;
	}
	if (id != NULL && !id_ok(id)) {
		ft_resp_error(r, 404, "upload \"%s\" of %s://%s does not exist", id, provider, bucket);
		return true;
	}
	mpu_req_t *q = ft_req_alloc(r, sizeof(*q));
	q->px = px;
	q->provider = provider;
	q->bucket = ft_req_strdup(r, bucket);
	q->obj = obj;
	q->obj_len = obj_len;
	q->smap = ft_smap_current();
	q->owner = q->smap != NULL ? ft_smap_owner(q->smap, provider, bucket, obj, obj_len) : NULL;
	ft_req_on_done(r, req_done, q);
	if (q->owner == NULL) {
		ft_resp_error(r, 503, "no targets in the cluster map");
		return true;
	}
	if (m == FT_HTTP_PUT && id != NULL && part != NULL) {
		part_redirect(r, q, id, part);
	} else if (m == FT_HTTP_DELETE && id != NULL) {
		mpu_op_t *op = op_new(r, q, id);
		op->step = MPU_ABORT;
		if (ft_req_content_length(r) == 0)
			ft_req_defer(r, mpu_work, op);
		else
			ft_req_read_body_all(r, PX_BODY_MAX, abort_body, op);
	} else if (m == FT_HTTP_POST) {
		ft_req_read_body_all(r, PX_BODY_MAX, post_body, q);
	} else {
		ft_resp_error(r, 400, "%s with uploadId: expected PUT ?partNumber=N, POST mpt-complete or DELETE",
			      ft_req_method_name(r));
	}
	return true;
}
