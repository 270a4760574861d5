/* SPDX-License-Identifier: Apache-2.0 */
/* S3 multipart upload at the proxy: create, upload part, complete, abort, list parts and uploads, via the owning target. */
#include "s3/s3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <curl/curl.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/redact.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * An upload lives on the target that owns its object (HRW in the current map), which keeps the
 * parts and builds the object (target/mpu.c, docs/api.md "Multipart upload"). The proxy makes
 * the upload id (random, URL-safe), passes CreateMultipartUpload's Content-Type and x-amz-meta-*
 * to the target's start (kept for the object), relays part bodies with px_s3_put_to (verified,
 * streamed, bounded memory) or, for UploadPartCopy, a GET of the source through copy.c's copy
 * relay, turns the CompleteMultipartUpload XML into the target's JSON part list, and
 * turns the targets' JSON replies into S3 XML. Errors the target found carry their S3 code
 * ("code" in its JSON error), so the checks (InvalidPartOrder, InvalidPart, EntityTooSmall,
 * NoSuchUpload) live in one place, next to the parts. ListMultipartUploads asks every target's
 * control port (GET /v1/mpu) in parallel and merges. Everything that talks to a target runs on a
 * worker (px_s3_defer); the loop thread only validates the query.
 *
 * A completion concatenates the whole object on the target, which may outlast a client's read
 * timeout (60 s for boto3 and the aws CLI). As S3 does, once it has taken MPU_KEEPALIVE_AFTER_MS
 * the proxy sends 200 with the XML declaration and then a space every MPU_KEEPALIVE_EVERY_MS;
 * the result follows in that body, and an error becomes an <Error> document inside the 200
 * (which the SDKs check for in CompleteMultipartUpload replies).
 */

#define MPU_ID_BYTES 24 /* 32 base64url characters, 192 random bits */
#define MPU_ID_MIN 16   /* the target's accepted length range */
#define MPU_ID_MAX 128
#define MPU_COMPLETE_TIMEOUT_MS (6 * 3600 * 1000) /* concatenating a very large object takes time */
#define MPU_LIST_TIMEOUT_MS 10000
#define MPU_MAX_LIST 1000 /* S3's largest page of parts or uploads */
#define MPU_PART_MAX_SIZE (5ull << 30)
#define MPU_KEEPALIVE_AFTER_MS 3000 /* a completion this slow starts the 200 early ... */
#define MPU_KEEPALIVE_EVERY_MS 3000 /* ... and sends a space this often */
#define MPU_REPLY_MAX (64u << 10)   /* largest target reply to a completion */

/* ---- helpers ---- */

static int id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Whether id can be one of ours (anything else is an unknown upload). */
static int upload_id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n < MPU_ID_MIN || n > MPU_ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!id_char(id[i]))
			return 0;
	return 1;
}

/* A new upload id: MPU_ID_BYTES random bytes in base64url without padding. 0, or -1. */
static int upload_id_new(char *out, size_t cap)
{
	uint8_t raw[MPU_ID_BYTES];

	if (cap < FT_BASE64_LEN(MPU_ID_BYTES) + 1 || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -1;
	ft_base64url_encode(raw, sizeof(raw), out); /* a multiple of 3 bytes: no padding to leave out */
	return 0;
}

/* Strict decimal in [0, 2^31); -1 when s is not one. */
static long parse_count(const char *s)
{
	long v = 0;

	if (!s || !*s || strlen(s) > 10)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v > 0x7fffffffL ? -1 : v;
}

static const char *owner_name(const px_s3_req_t *q)
{
	return q->anonymous || !q->auth.access_key[0] ? "anonymous" : q->auth.access_key;
}

/*
 * The S3 error of a target's non-200 reply: the S3 code the target named (its multipart
 * endpoints always name one), else by status: 404 means no_such (routing found no bucket), a 307
 * a map that changed under the request.
 */
static px_s3_err_t target_err(long status, const json_t *resp, px_s3_err_t no_such)
{
	px_s3_err_t e = px_s3_err_of_code(json_string_value(json_object_get(resp, "code")));

	if (e != PX_S3_OK)
		return e;
	if (status == 404)
		return no_such;
	if (status == 307 || status == 503)
		return PX_S3_SERVICE_UNAVAILABLE;
	if (status == 507)
		return PX_S3_INSUFFICIENT_STORAGE;
	return status < 500 ? PX_S3_INVALID_REQUEST : PX_S3_INTERNAL;
}

/* Sends target_err() with the target's message. */
static void target_error(px_s3_req_t *q, long status, const json_t *resp, px_s3_err_t no_such)
{
	const char *msg = json_string_value(json_object_get(resp, "message"));
	px_s3_err_t e = target_err(status, resp, no_such);

	if (status == 307)
		msg = "the cluster map is changing; retry";
	px_s3_error(q, e, "%s", msg ? msg : px_s3_err_message(e));
}

/* The owning target's object URL with query (malloc'd); NULL after responding when there is no target. */
static char *target_url(px_s3_req_t *q, const char *query)
{
	char *url = px_s3_owner_url(q->provider, q->bucket, q->key, q->key_len, query);

	if (!url)
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "the cluster has no targets");
	return url;
}

