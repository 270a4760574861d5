/* SPDX-License-Identifier: Apache-2.0 */
/* Object transfers of the copy and download jobs: HEAD, PUT of a local file, DELETE on an owner; GET of any URL. */
#include "xact/xfer.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/jwt.h"
#include "base/codec.h"
#include "base/redact.h"
#include "rpc/client.h"

/*
 * DESIGN
 * A copied or downloaded object enters its destination through the owner's public port, as a
 * client's PUT would: the owner checks the name and the space, computes the bucket's checksum,
 * makes the bucket's mirror copies and EC slices and, for a remote bucket, writes through to the
 * backend. So a copy job needs no second write path. The body streams from a local file (the
 * source's object or the download's temporary file), never through memory. Each call uses its own
 * curl handle: transfers are whole objects, so the handle's setup is small next to them.
 */

#define XFER_CONNECT_MS 10000L
#define XFER_LOW_SPEED_S 60L /* a transfer that moves under 1 byte/s this long is cut */
#define XFER_TOKEN_S 600     /* lifetime of the cluster token a request to an owner carries (auth on) */

int tgt_xfer_obj_url(char *buf, size_t cap, const char *base, const char *provider, const char *bucket,
		     const char *name)
{
	char *enc = ft_pct_encode_dup(name, strlen(name), FT_PCT_KEEP_SLASH);
	int n;

	if (enc == NULL)
		return -1;
	n = snprintf(buf, cap, "%s/v1/objects/%s/%s?provider=%s", base, bucket, enc, provider);
	free(enc);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* One "Name: value" response header line into h. */
static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	tgt_xfer_head_t *h = arg;
	size_t len = size * n;
	char buf[256];
	char *colon, *v, *end;

	if (h == NULL || len >= sizeof(buf))
		return len;
	memcpy(buf, line, len);
	buf[len] = '\0';
	colon = strchr(buf, ':');
	if (colon == NULL)
		return len;
	*colon = '\0';
	for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
		;
	for (end = v + strlen(v); end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '); end--)
		;
	*end = '\0';
	if (strcasecmp(buf, "Ais-Checksum-Type") == 0)
		snprintf(h->cksum_type, sizeof(h->cksum_type), "%s", v);
	else if (strcasecmp(buf, "Ais-Checksum-Value") == 0)
		snprintf(h->cksum, sizeof(h->cksum), "%s", v);
	else if (strcasecmp(buf, "Content-Length") == 0 && h->size < 0)
		h->size = strtoll(v, NULL, 10);
	else if (strcasecmp(buf, "Ais-Size") == 0)
		h->size = strtoll(v, NULL, 10);
	return len;
}

/* Response bodies of HEAD/PUT/DELETE: the first bytes kept for an error message. */
typedef struct {
	char text[1024]; /* the start of an answer's body (an error's JSON) */
	size_t len;
	int fd; /* >= 0: a fetch writes the body here */
	int64_t written;
	atomic_llong *progress;
	int failed_errno;
} sink_t;

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	sink_t *s = arg;
	size_t len = size * n;

	if (s->fd >= 0) {
		for (size_t off = 0; off < len;) {
			ssize_t w = pwrite(s->fd, data + off, len - off, (off_t)s->written);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				s->failed_errno = errno;
				return 0; /* curl stops: CURLE_WRITE_ERROR */
			}
			off += (size_t)w;
			s->written += w;
			if (s->progress != NULL)
				atomic_store(s->progress, s->written);
		}
		return len;
	}
	if (s->len + 1 < sizeof(s->text)) {
		size_t k = len < sizeof(s->text) - 1 - s->len ? len : sizeof(s->text) - 1 - s->len;
		memcpy(s->text + s->len, data, k);
		s->len += k;
		s->text[s->len] = '\0';
	}
	return len;
}

/* A PUT body read from a file. */
typedef struct {
	int fd;
	int64_t off, size;
	int failed_errno;
} source_t;

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
	source_t *s = arg;
	size_t want = size * n;
	ssize_t r;

	if (s->off >= s->size)
		return 0;
	if ((int64_t)want > s->size - s->off)
		want = (size_t)(s->size - s->off);
	do
		r = pread(s->fd, buf, want, (off_t)s->off);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		s->failed_errno = r < 0 ? errno : EIO; /* shrank under us */
		return CURL_READFUNC_ABORT;
	}
	s->off += r;
	return (size_t)r;
}

