/* SPDX-License-Identifier: Apache-2.0 */
/* S3 object operations relayed to the owning target: PutObject, DeleteObject, DeleteObjects, GetObjectAttributes and object subresources. */
#include "s3/object.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/names.h"
#include "base/redact.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * A worker talks to the owner's native API. PUT: curl's read callback pulls verified bytes from
 * px_s3_body_read, and the request's Content-Type and x-amz-meta-* travel as headers; the target
 * checks If-Match / If-None-Match under the object's name lock. DELETE and DeleteObjects go to
 * each key's owner (DeleteObjects on the fan-out threads). GET and HEAD are get.c, copies copy.c.
 */

#define DELETE_TIMEOUT_MS 10000
#define DELETE_BODY_MAX PX_S3_XML_BODY_MAX

/* ---- PUT ---- */

static void put_work(px_s3_req_t *q)
{
	px_s3_target_reply_t reply;
	char *url = px_s3_owner_url(q->provider, q->bucket, q->key, q->key_len, "etag=md5");
	px_s3_err_t e;

	if (url == NULL) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no target to store the object");
		return;
	}
	e = px_s3_put_to(q, url, q->op, &reply);
	free(url);
	if (e != PX_S3_OK) {
		px_s3_error(q, e, NULL);
		return;
	}
	if (reply.status != 200) {
		px_s3_error_from_target(q, &reply);
		return;
	}
	if (reply.etag[0])
		ft_resp_header(q->r, "ETag", reply.etag);
	px_s3_checksum_headers(q, &reply);
	px_s3_send_empty(q, 200);
}

/* px_s3_meta_lines, answering its error: 0, or -1 after responding. */
int px_s3_meta_lines_or_error(px_s3_req_t *q, const char ***lines)
{
	px_s3_err_t e = px_s3_meta_lines(q, lines);

	if (e == PX_S3_OK)
		return 0;
	px_s3_error(q, e,
		    e == PX_S3_INVALID_ARGUMENT ? "Content-Type and x-amz-meta-* values must be printable" : NULL);
	return -1;
}

/*
 * meta and the request's If-Match / If-None-Match, which the target checks under the object's name
 * lock as it publishes (conditional writes).
 */
static const char **with_conditions(px_s3_req_t *q, const char **meta)
{
	static const char *const names[] = {"If-Match", "If-None-Match"};
	size_t n = 0;
	const char **v;

	while (meta[n] != NULL)
		n++;
	v = ft_req_alloc(q->r, (n + 3) * sizeof(*v));
	memcpy(v, meta, n * sizeof(*v));
	for (size_t i = 0; i < 2; i++) {
		const char *val = ft_req_header(q->r, names[i]);
		if (val == NULL)
			continue;
		size_t len = strlen(names[i]) + strlen(val) + 3;
		char *line = ft_req_alloc(q->r, len);
		snprintf(line, len, "%s: %s", names[i], val);
		v[n++] = line;
	}
	v[n] = NULL;
	return v;
}

void px_s3_object_put(px_s3_req_t *q)
{
	int64_t len = px_s3_body_length(q);

	if (len < 0) {
		px_s3_error(q, PX_S3_MISSING_CONTENT_LENGTH, NULL);
		return;
	}
	if ((uint64_t)len > PX_S3_PUT_MAX) {
		px_s3_error(q, PX_S3_ENTITY_TOO_LARGE, "One PutObject stores at most 5 GiB; use a multipart upload");
		return;
	}
	const char **meta = NULL;
	if (px_s3_meta_lines_or_error(q, &meta) != 0)
		return;
	q->op = with_conditions(q, meta); /* put_work's extra header lines */
	px_s3_defer(q, put_work);
}

/* ---- DELETE ---- */

static size_t discard_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	(void)buf;
	(void)arg;
	return size * nitems;
}