/*
 * One JSON exchange with a target. Returns 0 with *status and *resp (caller owns, may be NULL),
 * or -1 after responding ServiceUnavailable when the target did not answer.
 */
static int call_target(px_s3_req_t *q, const char *method, const char *url, const char *const *headers, int timeout_ms,
		       long *status, json_t **resp)
{
	char err[256] = "";

	*resp = NULL;
	if (ft_client_call(method, url, headers, NULL, timeout_ms, status, resp, err, sizeof(err)) != 0) {
		ft_warn("s3 %s: %s", q->request_id, err); /* err names the method and the URL, redacted */
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "the target holding the upload did not answer");
		return -1;
	}
	return 0;
}

/* "http://<Host><path>" of the request, for CompleteMultipartUploadResult's Location. */
static void request_location(const px_s3_req_t *q, char *out, size_t cap)
{
	const char *host = ft_req_header(q->r, "Host");
	const char *target = ft_req_target(q->r);
	size_t path_len = strcspn(target, "?");

	snprintf(out, cap, "http://%s%.*s", host ? host : "localhost", (int)path_len, target);
}

static void xml_owner(px_xml_t *x, const char *tag, const char *name)
{
	px_xml_open(x, tag);
	px_xml_elem(x, "ID", name);
	px_xml_elem(x, "DisplayName", name);
	px_xml_close(x, tag);
}

/* ---- CreateMultipartUpload ---- */

static void mpu_create(px_s3_req_t *q)
{
	const char *const *meta_headers = q->op; /* the object's Content-Type and x-amz-meta-*, kept for completion */
	char id[MPU_ID_MAX + 1], query[MPU_ID_MAX + 32];
	long status = 0;
	json_t *resp = NULL;
	px_xml_t x;

	if (upload_id_new(id, sizeof(id)) != 0) {
		px_s3_error(q, PX_S3_INTERNAL, "no random bytes for an upload id");
		return;
	}
	snprintf(query, sizeof(query), "mpu=%s&action=start", id);
	char *url = target_url(q, query);
	int rc = url ? call_target(q, "POST", url, meta_headers, px_s3_relay_timeout_ms(), &status, &resp) : -1;
	free(url);
	if (rc != 0)
		return;
	if (status != 200) {
		target_error(q, status, resp, PX_S3_NO_SUCH_BUCKET);
		json_decref(resp);
		return;
	}
	const char *ck_alg = json_string_value(json_object_get(resp, "checksum_algorithm"));
	const char *ck_type = json_string_value(json_object_get(resp, "checksum_type"));
	if (ck_alg != NULL && ck_alg[0] && ck_type != NULL) {
		ft_resp_header(q->r, "x-amz-checksum-algorithm", ck_alg);
		ft_resp_header(q->r, "x-amz-checksum-type", ck_type);
	}
	json_decref(resp);
	ft_debug("s3 %s: upload %s of %s/%s created", q->request_id, id, q->bucket, q->key);
	px_xml_init(&x);
	px_xml_open_ns(&x, "InitiateMultipartUploadResult");
	px_xml_elem(&x, "Bucket", q->bucket);
	px_xml_elem_n(&x, "Key", q->key, q->key_len);
	px_xml_elem(&x, "UploadId", id);
	px_xml_close(&x, "InitiateMultipartUploadResult");
	px_s3_send_xml(q, 200, &x);
}

/* ---- UploadPart ---- */

static void mpu_upload_part(px_s3_req_t *q)
{
	const char *id = ft_req_query(q->r, "uploadId");
	const char *part = ft_req_query(q->r, "partNumber");
	char query[MPU_ID_MAX + 48];
	px_s3_target_reply_t reply;

	if (px_s3_body_length(q) > (int64_t)MPU_PART_MAX_SIZE) {
		px_s3_error(q, PX_S3_ENTITY_TOO_LARGE, "a part may hold at most 5 GiB");
		return;
	}
	snprintf(query, sizeof(query), "mpu=%s&part=%ld", id, parse_count(part));
	char *url = target_url(q, query);
	if (!url)
		return;
	memset(&reply, 0, sizeof(reply));
	px_s3_err_t e = px_s3_put_to(q, url, NULL, &reply);
	free(url);
	if (e != PX_S3_OK) {
		px_s3_error(q, e, NULL);
		return;
	}
	if (reply.status == 200 && reply.etag[0]) {
		ft_resp_header(q->r, "ETag", reply.etag);
		px_s3_checksum_headers(q, &reply);
		px_s3_send_empty(q, 200);
		return;
	}
	if (reply.status == 200) {
		px_s3_error(q, PX_S3_INTERNAL, "the target stored the part but sent no ETag");
		return;
	}
	if (reply.status == 404) {
		px_s3_error(q, PX_S3_NO_SUCH_UPLOAD, NULL);
		return;
	}
	if (reply.status == 307) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "the cluster map is changing; retry");
		return;
	}
	px_s3_error_from_target(q, &reply);
}

