/* SPDX-License-Identifier: Apache-2.0 */
/* S3 CopyObject and UploadPartCopy: a GET from the source's owner piped into a PUT to the destination's owner. */
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
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * CopyObject and UploadPartCopy run two transfers in one curl multi handle: a GET from the
 * source's owner (ranged for x-amz-copy-source-range) and a PUT to the destination's owner (the
 * object, or a part of an upload), joined by a 512 KiB ring; each side pauses when the ring is
 * full or empty. The PUT starts only after the GET's headers gave the length (and showed the
 * range fits the source), with the source's metadata (directive COPY) or the request's (REPLACE),
 * and the PUT sends exactly that many bytes, so a source that fails midway leaves the destination
 * untouched.
 *
 * Memory per request: curl's buffers, the response queue bound of the HTTP server, and for a copy
 * the ring - never a whole object.
 */

#define COPY_RING (512 * 1024)

/* ---- CopyObject and UploadPartCopy ---- */

/* The copy source of a request, parsed on the loop thread (request memory). */
typedef struct {
	char bucket[FT_BUCKET_NAME_MAX + 1];
	char *key;
	size_t key_len;
	bool ranged;          /* UploadPartCopy with x-amz-copy-source-range */
	uint64_t first, last; /* inclusive byte offsets of the range */
	bool replace;         /* CopyObject: x-amz-metadata-directive REPLACE */
	const char **meta;    /* with replace: the request's metadata lines */
} copy_src_t;

typedef struct {
	px_s3_req_t *q;
	const copy_src_t *from;
	bool part; /* the destination is a part of an upload */
	uint8_t *ring;
	size_t rpos, rlen; /* read position and bytes held */
	CURL *get, *put;
	struct curl_slist *put_hdrs;
	px_s3_target_head_t src;      /* the source GET's response */
	px_s3_head_lines_t src_lines; /* the head curl is handing over */
	bool get_done, get_paused;
	CURLcode get_rc;
	bool put_added, put_done, put_paused;
	CURLcode put_rc;
	bool range_bad;    /* the range does not fit the source: nothing was sent */
	uint64_t src_size; /* the source's size, when known from Content-Range */
	int64_t moved;     /* bytes handed to the PUT */
	px_s3_target_reply_t reply;
	char put_errbody[PX_S3_ERRBODY_MAX + 1];
	size_t put_errlen;
} copy_t;

/* The status a usable source answers with: 206 for a range, else 200. */
static bool copy_src_ok(const copy_t *c)
{
	return c->src.status == (c->from->ranged ? 206 : 200);
}

static size_t copy_get_header_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	copy_t *c = arg;
	size_t n = size * nitems;

	px_s3_target_head_line(&c->src, &c->src_lines, buf, n);
	return n;
}

static size_t copy_get_write_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	copy_t *c = arg;
	size_t n = size * nitems;

	if (!copy_src_ok(c)) {
		px_s3_keep_errbody(c->src.errbody, &c->src.errlen, buf, n);
		return n;
	}
	if (COPY_RING - c->rlen < n) {
		c->get_paused = true;
		return CURL_WRITEFUNC_PAUSE; /* curl keeps the chunk and offers it again after unpausing */
	}
	size_t w = (c->rpos + c->rlen) % COPY_RING;
	size_t first = n < COPY_RING - w ? n : COPY_RING - w;
	memcpy(c->ring + w, buf, first);
	memcpy(c->ring, buf + first, n - first);
	c->rlen += n;
	return n;
}