static void delete_work(px_s3_req_t *q)
{
	char *url = px_s3_owner_url(q->provider, q->bucket, q->key, q->key_len, NULL);
	CURL *h = px_s3_curl();
	long status = 0;
	CURLcode rc;

	if (url == NULL || h == NULL) {
		px_s3_error(q, url == NULL ? PX_S3_SERVICE_UNAVAILABLE : PX_S3_INTERNAL, "no target for the object");
		free(url);
		return;
	}
	struct curl_slist *hdrs = px_s3_forward_header(NULL, q->r, "If-Match", "If-Match"); /* conditional delete */
	px_s3_curl_common(h, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_cb);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	rc = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hdrs);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK) {
		char shown[FT_REDACT_URL_MAX];
		ft_warn("s3 DELETE %s: %s: %s", q->resource, ft_redact_url(url, shown, sizeof(shown)),
			curl_easy_strerror(rc));
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "the target holding the object did not answer");
	} else if (status == 200 || status == 404) {
		px_s3_send_empty(q, 204); /* S3 answers 204 whether or not the key existed (also with If-Match) */
	} else if (status == 412) {
		px_s3_error(q, PX_S3_PRECONDITION_FAILED, "If-Match does not name the object's ETag: nothing deleted");
	} else if (status == 501) {
		px_s3_error(q, PX_S3_NOT_IMPLEMENTED, "conditional deletes are not supported in remote buckets");
	} else {
		px_s3_error(q, PX_S3_INTERNAL, "the target answered %ld", status);
	}
	free(url);
}

void px_s3_object_delete(px_s3_req_t *q)
{
	px_s3_defer(q, delete_work);
}

/* ---- DeleteObjects ---- */

typedef struct {
	const char *provider; /* the bucket's (remote ones write the delete through) */
	const char *bucket;
	const char *key;
	size_t key_len;
	bool valid; /* a storable name: anything else cannot exist, so it counts as deleted */
	long status;
	int rc;
	char err[256];
} del_item_t;

static void delete_one(void *arg, int i)
{
	del_item_t *d = &((del_item_t *)arg)[i];
	char *url;

	if (!d->valid)
		return;
	url = px_s3_owner_url(d->provider, d->bucket, d->key, d->key_len, NULL);
	if (url == NULL) {
		d->rc = -1;
		snprintf(d->err, sizeof(d->err), "no target for the object");
		return;
	}
	d->rc = ft_client_json("DELETE", url, NULL, DELETE_TIMEOUT_MS, &d->status, NULL, d->err, sizeof(d->err));
	free(url);
}

static void delete_result_xml(px_xml_t *x, const del_item_t *d, bool quiet)
{
	bool ok = !d->valid || (d->rc == 0 && (d->status == 200 || d->status == 404));

	if (ok && quiet)
		return;
	px_xml_open(x, ok ? "Deleted" : "Error");
	px_xml_elem_n(x, "Key", d->key, d->key_len);
	if (!ok) {
		px_xml_elem(x, "Code", d->rc != 0 ? "ServiceUnavailable" : "InternalError");
		if (d->rc != 0)
			px_xml_elem(x, "Message", d->err);
		else
			px_xml_elemf(x, "Message", "the target answered %ld", d->status);
	}
	px_xml_close(x, ok ? "Deleted" : "Error");
}