/* ---- UploadPartCopy ---- */

/* The part's body is the source object (or its x-amz-copy-source-range), streamed by copy.c. */
static void mpu_upload_part_copy(px_s3_req_t *q)
{
	const char *id = ft_req_query(q->r, "uploadId");
	char query[MPU_ID_MAX + 48];

	snprintf(query, sizeof(query), "mpu=%s&part=%ld", id, parse_count(ft_req_query(q->r, "partNumber")));
	char *url = target_url(q, query);
	if (!url)
		return;
	px_s3_copy_part(q, url);
	free(url);
}

/* ---- CompleteMultipartUpload ---- */

/* {"parts":[{"part":N,"etag":"..."}...]} of the parsed XML list; NULL on allocation failure. */
static json_t *parts_json(const px_s3_part_t *parts, int n)
{
	json_t *arr = json_array();

	for (int i = 0; arr && i < n; i++) {
		json_t *e = json_pack("{s:i, s:s}", "part", parts[i].part, "etag", parts[i].etag);
		if (e != NULL && parts[i].checksum[0])
			json_object_set_new(e, "checksum", json_string(parts[i].checksum));
		if (json_array_append_new(arr, e) != 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr ? json_pack("{s:o}", "parts", arr) : NULL;
}

/* One completion call to the target, with the early 200 and its keepalive spaces. */
typedef struct {
	px_s3_req_t *q;
	int64_t start_ms, last_ms;
	int streaming;     /* 200 and the XML declaration sent: the result follows in the body */
	ft_strbuf_t reply; /* the target's reply body */
	int too_big;
} complete_call_t;

static size_t complete_write_cb(char *buf, size_t size, size_t n, void *arg)
{
	complete_call_t *c = arg;
	size_t len = size * n;

	if (c->reply.len + len + 1 > MPU_REPLY_MAX) {
		c->too_big = 1;
		return 0;
	}
	ft_strbuf_add(&c->reply, buf, len);
	return c->reply.failed ? 0 : len;
}

/* libcurl calls this about once a second while it waits: time to start or keep the 200 alive. */
static int complete_progress_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	static const char decl[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
	complete_call_t *c = arg;
	int64_t now = ft_mono_ms();

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	if (!c->streaming && now - c->start_ms >= MPU_KEEPALIVE_AFTER_MS) {
		c->streaming = 1;
		c->last_ms = now;
		ft_resp_header(c->q->r, "x-amz-request-id", c->q->request_id);
		/* A client gone meanwhile makes these fail; the completion goes on regardless. */
		if (ft_resp_stream_start(c->q->r, 200, "application/xml", -1) == 0)
			ft_resp_stream_write(c->q->r, decl, sizeof(decl) - 1);
	} else if (c->streaming && now - c->last_ms >= MPU_KEEPALIVE_EVERY_MS) {
		c->last_ms = now;
		ft_resp_stream_write(c->q->r, " ", 1);
	}
	return 0;
}

/* Writes x after its XML declaration (sent already) into the started 200 and ends the request. */
static void stream_finish(px_s3_req_t *q, px_xml_t *x)
{
	const char *doc = x->p ? strstr(x->p, "?>") : NULL;

	if (x->failed || !doc) {
		ft_resp_stream_end(q->r, -ENOMEM);
		px_xml_free(x);
		return;
	}
	doc += 2;
	while (*doc == '\n')
		doc++;
	ft_resp_stream_write(q->r, doc, strlen(doc));
	ft_resp_stream_end(q->r, 0);
	px_xml_free(x);
}

/* The completion's error: an S3 error reply, or an <Error> inside the 200 already started. */
static void complete_error(complete_call_t *c, px_s3_err_t e, const char *msg)
{
	px_xml_t x;

	if (!c->streaming) {
		px_s3_error(c->q, e, "%s", msg ? msg : px_s3_err_message(e));
		return;
	}
	px_xml_error_doc(&x, e, msg ? msg : px_s3_err_message(e), c->q->resource, c->q->request_id); /* inits x */
	stream_finish(c->q, &x);
}

/* The S3 error for a target's non-200 reply to a completion. */
static void complete_target_error(complete_call_t *c, long status, const json_t *resp)
{
	complete_error(c, target_err(status, resp, PX_S3_NO_SUCH_UPLOAD),
		       json_string_value(json_object_get(resp, "message")));
}

/*
 * POSTs the part list to the target: no total timeout (the target concatenates the object), the
 * 200 kept alive meanwhile. Returns 0 with *status and *resp (caller owns), or -1 after
 * responding.
 */
static int complete_call(complete_call_t *c, const char *url, const json_t *body, long *status, json_t **resp)
{
	CURL *h = px_s3_curl();
	struct curl_slist *hdrs = NULL;
	char *text = json_dumps(body, JSON_COMPACT);
	CURLcode rc = CURLE_OUT_OF_MEMORY;

	*resp = NULL;
	if (!h || !text) {
		free(text);
		complete_error(c, PX_S3_INTERNAL, "out of memory");
		return -1;
	}
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	static const char *const conds[] = {"If-Match", "If-None-Match"}; /* conditional write of the object */
	for (size_t i = 0; i < 2; i++) {
		const char *v = ft_req_header(c->q->r, conds[i]);
		char line[256];
		if (v != NULL && strlen(v) + 20 < sizeof(line)) {
			snprintf(line, sizeof(line), "%s: %s", conds[i], v);
			hdrs = curl_slist_append(hdrs, line);
		}
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)MPU_COMPLETE_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, complete_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, complete_progress_cb);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
	c->start_ms = ft_mono_ms();
	rc = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
	curl_slist_free_all(hdrs);
	free(text);
	if (rc != CURLE_OK) {
		char shown[FT_REDACT_URL_MAX];
		ft_warn("s3 %s: POST %s: %s", c->q->request_id, ft_redact_url(url, shown, sizeof(shown)),
			c->too_big ? "reply too large" : curl_easy_strerror(rc));
		complete_error(c, PX_S3_SERVICE_UNAVAILABLE, "the target holding the upload did not answer");
		return -1;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	*resp = c->reply.p ? json_loadb(c->reply.p, c->reply.len, 0, NULL) : NULL;
	return 0;
}

/* The object checksum a CompleteMultipartUpload expects (its x-amz-checksum-<alg> header), NULL if none. */
static const char *complete_checksum_header(px_s3_req_t *q)
{
	static const ft_xsum_alg_t algs[] = {FT_XSUM_CRC32, FT_XSUM_CRC32C, FT_XSUM_CRC64NVME, FT_XSUM_SHA1,
					     FT_XSUM_SHA256};

	for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
		const char *v = ft_req_header(q->r, ft_xsum_header(algs[i]));
		if (v != NULL)
			return v;
	}
	return NULL;
}

/* Checksum<ALG> and ChecksumType of the completed object (the target's "s3_checksum"), if it has one. */
static void complete_checksum_xml(px_xml_t *x, const json_t *ck)
{
	const char *alg = json_string_value(json_object_get(ck, "algorithm"));
	const char *value = json_string_value(json_object_get(ck, "value"));
	const char *type = json_string_value(json_object_get(ck, "type"));
	char tag[32];

	if (alg == NULL || value == NULL || type == NULL)
		return;
	snprintf(tag, sizeof(tag), "Checksum%s", alg);
	px_xml_elem(x, tag, value);
	px_xml_elem(x, "ChecksumType", type);
}

static void mpu_complete(px_s3_req_t *q)
{
	const char *id = ft_req_query(q->r, "uploadId");
	char query[MPU_ID_MAX + 48], location[FT_URL_MAX + FT_OBJ_NAME_MAX * 3];
	complete_call_t c = {.q = q};
	px_s3_part_t *parts = NULL;
	json_t *body_json = NULL, *resp = NULL;
	const char *why = NULL;
	char *body = NULL;
	size_t len = 0;
	long status = 0;
	int n = 0;
	px_xml_t x;

	px_s3_err_t e = px_s3_body_all(q, PX_S3_XML_BODY_MAX, &body, &len);
	if (e != PX_S3_OK) {
		px_s3_error(q, e, NULL);
		return;
	}
	int parsed = px_s3_parse_complete(body, len, &parts, &n, &why);
	free(body);
	if (parsed != 0) {
		px_s3_error(q, PX_S3_MALFORMED_XML, "%s", why ? why : "malformed part list");
		return;
	}
	body_json = parts_json(parts, n);
	free(parts);
	if (!body_json) {
		px_s3_error(q, PX_S3_INTERNAL, "out of memory");
		return;
	}
	const char *want = complete_checksum_header(q);
	if (want != NULL)
		json_object_set_new(body_json, "checksum", json_string(want));
	snprintf(query, sizeof(query), "mpu=%s&action=complete", id);
	char *url = target_url(q, query);
	int rc = url ? complete_call(&c, url, body_json, &status, &resp) : -1;
	free(url);
	if (rc != 0)
		goto out;
	if (status != 200) {
		complete_target_error(&c, status, resp);
		goto out;
	}
	const char *etag = json_string_value(json_object_get(resp, "etag"));
	json_int_t size = json_integer_value(json_object_get(resp, "size"));
	if (!etag) {
		complete_error(&c, PX_S3_INTERNAL, "the target completed the upload but sent no ETag");
		goto out;
	}
	ft_info("s3 %s: upload %s completed: %s/%s (%d parts, %lld bytes, %lld ms)", q->request_id, id, q->bucket,
		q->key, n, (long long)size, (long long)(ft_mono_ms() - c.start_ms));
	request_location(q, location, sizeof(location));
	px_xml_init(&x);
	px_xml_open_ns(&x, "CompleteMultipartUploadResult");
	px_xml_elem(&x, "Location", location);
	px_xml_elem(&x, "Bucket", q->bucket);
	px_xml_elem_n(&x, "Key", q->key, q->key_len);
	px_xml_elemf(&x, "ETag", "\"%s\"", etag);
	complete_checksum_xml(&x, json_object_get(resp, "s3_checksum"));
	px_xml_close(&x, "CompleteMultipartUploadResult");
	if (c.streaming)
		stream_finish(q, &x);
	else
		px_s3_send_xml(q, 200, &x);
out:
	json_decref(resp);
	json_decref(body_json);
	ft_strbuf_free(&c.reply);
}

/* ---- AbortMultipartUpload ---- */

static void mpu_abort(px_s3_req_t *q)
{
	const char *id = ft_req_query(q->r, "uploadId");
	char query[MPU_ID_MAX + 48];
	long status = 0;
	json_t *resp = NULL;

	snprintf(query, sizeof(query), "mpu=%s&action=abort", id);
	char *url = target_url(q, query);
	int rc = url ? call_target(q, "POST", url, NULL, px_s3_relay_timeout_ms(), &status, &resp) : -1;
	free(url);
	if (rc != 0)
		return;
	if (status != 200)
		target_error(q, status, resp, PX_S3_NO_SUCH_UPLOAD);
	else
		px_s3_send_empty(q, 204);
	json_decref(resp);
}

/* ---- ListParts ---- */

static void xml_parts(px_xml_t *x, const json_t *parts)
{
	size_t i;
	const json_t *p;
	char when[40];

	json_array_foreach(parts, i, p) {
		ft_date_format_iso8601(json_integer_value(json_object_get(p, "mtime")), when, sizeof(when));
		px_xml_open(x, "Part");
		px_xml_elemf(x, "PartNumber", "%lld", (long long)json_integer_value(json_object_get(p, "part")));
		px_xml_elem(x, "LastModified", when);
		px_xml_elemf(x, "ETag", "\"%s\"", json_string_value(json_object_get(p, "etag")));
		px_xml_elemf(x, "Size", "%lld", (long long)json_integer_value(json_object_get(p, "size")));
		px_xml_close(x, "Part");
	}
}

static void mpu_list_parts(px_s3_req_t *q)
{
	const char *id = ft_req_query(q->r, "uploadId");
	const char *qmax = ft_req_query(q->r, "max-parts");
	const char *qmarker = ft_req_query(q->r, "part-number-marker");
	long max = qmax ? parse_count(qmax) : MPU_MAX_LIST;
	long marker = qmarker ? parse_count(qmarker) : 0;
	char query[MPU_ID_MAX + 96];
	long status = 0;
	json_t *resp = NULL;
	px_xml_t x;

	if (max < 0 || marker < 0) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT,
			    "max-parts and part-number-marker must be non-negative integers");
		return;
	}
	if (max > MPU_MAX_LIST)
		max = MPU_MAX_LIST;
	snprintf(query, sizeof(query), "mpu=%s&action=parts&max_parts=%ld&part_marker=%ld", id, max,
		 marker > PX_S3_MAX_PARTS ? (long)PX_S3_MAX_PARTS : marker);
	char *url = target_url(q, query);
	int rc = url ? call_target(q, "GET", url, NULL, px_s3_relay_timeout_ms(), &status, &resp) : -1;
	free(url);
	if (rc != 0)
		return;
	if (status != 200) {
		target_error(q, status, resp, PX_S3_NO_SUCH_UPLOAD);
		json_decref(resp);
		return;
	}
	const json_t *parts = json_object_get(resp, "parts");
	int truncated = json_is_true(json_object_get(resp, "truncated"));
	px_xml_init(&x);
	px_xml_open_ns(&x, "ListPartsResult");
	px_xml_elem(&x, "Bucket", q->bucket);
	px_xml_elem_n(&x, "Key", q->key, q->key_len);
	px_xml_elem(&x, "UploadId", id);
	xml_owner(&x, "Initiator", owner_name(q));
	xml_owner(&x, "Owner", owner_name(q));
	px_xml_elem(&x, "StorageClass", "STANDARD");
	px_xml_elemf(&x, "PartNumberMarker", "%ld", marker);
	px_xml_elemf(&x, "NextPartNumberMarker", "%lld",
		     (long long)json_integer_value(json_object_get(resp, "next_part_marker")));
	px_xml_elemf(&x, "MaxParts", "%ld", max);
	px_xml_elem(&x, "IsTruncated", truncated ? "true" : "false");
	if (json_is_array(parts))
		xml_parts(&x, parts);
	px_xml_close(&x, "ListPartsResult");
	json_decref(resp);
	px_s3_send_xml(q, 200, &x);
}