static size_t copy_put_read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	copy_t *c = arg;
	size_t cap = size * nitems;

	if (c->rlen == 0) {
		if (!c->get_done) {
			c->put_paused = true;
			return CURL_READFUNC_PAUSE;
		}
		/* The source ended: complete only when it sent exactly what it announced. */
		return c->get_rc == CURLE_OK && c->moved == c->src.length ? 0 : CURL_READFUNC_ABORT;
	}
	size_t n = c->rlen < cap ? c->rlen : cap;
	size_t first = n < COPY_RING - c->rpos ? n : COPY_RING - c->rpos;
	memcpy(buf, c->ring + c->rpos, first);
	memcpy(buf + first, c->ring, n - first);
	c->rpos = (c->rpos + n) % COPY_RING;
	c->rlen -= n;
	c->moved += (int64_t)n;
	return n;
}

static size_t copy_put_write_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	copy_t *c = arg;
	size_t n = size * nitems;

	px_s3_keep_errbody(c->put_errbody, &c->put_errlen, buf, n);
	return n;
}

static void copy_collect(copy_t *c, CURLM *m)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(m, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		if (msg->easy_handle == c->get) {
			c->get_done = true;
			c->get_rc = msg->data.result;
		} else if (msg->easy_handle == c->put) {
			c->put_done = true;
			c->put_rc = msg->data.result;
		}
	}
}

/*
 * The range asked for fits the source: the target answered 206 for exactly first..last (it
 * shortens a range past the end, and answers 416 for one that starts past it).
 */
static bool copy_range_fits(copy_t *c)
{
	unsigned long long a, b, total;

	if (c->src.status == 416 && sscanf(c->src.content_range, "bytes */%llu", &total) == 1) {
		c->src_size = total;
		return false;
	}
	if (c->src.status != 206 || sscanf(c->src.content_range, "bytes %llu-%llu/%llu", &a, &b, &total) != 3)
		return true; /* another answer: an error of the source itself */
	c->src_size = total;
	return a == c->from->first && b == c->from->last;
}

/* Appends the line "name: value" to the destination's headers. */
static void put_header(copy_t *c, const char *line)
{
	struct curl_slist *l = curl_slist_append(c->put_hdrs, line);

	if (l != NULL)
		c->put_hdrs = l;
}

/*
 * A stored "x-amz-checksum-<alg>: ..." line of the source: the copy computes that algorithm
 * again over what it stores (a COMPOSITE value, or the part count, does not carry over).
 */
static void copy_checksum_header(copy_t *c, const char *line)
{
	char name[32], out[64];
	size_t n = strcspn(line, ":");

	if (n >= sizeof(name))
		return;
	memcpy(name, line, n);
	name[n] = '\0';
	ft_xsum_alg_t alg = ft_xsum_from_name(name);
	if (alg == FT_XSUM_NONE)
		return;
	snprintf(out, sizeof(out), "Ais-S3-Checksum: %s", ft_xsum_label(alg));
	put_header(c, out);
}

/*
 * The destination PUT's headers: an object gets the source's Content-Type and x-amz-meta-*
 * (directive COPY) or the request's (REPLACE); a part gets none.
 */
static void copy_put_headers(copy_t *c)
{
	char line[PX_S3_META_MAX];

	put_header(c, "Content-Type:"); /* none unless given below */
	if (c->part)
		return;
	static const char *const conds[] = {"If-Match", "If-None-Match"}; /* of the destination (conditional write) */
	for (size_t i = 0; i < 2; i++) {
		const char *v = ft_req_header(c->q->r, conds[i]);
		if (v != NULL && strlen(v) + 20 < sizeof(line)) {
			snprintf(line, sizeof(line), "%s: %s", conds[i], v);
			put_header(c, line);
		}
	}
	if (px_s3_acl_line(c->q) != NULL && !c->from->replace) /* REPLACE: among the meta lines */
		put_header(c, px_s3_acl_line(c->q));
	if (c->from->replace) {
		for (int i = 0; c->from->meta[i] != NULL; i++)
			put_header(c, c->from->meta[i]);
		return;
	}
	if (c->src.content_type[0]) {
		snprintf(line, sizeof(line), "Content-Type: %s", c->src.content_type);
		put_header(c, line);
	}
	for (const char *p = c->src.meta; *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t len = (size_t)(nl - p);
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		memcpy(line, p, len);
		line[len] = '\0';
		p = nl + 1;
		if (strncasecmp(line, "x-amz-checksum-", PX_S3_CK_PREFIX_LEN) == 0 ||
		    strncasecmp(line, "x-amz-mp-parts-count:", 21) == 0) {
			copy_checksum_header(c, line);
			continue;
		}
		if (len > 0 && line[len - 1] == ':')
			line[len - 1] = ';'; /* an empty value: curl's way to send one */
		put_header(c, line);
	}
}