static void delete_objects_work(px_s3_req_t *q)
{
	px_s3_delete_req_t req = {0};
	del_item_t *items = NULL;
	const char *why = NULL;
	char *body = NULL;
	size_t len = 0;
	px_s3_err_t e = px_s3_body_all(q, DELETE_BODY_MAX, &body, &len);
	px_xml_t x;

	if (e != PX_S3_OK) {
		px_s3_error(q, e, NULL);
		return;
	}
	if (px_s3_parse_delete(body, len, &req, &why) != 0) {
		px_s3_error(q, PX_S3_MALFORMED_XML, "%s", why);
		goto out;
	}
	items = calloc((size_t)req.n, sizeof(*items));
	if (items == NULL) {
		px_s3_error(q, PX_S3_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < req.n; i++) {
		items[i].provider = q->provider;
		items[i].bucket = q->bucket;
		items[i].key = req.keys[i];
		items[i].key_len = req.key_lens[i];
		items[i].valid = ft_name_check_object(req.keys[i], req.key_lens[i], &why) == 0;
	}
	ft_fanout_run(q->host->fanout, delete_one, items, req.n);
	px_xml_init(&x);
	px_xml_open_ns(&x, "DeleteResult");
	for (int i = 0; i < req.n; i++)
		delete_result_xml(&x, &items[i], req.quiet);
	px_xml_close(&x, "DeleteResult");
	px_s3_send_xml(q, 200, &x);
out:
	free(items);
	px_s3_delete_req_free(&req);
	free(body);
}

void px_s3_delete_objects(px_s3_req_t *q)
{
	px_s3_defer(q, delete_objects_work);
}

/* ---- subresources ---- */

/* ---- GetObjectAttributes ---- */

/* The first n bytes of s as a C string in buf (cut to fit); returns buf. */
static const char *strndup_na(const char *s, size_t n, char *buf, size_t cap)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return buf;
}

/* What a target's HEAD told of an object. */
typedef struct {
	char etag[PX_S3_ETAG_MAX];
	char last_modified[64];
	char size[24];
	char parts[12];
	px_s3_target_reply_t ck; /* its checksum lines (px_s3_reply_header_cb) */
} attrs_t;

static size_t attrs_header_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	attrs_t *a = arg;
	size_t n = size * nitems;
	static const struct {
		const char *name;
		size_t off, cap;
	} want[] = {
		{"ETag:", offsetof(attrs_t, etag), sizeof(((attrs_t *)0)->etag)},
		{"Last-Modified:", offsetof(attrs_t, last_modified), sizeof(((attrs_t *)0)->last_modified)},
		{"Ais-Size:", offsetof(attrs_t, size), sizeof(((attrs_t *)0)->size)},
		{"Ais-S3-Parts:", offsetof(attrs_t, parts), sizeof(((attrs_t *)0)->parts)},
	};

	px_s3_reply_header_cb(buf, size, nitems, &a->ck);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		size_t nl = strlen(want[i].name);
		if (n <= nl || strncasecmp(buf, want[i].name, nl) != 0)
			continue;
		const char *v = buf + nl;
		size_t len = n - nl;
		while (len > 0 && (*v == ' ' || *v == '\t')) {
			v++;
			len--;
		}
		while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
			len--;
		if (len < want[i].cap) {
			memcpy((char *)a + want[i].off, v, len);
			((char *)a + want[i].off)[len] = '\0';
		}
	}
	return n;
}

/* Whether the comma list of x-amz-object-attributes names attr. */
static bool attr_wanted(const char *list, const char *attr)
{
	size_t n = strlen(attr);

	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t len = strcspn(p, ",");
		size_t t = len;
		while (t > 0 && p[t - 1] == ' ')
			t--;
		if (t == n && strncmp(p, attr, n) == 0)
			return true;
		p += len;
	}
	return false;
}

/* Whether every name in list is one GetObjectAttributes knows. */
static bool attrs_valid(const char *list)
{
	static const char *const known[] = {"ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"};
	int named = 0;

	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t len = strcspn(p, ","), t = len;
		while (t > 0 && p[t - 1] == ' ')
			t--;
		bool ok = t == 0;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]) && !ok; i++)
			ok = strlen(known[i]) == t && strncmp(p, known[i], t) == 0;
		if (!ok)
			return false;
		named += t > 0;
		p += len;
	}
	return named > 0;
}