/* ---- ListMultipartUploads ---- */

typedef struct {
	const char *key; /* borrowed from a target's reply */
	const char *id;
	int64_t initiated;
} upload_t;

/* One target's uploads; filled on a fan-out thread. */
typedef struct {
	char *url; /* owned */
	int rc;
	long status;
	json_t *reply; /* owned */
	char err[256];
} fetch_t;

static void fetch_uploads(void *arg, int i)
{
	fetch_t *f = &((fetch_t *)arg)[i];

	if (f->url)
		f->rc = ft_client_json("GET", f->url, NULL, MPU_LIST_TIMEOUT_MS, &f->status, &f->reply, f->err,
				       sizeof(f->err));
}

static int upload_cmp(const void *a, const void *b)
{
	const upload_t *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : strcmp(x->id, y->id);
}

/*
 * Asks every target for its uploads of the bucket under prefix. Returns 0 with *fetches (n of
 * them, to release with fetches_free) and *ups (malloc'd, sorted by key then id, pointing into
 * the replies), or -1 after responding.
 */
static int gather_uploads(px_s3_req_t *q, const char *prefix, fetch_t **fetches, int *n_fetches, upload_t **ups,
			  size_t *n_ups)
{
	ft_smap_t *smap = ft_smap_current();
	int n = smap ? smap->n_targets : 0;
	fetch_t *f = calloc((size_t)(n ? n : 1), sizeof(*f));
	char *bucket = ft_pct_encode_dup(q->bucket, strlen(q->bucket), 0),
	     *pfx = ft_pct_encode_dup(prefix, strlen(prefix), 0);
	upload_t *v = NULL;
	size_t count = 0, cap = 0;
	int rc = -1;

	*fetches = f;
	*n_fetches = 0;
	if (!f || !bucket || !pfx) {
		px_s3_error(q, PX_S3_INTERNAL, "out of memory");
		goto out;
	}
	*n_fetches = n;
	for (int i = 0; i < n; i++)
		if (asprintf(&f[i].url, "%s/v1/mpu?provider=%s&bucket=%s&prefix=%s", smap->targets[i].control_url,
			     q->provider, bucket, pfx) < 0)
			f[i].url = NULL;
	ft_fanout_run(q->host->fanout, fetch_uploads, f, n);
	for (int i = 0; i < n; i++) {
		const json_t *arr = json_object_get(f[i].reply, "uploads");
		if (!f[i].url || f[i].rc != 0 || f[i].status != 200 || !json_is_array(arr)) {
			ft_warn("s3 %s: list uploads: target %s: %s (status %ld)", q->request_id, smap->targets[i].id,
				f[i].rc ? f[i].err : "bad reply", f[i].status);
			px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "target %s did not list its uploads",
				    smap->targets[i].id);
			goto out;
		}
		size_t j;
		const json_t *u;
		json_array_foreach(arr, j, u) {
			const char *key = json_string_value(json_object_get(u, "key"));
			const char *id = json_string_value(json_object_get(u, "upload_id"));
			if (!key || !id)
				continue;
			if (count == cap) {
				cap = cap ? cap * 2 : 64;
				upload_t *nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					px_s3_error(q, PX_S3_INTERNAL, "out of memory");
					goto out;
				}
				v = nv;
			}
			v[count].key = key;
			v[count].id = id;
			v[count].initiated = json_integer_value(json_object_get(u, "initiated"));
			count++;
		}
	}
	if (count > 0)
		qsort(v, count, sizeof(*v), upload_cmp);
	*ups = v;
	*n_ups = count;
	v = NULL;
	rc = 0;