/* The common options of a request on h. */
static void setup(CURL *h, const char *url, char *errbuf, sink_t *sink, tgt_xfer_head_t *head)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	ft_client_tls_apply(h);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, XFER_CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, XFER_LOW_SPEED_S);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, sink);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, head);
}

/* Runs h; 0 with *status, or -1 with err (a transport failure). */
static int perform(CURL *h, const char *what, const char *url, char *errbuf, long *status, char *err, size_t cap)
{
	CURLcode rc = curl_easy_perform(h);
	char shown[FT_REDACT_URL_MAX];

	if (rc != CURLE_OK) {
		snprintf(err, cap, "%s %s: %s", what, ft_redact_url(url, shown, sizeof(shown)),
			 errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return -1;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

/* The error message of an answer: its JSON "message" when there is one, else its first bytes. */
static void answer_error(const sink_t *s, const char *what, long status, char *err, size_t cap)
{
	json_t *doc = json_loadb(s->text, s->len, 0, NULL);
	const char *m = json_string_value(json_object_get(doc, "message"));

	snprintf(err, cap, "%s: %ld %s", what, status, m != NULL ? m : s->text);
	json_decref(doc);
}

/*
 * With auth on, "Authorization: Bearer" with a short-lived admin token of the cluster appended to l:
 * only for requests to an owner's public port, never to a download's origin.
 */
static struct curl_slist *cluster_auth(struct curl_slist *l)
{
	const ft_auth_t *a = ft_auth();
	ft_principal_t p = {.sub = "cluster", .role = FT_ROLE_ADMIN};
	time_t now = time(NULL);
	char *tok, *line;

	if (!a->enabled || (tok = ft_jwt_issue(a->jwt_key, &p, now, now + XFER_TOKEN_S)) == NULL)
		return l;
	line = malloc(strlen(tok) + sizeof("Authorization: Bearer "));
	if (line != NULL) {
		sprintf(line, "Authorization: Bearer %s", tok);
		l = curl_slist_append(l, line);
		free(line);
	}
	free(tok);
	return l;
}

int tgt_xfer_head(const char *url, tgt_xfer_head_t *h, char *err, size_t cap)
{
	CURL *c = curl_easy_init();
	char errbuf[CURL_ERROR_SIZE] = "";
	sink_t sink = {.fd = -1};
	long status = 0;
	int rc = -1;

	memset(h, 0, sizeof(*h));
	h->size = -1;
	if (c == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	struct curl_slist *hdrs = cluster_auth(NULL);
	setup(c, url, errbuf, &sink, h);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
	if (perform(c, "HEAD", url, errbuf, &status, err, cap) == 0) {
		if (status == 200)
			rc = 1;
		else if (status == 404)
			rc = 0;
		else
			snprintf(err, cap, "HEAD of the destination: %ld", status);
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	return rc;
}

/* Request headers for lom's Content-Type and user metadata; NULL when none. */
static struct curl_slist *meta_headers(const ft_lom_t *lom, bool verify, struct curl_slist *l)
{
	char line[FT_LOM_UMETA_MAX + 32];

	l = curl_slist_append(l, "Expect:");
	if (lom == NULL)
		return l;
	if (verify && lom->cksum_type != FT_CKSUM_NONE && lom->cksum[0] != '\0') {
		snprintf(line, sizeof(line), "Ais-Checksum-Type: %s", ft_cksum_name(lom->cksum_type));
		l = curl_slist_append(l, line);
		snprintf(line, sizeof(line), "Ais-Checksum-Value: %s", lom->cksum);
		l = curl_slist_append(l, line);
	}
	if (lom->content_type[0] != '\0') {
		snprintf(line, sizeof(line), "Content-Type: %s", lom->content_type);
		l = curl_slist_append(l, line);
	} else {
		l = curl_slist_append(l, "Content-Type: application/octet-stream");
	}
	for (const char *p = lom->user_meta; *p != '\0';) {
		const char *nl = strchr(p, '\n'), *colon;
		size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
		colon = memchr(p, ':', n);
		if (colon != NULL && n < sizeof(line) - 2) {
			int k = snprintf(line, sizeof(line), "%.*s: %.*s", (int)(colon - p), p,
					 (int)(n - (size_t)(colon - p) - 1), colon + 1);
			if (k > 0)
				l = curl_slist_append(l, line);
		}
		p += n + (nl != NULL);
	}
	return l;
}

int tgt_xfer_put(const char *url, int fd, int64_t size, const ft_lom_t *lom, bool verify, tgt_xfer_head_t *h, char *err,
		 size_t cap)
{
	CURL *c = curl_easy_init();
	char errbuf[CURL_ERROR_SIZE] = "";
	sink_t sink = {.fd = -1};
	source_t src = {.fd = fd, .size = size};
	struct curl_slist *hdrs = cluster_auth(meta_headers(lom, verify, NULL));
	long status = 0;
	int rc = -1;

	memset(h, 0, sizeof(*h));
	h->size = -1;
	if (c == NULL || hdrs == NULL) {
		snprintf(err, cap, "out of memory");
		goto out;
	}
	setup(c, url, errbuf, &sink, h);
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
	curl_easy_setopt(c, CURLOPT_READDATA, &src);
	curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	if (perform(c, "PUT", url, errbuf, &status, err, cap) != 0) {
		if (src.failed_errno != 0)
			snprintf(err, cap, "reading the source: %s", strerror(src.failed_errno));
		goto out;
	}
	if (status != 200) {
		answer_error(&sink, "PUT to the destination", status, err, cap);
		goto out;
	}
	rc = 0;
out:
	curl_slist_free_all(hdrs);
	if (c != NULL)
		curl_easy_cleanup(c);
	return rc;
}

int tgt_xfer_delete(const char *url, char *err, size_t cap)
{
	CURL *c = curl_easy_init();
	char errbuf[CURL_ERROR_SIZE] = "";
	sink_t sink = {.fd = -1};
	long status = 0;
	int rc = -1;

	if (c == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	struct curl_slist *hdrs = cluster_auth(NULL);
	setup(c, url, errbuf, &sink, NULL);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
	if (perform(c, "DELETE", url, errbuf, &status, err, cap) == 0) {
		if (status == 200 || status == 204 || status == 404)
			rc = 0;
		else
			answer_error(&sink, "DELETE of the destination", status, err, cap);
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	return rc;
}

/* GET url into fd; auth: with the cluster's token (a target's own port), else none (any server). */
static int fetch(const char *url, int fd, atomic_llong *progress, int64_t *bytes, long *status, int *retry, char *err,
		 size_t cap, int auth)
{
	struct curl_slist *hdrs = auth ? cluster_auth(NULL) : NULL;
	CURL *c = curl_easy_init();
	char errbuf[CURL_ERROR_SIZE] = "";
	sink_t sink = {.fd = fd, .progress = progress};
	int rc = -1;

	*status = 0;
	*retry = 1;
	*bytes = 0;
	if (c == NULL) {
		snprintf(err, cap, "out of memory");
		curl_slist_free_all(hdrs);
		return -1;
	}
	setup(c, url, errbuf, &sink, NULL);
	if (hdrs != NULL)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FAILONERROR, 0L);
	if (ftruncate(fd, 0) != 0) {
		snprintf(err, cap, "truncating the work file: %s", strerror(errno));
		*retry = 0;
		goto out;
	}
	if (perform(c, "GET", url, errbuf, status, err, cap) != 0) {
		if (sink.failed_errno != 0) {
			snprintf(err, cap, "writing the work file: %s", strerror(sink.failed_errno));
			*retry = 0;
		}
		goto out;
	}
	if (*status != 200) {
		*retry = *status == 408 || *status == 429 || *status >= 500;
		char shown[FT_REDACT_URL_MAX];
		snprintf(err, cap, "GET %s: HTTP %ld", ft_redact_url(url, shown, sizeof(shown)), *status);
		goto out;
	}
	*bytes = sink.written;
	rc = 0;
out:
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	return rc;
}

int tgt_xfer_fetch(const char *url, int fd, atomic_llong *progress, int64_t *bytes, long *status, int *retry, char *err,
		   size_t cap)
{
	return fetch(url, fd, progress, bytes, status, retry, err, cap, 0);
}

int tgt_xfer_get(const char *url, int fd, int64_t *bytes, long *status, char *err, size_t cap)
{
	int retry;

	return fetch(url, fd, NULL, bytes, status, &retry, err, cap, 1);
}