/* Drives both transfers until the PUT finished or the source failed before the PUT started. */
static void copy_run(copy_t *c, CURLM *m, int64_t max_size)
{
	int running = 0;

	curl_multi_add_handle(m, c->get);
	for (;;) {
		curl_multi_perform(m, &running);
		copy_collect(c, m);
		if (!c->put_added) {
			if (!c->src.headers_done && !c->get_done) {
				curl_multi_poll(m, NULL, 0, 1000, NULL);
				continue;
			}
			if (c->from->ranged && !copy_range_fits(c)) {
				c->range_bad = true;
				return;
			}
			if (!copy_src_ok(c) || c->src.length < 0 || c->src.length > max_size)
				return; /* nothing was sent to the destination */
			copy_put_headers(c);
			curl_easy_setopt(c->put, CURLOPT_HTTPHEADER, c->put_hdrs);
			curl_easy_setopt(c->put, CURLOPT_INFILESIZE_LARGE, (curl_off_t)c->src.length);
			curl_multi_add_handle(m, c->put);
			c->put_added = true;
			continue;
		}
		if (c->put_done)
			return;
		bool kicked = false;
		if (c->get_paused && COPY_RING - c->rlen >= PX_S3_CHUNK_MAX) {
			c->get_paused = false;
			curl_easy_pause(c->get, CURLPAUSE_CONT);
			kicked = true;
		}
		if (c->put_paused && (c->rlen > 0 || c->get_done)) {
			c->put_paused = false;
			curl_easy_pause(c->put, CURLPAUSE_CONT);
			kicked = true;
		}
		if (!kicked)
			curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
}

/* Parses x-amz-copy-source ("[/]bucket/key[?versionId=null]", percent-encoded); *key is ft_req_alloc memory. */
static px_s3_err_t copy_source(px_s3_req_t *q, char *bucket, size_t bcap, char **key, size_t *key_len)
{
	const char *v = ft_req_header(q->r, "x-amz-copy-source");
	size_t n = strlen(v);
	char *dec = ft_req_alloc(q->r, n + 1);
	size_t dl;

	if (v[0] == '/') {
		v++;
		n--;
	}
	const char *qm = memchr(v, '?', n);
	if (qm != NULL) {
		if (strncmp(qm, "?versionId=", 11) != 0 || strcmp(qm + 11, "null") != 0)
			return PX_S3_NOT_IMPLEMENTED;
		n = (size_t)(qm - v);
	}
	long decoded = ft_pct_decode(v, n, dec, FT_PCT_STRICT);
	if (decoded < 0)
		return PX_S3_INVALID_ARGUMENT;
	dl = (size_t)decoded;
	char *slash = memchr(dec, '/', dl);
	if (slash == NULL || (size_t)(slash - dec) >= bcap || slash == dec)
		return PX_S3_INVALID_ARGUMENT;
	memcpy(bucket, dec, (size_t)(slash - dec));
	bucket[slash - dec] = '\0';
	*key = slash + 1;
	*key_len = dl - (size_t)(slash - dec) - 1;
	return PX_S3_OK;
}

/* The S3 error of a failed copy. */
static void copy_fail(copy_t *c)
{
	px_s3_req_t *q = c->q;
	px_s3_target_reply_t reply = {0};

	if (c->range_bad) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "Range specified is not valid for source object of size: %llu",
			    (unsigned long long)c->src_size);
		return;
	}
	if (!c->put_added || (c->put_done && c->put_rc != CURLE_OK && (!c->get_done || c->get_rc != CURLE_OK))) {
		if (c->src.status == 0 || (c->get_done && c->get_rc != CURLE_OK && copy_src_ok(c))) {
			px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "reading the source object failed");
			return;
		}
		if (c->src.status == 304) { /* x-amz-copy-source-if-none-match / -if-modified-since */
			px_s3_error(q, PX_S3_PRECONDITION_FAILED, NULL);
			return;
		}
		if (copy_src_ok(c)) {
			if (c->part)
				px_s3_error(q, PX_S3_INVALID_REQUEST,
					    "A part copied from an object holds at most 5 GiB; "
					    "copy a range (x-amz-copy-source-range)");
			else
				px_s3_error(q, PX_S3_ENTITY_TOO_LARGE,
					    "CopyObject copies at most 5 GiB; use UploadPartCopy");
			return;
		}
		reply.status = c->src.status;
		px_s3_error_reply(c->src.errbody, c->src.errlen, &reply);
		reply.code[0] = '\0'; /* a code the source's owner gave is about the source, not this request */
		px_s3_error_from_target(q, &reply);
		return;
	}
	if (c->put_rc != CURLE_OK) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "writing the destination failed");
		return;
	}
	px_s3_error_reply(c->put_errbody, c->put_errlen, &c->reply);
	if (c->part && c->reply.status == 404 && c->reply.code[0] == '\0')
		px_s3_error(q, PX_S3_NO_SUCH_UPLOAD, NULL);
	else
		px_s3_error_from_target(q, &c->reply);
}