out:
	free(v);
	free(pfx);
	free(bucket);
	ft_smap_put(smap);
	return rc;
}

static void fetches_free(fetch_t *f, int n)
{
	for (int i = 0; f && i < n; i++) {
		free(f[i].url);
		json_decref(f[i].reply);
	}
	free(f);
}

typedef struct {
	const char *prefix, *delimiter, *key_marker, *id_marker;
	long max;
	int url_encode;
} list_args_t;

/* Key-like text as sent: URL-encoded with encoding-type=url. */
static void xml_key(px_xml_t *x, const list_args_t *a, const char *tag, const char *text)
{
	if (!a->url_encode) {
		px_xml_elem(x, tag, text);
		return;
	}
	char *enc = ft_pct_encode_dup(text, strlen(text), FT_PCT_KEEP_SLASH);
	px_xml_elem(x, tag, enc ? enc : "");
	free(enc);
}

/*
 * The common prefix a key rolls up into ("<prefix>...<delimiter>"), written to out; 0 when the
 * key has no delimiter after the prefix. out has room for the key.
 */
static size_t common_prefix(const list_args_t *a, const char *key, char *out)
{
	size_t plen = strlen(a->prefix);

	if (!a->delimiter || !*a->delimiter)
		return 0;
	const char *d = strstr(key + plen, a->delimiter);
	if (!d)
		return 0;
	size_t n = (size_t)(d - key) + strlen(a->delimiter);
	memcpy(out, key, n);
	out[n] = '\0';
	return n;
}

