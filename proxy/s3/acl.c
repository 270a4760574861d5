/* SPDX-License-Identifier: Apache-2.0 */
/* S3 canned ACLs: x-amz-acl, Get/PutBucketAcl, Get/PutObjectAcl, and which unsigned requests may read public data. */
#include "s3/s3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "auth/auth.h"
#include "base/log.h"
#include "cluster/bmd.h"

/*
 * DESIGN
 * Two canned ACLs exist: private (the default) and public-read. A bucket's lives in the BMD
 * (ft_bucket_t.public_read), an object's in its metadata on the target ("x-amz-acl" kept with the
 * standard headers). Canned names that mean private for a cluster with one owner
 * (bucket-owner-full-control, bucket-owner-read) are taken as private; every other ACL, explicit
 * grants (x-amz-grant-*) and policy bodies that are not one of the two answer 501.
 *
 * An unsigned request is public only when the cluster allows it (allow_public_read) and it is a
 * read: GET/HEAD of an object (relayed unsigned with ft_anon=1, so that the target serves it only
 * when the bucket or the object is public-read), or HEAD and listings of a public-read bucket.
 */

#define ACL_BODY_MAX (64 * 1024)
#define ALL_USERS "http://acs.amazonaws.com/groups/global/AllUsers"

/* ---- x-amz-acl ---- */

/* The canned ACL v as PX_S3_ACL_*; PX_S3_ACL_NONE for one that is not supported. */
static int canned(const char *v)
{
	if (strcmp(v, "private") == 0 || strcmp(v, "bucket-owner-full-control") == 0 ||
	    strcmp(v, "bucket-owner-read") == 0)
		return PX_S3_ACL_PRIVATE;
	if (strcmp(v, "public-read") == 0)
		return PX_S3_ACL_PUBLIC_READ;
	return PX_S3_ACL_NONE;
}

/* Whether v is one of S3's canned ACLs (supported here or not). */
static bool aws_canned(const char *v)
{
	static const char *const names[] = {
		"private",       "public-read",       "public-read-write",         "authenticated-read",
		"aws-exec-read", "bucket-owner-read", "bucket-owner-full-control", "log-delivery-write"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(v, names[i]) == 0)
			return true;
	return false;
}

bool px_s3_has_grant_header(ft_req_t *r)
{
	for (int i = 0; i < ft_req_header_count(r); i++) {
		const char *name, *value;
		ft_req_header_at(r, i, &name, &value);
		if (strncasecmp(name, "x-amz-grant-", 12) == 0)
			return true;
	}
	return false;
}

/* Refuses public-read when the cluster does not allow public data; true after answering. */
static bool public_refused(px_s3_req_t *q, int acl)
{
	if (acl != PX_S3_ACL_PUBLIC_READ || ft_auth()->public_read)
		return false;
	px_s3_error(q, PX_S3_ACCESS_DENIED,
		    "public-read is not allowed on this cluster: public access is off (config allow_public_read)");
	return true;
}

bool px_s3_acl_header(px_s3_req_t *q)
{
	const char *v = ft_req_header(q->r, "x-amz-acl");

	q->acl = PX_S3_ACL_NONE;
	if (px_s3_has_grant_header(q->r)) {
		px_s3_error(q, PX_S3_NOT_IMPLEMENTED,
			    "x-amz-grant-* headers are not supported: use x-amz-acl private or public-read");
		return false;
	}
	if (v == NULL)
		return true;
	q->acl = canned(v);
	if (q->acl == PX_S3_ACL_NONE && !aws_canned(v)) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "x-amz-acl %.40s is not a canned ACL", v);
		return false;
	}
	if (q->acl == PX_S3_ACL_NONE) {
		px_s3_error(q, PX_S3_NOT_IMPLEMENTED,
			    "x-amz-acl %.40s is not supported: only the canned ACLs private and public-read", v);
		return false;
	}
	return !public_refused(q, q->acl);
}

const char *px_s3_acl_line(const px_s3_req_t *q)
{
	return q->acl == PX_S3_ACL_PUBLIC_READ ? "x-amz-acl: public-read" : NULL;
}

/* ---- anonymous reads ---- */

/* Whether every query key of r is in allowed (or starts with "response-" when objects). */
static bool query_only(ft_req_t *r, const char *const *allowed, size_t n, bool objects)
{
	const char *qs = ft_req_query_string(r);

	for (const char *p = qs != NULL ? qs : ""; *p;) {
		size_t len = strcspn(p, "&"), klen = strcspn(p, "=&");
		bool ok = klen == 0 || (objects && klen > 9 && strncmp(p, "response-", 9) == 0);
		for (size_t i = 0; !ok && i < n; i++)
			ok = strlen(allowed[i]) == klen && strncmp(p, allowed[i], klen) == 0;
		if (!ok)
			return false;
		p += len + (p[len] == '&');
	}
	return true;
}