/* Sets up the source GET of c. */
static void copy_get_setup(copy_t *c, const char *url, struct curl_slist **hdrs)
{
	px_s3_req_t *q = c->q;
	char range[64];

	*hdrs = px_s3_forward_header(*hdrs, q->r, "x-amz-copy-source-if-match", "If-Match");
	*hdrs = px_s3_forward_header(*hdrs, q->r, "x-amz-copy-source-if-none-match", "If-None-Match");
	*hdrs = px_s3_forward_header(*hdrs, q->r, "x-amz-copy-source-if-modified-since", "If-Modified-Since");
	*hdrs = px_s3_forward_header(*hdrs, q->r, "x-amz-copy-source-if-unmodified-since", "If-Unmodified-Since");
	if (c->from->ranged) {
		snprintf(range, sizeof(range), "Range: bytes=%llu-%llu", (unsigned long long)c->from->first,
			 (unsigned long long)c->from->last);
		struct curl_slist *l = curl_slist_append(*hdrs, range);
		*hdrs = l != NULL ? l : *hdrs;
	}
	px_s3_curl_common(c->get, url);
	curl_easy_setopt(c->get, CURLOPT_HTTPHEADER, *hdrs);
	curl_easy_setopt(c->get, CURLOPT_HEADERFUNCTION, copy_get_header_cb);
	curl_easy_setopt(c->get, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(c->get, CURLOPT_WRITEFUNCTION, copy_get_write_cb);
	curl_easy_setopt(c->get, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->get, CURLOPT_BUFFERSIZE, (long)PX_S3_CHUNK_MAX);
}

/* Sets up the destination PUT of c (its headers are set once the source answered). */
static void copy_put_setup(copy_t *c, const char *url)
{
	px_s3_curl_common(c->put, url);
	curl_easy_setopt(c->put, CURLOPT_FOLLOWLOCATION, 0L); /* a body already streamed cannot be replayed */
	curl_easy_setopt(c->put, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c->put, CURLOPT_READFUNCTION, copy_put_read_cb);
	curl_easy_setopt(c->put, CURLOPT_READDATA, c);
	curl_easy_setopt(c->put, CURLOPT_HEADERFUNCTION, px_s3_reply_header_cb);
	curl_easy_setopt(c->put, CURLOPT_HEADERDATA, &c->reply);
	curl_easy_setopt(c->put, CURLOPT_WRITEFUNCTION, copy_put_write_cb);
	curl_easy_setopt(c->put, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->put, CURLOPT_UPLOAD_BUFFERSIZE, (long)PX_S3_CHUNK_MAX);
}

/*
 * Worker: streams the source of q->op into put_url (an object, or a part when part) and
 * responds with CopyObjectResult / CopyPartResult or the S3 error.
 */
static void copy_to(px_s3_req_t *q, const char *put_url, bool part)
{
	const copy_src_t *src = q->op;
	copy_t c = {.q = q, .from = src, .part = part, .src = {.length = -1}};
	struct curl_slist *get_hdrs = NULL;
	char *get_url = px_s3_owner_url("ais", src->bucket, src->key, src->key_len, NULL);
	CURLM *m = curl_multi_init();
	char date[40];

	c.ring = malloc(COPY_RING);
	c.get = curl_easy_init();
	c.put = curl_easy_init();
	ft_client_tls_apply(c.get);
	ft_client_tls_apply(c.put);
	if (get_url == NULL || put_url == NULL) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no targets in the cluster map");
		goto out;
	}
	if (m == NULL || c.ring == NULL || c.get == NULL || c.put == NULL) {
		px_s3_error(q, PX_S3_INTERNAL, "out of memory");
		goto out;
	}
	copy_get_setup(&c, get_url, &get_hdrs);
	copy_put_setup(&c, put_url);
	copy_run(&c, m, (int64_t)PX_S3_PUT_MAX);
	if (c.put_added)
		curl_easy_getinfo(c.put, CURLINFO_RESPONSE_CODE, &c.reply.status);
	if (!c.put_added || !c.put_done || c.put_rc != CURLE_OK || c.reply.status != 200 || !c.reply.etag[0]) {
		if (c.put_done && c.put_rc == CURLE_OK && c.reply.status == 200)
			px_s3_error(q, PX_S3_INTERNAL, "the target stored the copy but sent no ETag");
		else
			copy_fail(&c);
		goto out;
	}
	px_xml_t x;
	ft_date_format_iso8601(ft_now_ns(), date, sizeof(date));
	px_xml_init(&x);
	px_xml_open_ns(&x, part ? "CopyPartResult" : "CopyObjectResult");
	px_xml_elem(&x, "LastModified", date);
	px_xml_elem(&x, "ETag", c.reply.etag);
	px_xml_close(&x, part ? "CopyPartResult" : "CopyObjectResult");
	px_s3_send_xml(q, 200, &x);
out:
	if (m != NULL) {
		if (c.get != NULL)
			curl_multi_remove_handle(m, c.get);
		if (c.put != NULL && c.put_added)
			curl_multi_remove_handle(m, c.put);
		curl_multi_cleanup(m);
	}
	curl_easy_cleanup(c.put);
	curl_easy_cleanup(c.get);
	curl_slist_free_all(c.put_hdrs);
	curl_slist_free_all(get_hdrs);
	free(c.ring);
	free(get_url);
}