/* Whether an upload comes after the markers. */
static int after_markers(const list_args_t *a, const upload_t *u)
{
	int c = strcmp(u->key, a->key_marker);

	if (c != 0)
		return c > 0;
	return a->id_marker[0] && strcmp(u->id, a->id_marker) > 0;
}

static void xml_upload(px_xml_t *x, const list_args_t *a, const px_s3_req_t *q, const upload_t *u)
{
	char when[40];

	ft_date_format_iso8601(u->initiated, when, sizeof(when));
	px_xml_open(x, "Upload");
	xml_key(x, a, "Key", u->key);
	px_xml_elem(x, "UploadId", u->id);
	xml_owner(x, "Initiator", owner_name(q));
	xml_owner(x, "Owner", owner_name(q));
	px_xml_elem(x, "StorageClass", "STANDARD");
	px_xml_elem(x, "Initiated", when);
	px_xml_close(x, "Upload");
}

/* One entry of a page: an upload, or the common prefix its key rolls up into (prefix_len > 0). */
typedef struct {
	size_t index; /* into the sorted uploads */
	size_t prefix_len;
} item_t;

/*
 * Selects the page after the markers: uploads and common prefixes, at most a->max together, into
 * items (room for n). Returns the count; *truncated when more follow.
 */
static size_t select_page(const list_args_t *a, const upload_t *v, size_t n, char *cp, item_t *items, int *truncated)
{
	size_t count = 0, last_cp = 0; /* last_cp: items index + 1 of the latest common prefix */

	*truncated = 0;
	for (size_t i = 0; i < n; i++) {
		size_t cplen = common_prefix(a, v[i].key, cp);
		if (cplen > 0) {
			if (strcmp(cp, a->key_marker) <= 0)
				continue; /* listed on an earlier page */
			const item_t *prev = last_cp ? &items[last_cp - 1] : NULL;
			if (prev && prev->prefix_len == cplen && strncmp(v[prev->index].key, cp, cplen) == 0)
				continue; /* rolled up into the prefix just listed */
		} else if (!after_markers(a, &v[i])) {
			continue;
		}
		if ((long)count == a->max) {
			*truncated = 1;
			break;
		}
		items[count].index = i;
		items[count].prefix_len = cplen;
		count++;
		if (cplen > 0)
			last_cp = count;
	}
	return count;
}