/* Whether the bucket of q has the public-read ACL. */
static bool bucket_public(const px_s3_req_t *q)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b = bmd != NULL ? ft_bmd_find(bmd, "ais", q->bucket) : NULL;
	bool pub = b != NULL && b->public_read;

	ft_bmd_put(bmd);
	return pub;
}

bool px_s3_acl_anonymous_ok(px_s3_req_t *q)
{
	static const char *const object_keys[] = {"partNumber", "versionId", "x-id"};
	static const char *const list_keys[] = {
		"list-type",   "prefix",      "delimiter",     "marker",   "max-keys",   "continuation-token",
		"start-after", "fetch-owner", "encoding-type", "versions", "key-marker", "version-id-marker",
		"x-id",        "max-items"};
	ft_method_t m = ft_req_method(q->r);

	if (!ft_auth()->public_read || (m != FT_HTTP_GET && m != FT_HTTP_HEAD) || q->bucket[0] == '\0')
		return false;
	if (q->key_len > 0)
		return query_only(q->r, object_keys, sizeof(object_keys) / sizeof(object_keys[0]), true);
	if (!bucket_public(q))
		return false;
	return m == FT_HTTP_HEAD || query_only(q->r, list_keys, sizeof(list_keys) / sizeof(list_keys[0]), false);
}

/* ---- the policy document ---- */

/* Text of n's child name, or "". */
static const char *child_text(const px_xml_node_t *n, const char *name)
{
	const px_xml_node_t *c = px_xml_child(n, name);

	return c != NULL && c->text != NULL ? c->text : "";
}

/*
 * An AccessControlPolicy body as a canned ACL: the owner's FULL_CONTROL, plus AllUsers READ for
 * public-read. PX_S3_ACL_NONE for anything else (*why), -1 for malformed XML.
 */
static int policy_acl(const char *body, size_t len, const char **why)
{
	px_xml_doc_t *doc = px_xml_parse(body, len, why);
	const px_xml_node_t *root, *list;
	bool owner_full = false, all_read = false, other = false;

	if (doc == NULL)
		return -1;
	root = px_xml_root(doc);
	list = px_xml_child(root, "AccessControlList");
	if (strcmp(root->name, "AccessControlPolicy") != 0 || list == NULL) {
		px_xml_doc_free(doc);
		*why = "expected <AccessControlPolicy> with an <AccessControlList>";
		return -1;
	}
	for (const px_xml_node_t *g = list->child; g != NULL; g = g->next) {
		const px_xml_node_t *grantee = px_xml_child(g, "Grantee");
		const char *perm = child_text(g, "Permission");
		if (strcmp(g->name, "Grant") != 0 || grantee == NULL) {
			other = true;
			continue;
		}
		if (strcmp(child_text(grantee, "ID"), PX_S3_OWNER_ID) == 0 && strcmp(perm, "FULL_CONTROL") == 0)
			owner_full = true;
		else if (strcmp(child_text(grantee, "URI"), ALL_USERS) == 0 && strcmp(perm, "READ") == 0)
			all_read = true;
		else
			other = true;
	}
	px_xml_doc_free(doc);
	if (!owner_full || other) {
		*why = "only the grants of the canned ACLs private (the owner's FULL_CONTROL) and public-read (and "
		       "AllUsers READ) are supported";
		return PX_S3_ACL_NONE;
	}
	return all_read ? PX_S3_ACL_PUBLIC_READ : PX_S3_ACL_PRIVATE;
}

/* Worker: the ACL a Put*Acl asks for, from x-amz-acl or the body; PX_S3_ACL_NONE after answering. */
static int wanted_acl(px_s3_req_t *q)
{
	char *body = NULL;
	size_t len = 0;
	const char *why = NULL;
	px_s3_err_t e = px_s3_body_all(q, ACL_BODY_MAX, &body, &len);
	int acl;

	if (e != PX_S3_OK) {
		px_s3_error(q, e, NULL);
		return PX_S3_ACL_NONE;
	}
	while (len > 0 && strchr(" \t\r\n", body[len - 1]) != NULL)
		len--;
	if (q->acl != PX_S3_ACL_NONE) {
		free(body);
		if (len == 0)
			return q->acl;
		px_s3_error(q, PX_S3_INVALID_REQUEST, "Specify the ACL either by x-amz-acl or in the body, not both");
		return PX_S3_ACL_NONE;
	}
	if (len == 0) {
		free(body);
		px_s3_error(q, PX_S3_MALFORMED_XML, "an ACL needs x-amz-acl or an AccessControlPolicy body");
		return PX_S3_ACL_NONE;
	}
	acl = policy_acl(body, len, &why);
	free(body);
	if (acl < 0)
		px_s3_error(q, PX_S3_MALFORMED_XML, "%s", why);
	else if (acl == PX_S3_ACL_NONE)
		px_s3_error(q, PX_S3_NOT_IMPLEMENTED, "%s", why);
	else if (public_refused(q, acl))
		acl = PX_S3_ACL_NONE;
	return acl < 0 ? PX_S3_ACL_NONE : acl;
}