static void copy_work(px_s3_req_t *q)
{
	char *put_url = px_s3_owner_url(q->provider, q->bucket, q->key, q->key_len, "etag=md5");

	copy_to(q, put_url, false);
	free(put_url);
}

void px_s3_copy_part(px_s3_req_t *q, const char *put_url)
{
	copy_to(q, put_url, true);
}

/*
 * x-amz-copy-source-range "bytes=first-last" (decimal, first <= last) into src. PX_S3_OK, or
 * InvalidArgument.
 */
static px_s3_err_t copy_range(const char *v, copy_src_t *src)
{
	char *end;

	if (strncmp(v, "bytes=", 6) != 0 || !isdigit((unsigned char)v[6]))
		return PX_S3_INVALID_ARGUMENT;
	errno = 0;
	src->first = strtoull(v + 6, &end, 10);
	if (errno != 0 || *end != '-' || !isdigit((unsigned char)end[1]))
		return PX_S3_INVALID_ARGUMENT;
	src->last = strtoull(end + 1, &end, 10);
	if (errno != 0 || *end != '\0' || src->first > src->last)
		return PX_S3_INVALID_ARGUMENT;
	src->ranged = true;
	return PX_S3_OK;
}

int px_s3_copy_source_prepare(px_s3_req_t *q, bool part)
{
	copy_src_t *src = ft_req_alloc(q->r, sizeof(*src));
	const char *why = NULL;
	const char *range = part ? ft_req_header(q->r, "x-amz-copy-source-range") : NULL;
	px_s3_err_t e;

	memset(src, 0, sizeof(*src));
	e = copy_source(q, src->bucket, sizeof(src->bucket), &src->key, &src->key_len);
	if (e != PX_S3_OK) {
		px_s3_error(q, e,
			    e == PX_S3_NOT_IMPLEMENTED ? "Object versions are not supported"
						       : "x-amz-copy-source must be <bucket>/<key>");
		return -1;
	}
	if (range != NULL && copy_range(range, src) != PX_S3_OK) {
		px_s3_error(
			q, PX_S3_INVALID_ARGUMENT,
			"The x-amz-copy-source-range value must be of the form bytes=first-last where first and last "
			"are the zero-based offsets of the first and last bytes to copy");
		return -1;
	}
	if (ft_name_check_bucket(src->bucket, &why) != 0) {
		px_s3_error(q, PX_S3_INVALID_BUCKET_NAME, "source bucket: %s", why);
		return -1;
	}
	if (!px_s3_key_allows(q, FT_ROLE_READONLY, src->bucket)) { /* the source is read */
		px_s3_error(q, PX_S3_ACCESS_DENIED,
			    "the access key's role or bucket grants do not allow reading "
			    "the source bucket %s",
			    src->bucket);
		return -1;
	}
	char provider[16], all[64];
	bool exists = px_s3_bucket_lookup(src->bucket, provider, all, sizeof(all)) > 0;
	if (exists && strcmp(provider, "ais") != 0) {
		px_s3_error(
			q, PX_S3_NOT_IMPLEMENTED,
			"Copying from remote bucket %s is not supported through the S3 API: GET the object and PUT it",
			src->bucket);
		return -1;
	}
	if (!exists) {
		px_s3_error(q, PX_S3_NO_SUCH_BUCKET, "The source bucket does not exist");
		return -1;
	}
	if (ft_name_check_object(src->key, src->key_len, &why) != 0) {
		px_s3_error(q, PX_S3_NO_SUCH_KEY, "The source key does not exist");
		return -1;
	}
	q->op = src;
	return 0;
}

void px_s3_object_copy(px_s3_req_t *q)
{
	const char *directive = ft_req_header(q->r, "x-amz-metadata-directive");
	copy_src_t *src;

	if (directive != NULL && strcmp(directive, "COPY") != 0 && strcmp(directive, "REPLACE") != 0) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "Unknown metadata directive (COPY or REPLACE)");
		return;
	}
	if (px_s3_copy_source_prepare(q, false) != 0)
		return;
	src = q->op;
	src->replace = directive != NULL && strcmp(directive, "REPLACE") == 0;
	if (strcmp(src->bucket, q->bucket) == 0 && src->key_len == q->key_len &&
	    memcmp(src->key, q->key, q->key_len) == 0 && !src->replace) {
		px_s3_error(q, PX_S3_INVALID_REQUEST,
			    "This copy request is illegal because it copies an object to itself without changing its "
			    "metadata (use x-amz-metadata-directive: REPLACE)");
		return;
	}
	if (src->replace && px_s3_meta_lines_or_error(q, &src->meta) != 0)
		return;
	px_s3_defer(q, copy_work);
}