/* NextKeyMarker .. CommonPrefixes of the page (uploads first, as S3 orders them). */
static void xml_uploads_page(px_xml_t *x, const list_args_t *a, const px_s3_req_t *q, const upload_t *v, size_t n)
{
	char *cp = malloc(FT_OBJ_NAME_MAX + 1);
	item_t *items = malloc((n ? n : 1) * sizeof(*items));
	int truncated = 0;

	if (!cp || !items) {
		x->failed = true;
		goto out;
	}
	size_t count = select_page(a, v, n, cp, items, &truncated);
	if (truncated && count > 0) {
		const item_t *last = &items[count - 1];
		const upload_t *u = &v[last->index];
		if (last->prefix_len > 0) {
			memcpy(cp, u->key, last->prefix_len);
			cp[last->prefix_len] = '\0';
			xml_key(x, a, "NextKeyMarker", cp);
			px_xml_elem(x, "NextUploadIdMarker", "");
		} else {
			xml_key(x, a, "NextKeyMarker", u->key);
			px_xml_elem(x, "NextUploadIdMarker", u->id);
		}
	}
	px_xml_elemf(x, "MaxUploads", "%ld", a->max);
	px_xml_elem(x, "IsTruncated", truncated ? "true" : "false");
	for (size_t i = 0; i < count; i++)
		if (items[i].prefix_len == 0)
			xml_upload(x, a, q, &v[items[i].index]);
	for (size_t i = 0; i < count; i++) {
		if (items[i].prefix_len == 0)
			continue;
		memcpy(cp, v[items[i].index].key, items[i].prefix_len);
		cp[items[i].prefix_len] = '\0';
		px_xml_open(x, "CommonPrefixes");
		xml_key(x, a, "Prefix", cp);
		px_xml_close(x, "CommonPrefixes");
	}
out:
	free(items);
	free(cp);
}