static void attributes_work(px_s3_req_t *q)
{
	const char *list = ft_req_header(q->r, "x-amz-object-attributes");
	char *url = px_s3_owner_url(q->provider, q->bucket, q->key, q->key_len, NULL);
	CURL *h = px_s3_curl();
	attrs_t a;
	long status = 0;

	memset(&a, 0, sizeof(a));
	if (url == NULL || h == NULL) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no target for the object");
		free(url);
		return;
	}
	px_s3_curl_common(h, url);
	curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, attrs_header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
	CURLcode rc = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
	free(url);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK || status != 200) {
		px_s3_error(q,
			    rc != CURLE_OK  ? PX_S3_SERVICE_UNAVAILABLE
			    : status == 404 ? PX_S3_NO_SUCH_KEY
					    : PX_S3_INTERNAL,
			    NULL);
		return;
	}
	px_xml_t x;
	px_xml_init(&x);
	px_xml_open_ns(&x, "GetObjectAttributesResponse");
	if (attr_wanted(list, "ETag")) {
		size_t n = strlen(a.etag);
		px_xml_elemf(&x, "ETag", "%.*s", (int)(n >= 2 ? n - 2 : 0), a.etag + (n >= 2)); /* without quotes */
	}
	const char *colon = strchr(a.ck.checksum, ':');
	if (attr_wanted(list, "Checksum") && colon != NULL) {
		char tag[32];
		ft_xsum_alg_t alg =
			ft_xsum_from_name(strndup_na(a.ck.checksum, (size_t)(colon - a.ck.checksum), tag, sizeof(tag)));
		px_xml_open(&x, "Checksum");
		snprintf(tag, sizeof(tag), "Checksum%s", ft_xsum_label(alg));
		px_xml_elem(&x, tag, colon + 2);
		if (a.ck.checksum_type[0])
			px_xml_elem(&x, "ChecksumType", a.ck.checksum_type);
		px_xml_close(&x, "Checksum");
	}
	if (attr_wanted(list, "ObjectParts") && a.parts[0]) {
		px_xml_open(&x, "ObjectParts");
		px_xml_elem(&x, "PartsCount", a.parts); /* TotalPartsCount in the SDKs' model */
		px_xml_close(&x, "ObjectParts");
	}
	if (attr_wanted(list, "StorageClass"))
		px_xml_elem(&x, "StorageClass", "STANDARD");
	if (attr_wanted(list, "ObjectSize"))
		px_xml_elem(&x, "ObjectSize", a.size[0] ? a.size : "0");
	px_xml_close(&x, "GetObjectAttributesResponse");
	if (a.last_modified[0])
		ft_resp_header(q->r, "Last-Modified", a.last_modified);
	px_s3_send_xml(q, 200, &x);
}

/* GetObjectAttributes: the attributes x-amz-object-attributes names, from a HEAD on the owner. */
static void object_attributes(px_s3_req_t *q)
{
	const char *list = ft_req_header(q->r, "x-amz-object-attributes");

	if (list == NULL || !attrs_valid(list)) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT,
			    list == NULL
				    ? "The x-amz-object-attributes header specifying the attributes to be retrieved "
				      "is either missing or empty"
				    : "Invalid attribute name specified.");
		return;
	}
	px_s3_defer(q, attributes_work);
}

void px_s3_object_subresource(px_s3_req_t *q, const char *sub)
{
	ft_method_t m = ft_req_method(q->r);

	if (m == FT_HTTP_GET && strcmp(sub, "attributes") == 0) {
		object_attributes(q);
	} else if ((m == FT_HTTP_GET || m == FT_HTTP_PUT) && strcmp(sub, "acl") == 0) {
		px_s3_object_acl(q); /* acl.c */
	} else if (m == FT_HTTP_GET && strcmp(sub, "tagging") == 0) {
		px_xml_t x;
		px_xml_init(&x);
		px_xml_open_ns(&x, "Tagging");
		px_xml_open(&x, "TagSet");
		px_xml_close(&x, "TagSet");
		px_xml_close(&x, "Tagging");
		px_s3_send_xml(q, 200, &x); /* objects have no tags here */
	} else if (m == FT_HTTP_DELETE && strcmp(sub, "tagging") == 0) {
		px_s3_send_empty(q, 204);
	} else {
		px_s3_error(q, PX_S3_NOT_IMPLEMENTED, "%s ?%s is not implemented", ft_req_method_name(q->r), sub);
	}
}