/* ---- buckets ---- */

static void bucket_put_work(px_s3_req_t *q)
{
	int acl = wanted_acl(q);

	if (acl == PX_S3_ACL_NONE)
		return;
	int rc = q->host->bucket_set_acl(q->host->ctx, q->bucket, acl == PX_S3_ACL_PUBLIC_READ);
	if (rc == -ENOENT)
		px_s3_error(q, PX_S3_NO_SUCH_BUCKET, NULL);
	else if (rc != 0)
		px_s3_error(q, PX_S3_INTERNAL, "cannot update the bucket metadata");
	else
		px_s3_send_empty(q, 200);
}

void px_s3_bucket_acl(px_s3_req_t *q)
{
	if (ft_req_method(q->r) == FT_HTTP_GET) {
		px_s3_send_acl(q, bucket_public(q));
		return;
	}
	if (px_s3_acl_header(q))
		px_s3_defer(q, bucket_put_work);
}

/* ---- objects ---- */

typedef struct {
	bool public_read;
} head_acl_t;

static size_t head_acl_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	head_acl_t *h = arg;
	size_t n = size * nitems;

	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0)
		h->public_read = false;
	else if (n > 10 && strncasecmp(buf, "x-amz-acl:", 10) == 0)
		h->public_read = strstr(buf + 10, "public-read") != NULL;
	return n;
}

static size_t no_body_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	(void)buf;
	(void)arg;
	(void)size;
	(void)nitems;
	return 0;
}

/* Worker: asks the object's owner (HEAD, or PUT ?acl=... when query); its status, or -1 when it did not answer. */
static long ask_owner(px_s3_req_t *q, const char *query, head_acl_t *h)
{
	char *url = px_s3_owner_url(q->provider, q->bucket, q->key, q->key_len, query);
	CURL *c = px_s3_curl();
	struct curl_slist *hdrs = NULL;
	long status = -1;

	if (url == NULL || c == NULL)
		goto out;
	px_s3_curl_common(c, url);
	if (query != NULL) {
		hdrs = curl_slist_append(hdrs, "Expect:");
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)0);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, no_body_cb);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	} else {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	}
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, head_acl_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)px_s3_relay_timeout_ms());
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	else
		ft_warn("s3 %s ?acl: the owner of %s did not answer", ft_req_method_name(q->r), q->resource);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
out:
	curl_slist_free_all(hdrs);
	free(url);
	return status;
}

/* The S3 answer to an owner's status other than 200. */
static void owner_error(px_s3_req_t *q, long status)
{
	if (status == 404)
		px_s3_error(q, PX_S3_NO_SUCH_KEY, NULL);
	else if (status < 0 || status == 503)
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "the target holding the object did not answer");
	else
		px_s3_error(q, PX_S3_INTERNAL, "the target holding the object answered %ld", status);
}

static void object_get_work(px_s3_req_t *q)
{
	head_acl_t h = {false};
	long status = ask_owner(q, NULL, &h);

	if (status == 200)
		px_s3_send_acl(q, h.public_read);
	else
		owner_error(q, status);
}

static void object_put_work(px_s3_req_t *q)
{
	int acl = wanted_acl(q);
	head_acl_t h = {false};

	if (acl == PX_S3_ACL_NONE)
		return;
	long status = ask_owner(q, acl == PX_S3_ACL_PUBLIC_READ ? "acl=public-read" : "acl=private", &h);
	if (status == 200)
		px_s3_send_empty(q, 200);
	else
		owner_error(q, status);
}

void px_s3_object_acl(px_s3_req_t *q)
{
	if (ft_req_method(q->r) == FT_HTTP_GET)
		px_s3_defer(q, object_get_work);
	else if (px_s3_acl_header(q))
		px_s3_defer(q, object_put_work);
}