static void mpu_list_uploads(px_s3_req_t *q)
{
	const char *qmax = ft_req_query(q->r, "max-uploads");
	const char *enc = ft_req_query(q->r, "encoding-type");
	list_args_t a;
	fetch_t *f = NULL;
	upload_t *v = NULL;
	size_t n = 0;
	int nf = 0;
	px_xml_t x;

	memset(&a, 0, sizeof(a));
	a.prefix = ft_req_query(q->r, "prefix");
	a.delimiter = ft_req_query(q->r, "delimiter");
	a.key_marker = ft_req_query(q->r, "key-marker");
	a.id_marker = ft_req_query(q->r, "upload-id-marker");
	a.prefix = a.prefix ? a.prefix : "";
	a.key_marker = a.key_marker ? a.key_marker : "";
	a.id_marker = a.id_marker ? a.id_marker : "";
	a.max = qmax ? parse_count(qmax) : MPU_MAX_LIST;
	if (a.max < 0) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "max-uploads must be a non-negative integer");
		return;
	}
	if (a.max > MPU_MAX_LIST)
		a.max = MPU_MAX_LIST;
	if (enc && strcmp(enc, "url") != 0) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "encoding-type must be \"url\"");
		return;
	}
	a.url_encode = enc != NULL;
	if (gather_uploads(q, a.prefix, &f, &nf, &v, &n) != 0) {
		fetches_free(f, nf);
		return;
	}
	px_xml_init(&x);
	px_xml_open_ns(&x, "ListMultipartUploadsResult");
	px_xml_elem(&x, "Bucket", q->bucket);
	xml_key(&x, &a, "KeyMarker", a.key_marker);
	px_xml_elem(&x, "UploadIdMarker", a.id_marker);
	xml_key(&x, &a, "Prefix", a.prefix);
	if (a.delimiter && *a.delimiter)
		xml_key(&x, &a, "Delimiter", a.delimiter);
	if (a.url_encode)
		px_xml_elem(&x, "EncodingType", "url");
	xml_uploads_page(&x, &a, q, v, n);
	px_xml_close(&x, "ListMultipartUploadsResult");
	free(v);
	fetches_free(f, nf);
	px_s3_send_xml(q, 200, &x);
}

/* ---- entry point (loop thread) ---- */

/* The uploadId query parameter of our format; -1 after responding NoSuchUpload otherwise. */
static int check_upload_id(px_s3_req_t *q)
{
	if (upload_id_valid(ft_req_query(q->r, "uploadId")))
		return 0;
	px_s3_error(q, PX_S3_NO_SUCH_UPLOAD, NULL);
	return -1;
}

void px_s3_multipart(px_s3_req_t *q, px_s3_mpu_op_t op)
{
	switch (op) {
	case PX_S3_MPU_CREATE: {
		const char **meta = NULL;
		px_s3_err_t e = px_s3_meta_lines(q, &meta);
		if (e != PX_S3_OK) {
			px_s3_error(q, e,
				    e == PX_S3_INVALID_ARGUMENT
					    ? "Content-Type and x-amz-meta-* values must be printable"
					    : NULL);
			return;
		}
		q->op = meta;
		px_s3_defer(q, mpu_create);
		return;
	}
	case PX_S3_MPU_UPLOAD_PART: {
		long part = parse_count(ft_req_query(q->r, "partNumber"));
		if (part < 1 || part > PX_S3_MAX_PARTS) {
			px_s3_error(q, PX_S3_INVALID_ARGUMENT,
				    "Part number must be an integer between 1 and 10000, inclusive");
			return;
		}
		if (check_upload_id(q) != 0)
			return;
		if (ft_req_header(q->r, "x-amz-copy-source") == NULL)
			px_s3_defer(q, mpu_upload_part);
		else if (px_s3_copy_source_prepare(q, true) == 0)
			px_s3_defer(q, mpu_upload_part_copy);
		return;
	}
	case PX_S3_MPU_COMPLETE:
		if (check_upload_id(q) == 0)
			px_s3_defer(q, mpu_complete);
		return;
	case PX_S3_MPU_ABORT:
		if (check_upload_id(q) == 0)
			px_s3_defer(q, mpu_abort);
		return;
	case PX_S3_MPU_LIST_PARTS:
		if (check_upload_id(q) == 0)
			px_s3_defer(q, mpu_list_parts);
		return;
	case PX_S3_MPU_LIST_UPLOADS:
		px_s3_defer(q, mpu_list_uploads);
		return;
	}
	px_s3_error(q, PX_S3_NOT_IMPLEMENTED, NULL);
}
