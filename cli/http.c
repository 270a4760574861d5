/* SPDX-License-Identifier: Apache-2.0 */
/* ft's HTTP calls on libcurl: JSON requests, object bodies to and from files, redirects followed with the body. */
#include <curl/curl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/redact.h"
#include "ft.h"

/*
 * DESIGN
 * The proxy answers object requests with 307 to the owning target; curl follows it, keeps the
 * method and re-sends the body (rewound by the seek callback), and keeps the Authorization header
 * (the targets are part of the same cluster). Each call uses its own easy handle, so the parallel
 * workers of a recursive put/get share nothing but the settings read once at start.
 */

static char endpoint[1024];
static char auth[4200];
static char cacert[1024]; /* "": the system's CAs */

void cli_http_init(const ft_cli_t *c)
{
	curl_global_init(CURL_GLOBAL_ALL);
	snprintf(endpoint, sizeof(endpoint), "%s", c->endpoint);
	snprintf(cacert, sizeof(cacert), "%s", c->cacert != NULL ? c->cacert : "");
	auth[0] = '\0';
	if (c->token != NULL)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
}

void cli_encode(const char *s, char *out, size_t cap, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s != '\0' && o + 4 < cap; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		    ch == '_' || ch == '.' || ch == '~' || (keep_slash && ch == '/')) {
			out[o++] = (char)ch;
		} else {
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	out[o] = '\0';
}

void cli_obj_path(char *buf, size_t cap, const cli_bucket_t *b, const char *name)
{
	char enc[4096];

	cli_encode(name, enc, sizeof(enc), true);
	snprintf(buf, cap, "/v1/objects/%s/%s?provider=%s", b->name, enc, b->provider);
}

typedef struct {
	cli_resp_t *r;
	FILE *out;         /* body to a file (only for 2xx answers), else kept in r->body */
	int64_t *progress; /* bytes moved */
	FILE *in;          /* upload */
	int64_t in_size;
} xfer_t;

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	xfer_t *x = arg;
	size_t len = size * n;

	if (x->out != NULL && x->r->status >= 200 && x->r->status < 300) {
		if (fwrite(data, 1, len, x->out) != len)
			return 0;
		if (x->progress != NULL)
			__atomic_add_fetch(x->progress, (int64_t)len, __ATOMIC_RELAXED);
		return len;
	}
	char *p = realloc(x->r->body, x->r->len + len + 1);
	if (p == NULL)
		return 0;
	memcpy(p + x->r->len, data, len);
	x->r->body = p;
	x->r->len += len;
	p[x->r->len] = '\0';
	return len;
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	xfer_t *x = arg;
	size_t len = size * n;

	if (len > 9 && strncmp(line, "HTTP/", 5) == 0) {
		const char *sp = strchr(line, ' ');
		x->r->status = sp != NULL ? strtol(sp + 1, NULL, 10) : 0;
		x->r->props[0] = '\0';
	} else if (len > 16 && strncasecmp(line, "Ais-Bucket-Props:", 17) == 0) {
		size_t k = len - 17;
		const char *v = line + 17;
		while (k > 0 && (*v == ' ')) {
			v++;
			k--;
		}
		while (k > 0 && (v[k - 1] == '\r' || v[k - 1] == '\n'))
			k--;
		if (k < sizeof(x->r->props)) {
			memcpy(x->r->props, v, k);
			x->r->props[k] = '\0';
		}
	} else if (len > 15 && strncasecmp(line, "Content-Length:", 15) == 0) {
		x->r->length = strtoll(line + 15, NULL, 10);
	}
	return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
	xfer_t *x = arg;
	size_t got = fread(buf, 1, size * n, x->in);

	if (got > 0 && x->progress != NULL)
		__atomic_add_fetch(x->progress, (int64_t)got, __ATOMIC_RELAXED);
	if (got == 0 && ferror(x->in))
		return CURL_READFUNC_ABORT;
	return got;
}

static int on_seek(void *arg, curl_off_t off, int origin)
{
	xfer_t *x = arg;

	if (x->progress != NULL) /* a redirect re-sends: count the bytes once */
		__atomic_sub_fetch(x->progress, (int64_t)ftello(x->in) - (int64_t)off, __ATOMIC_RELAXED);
	return fseeko(x->in, (off_t)off, origin) == 0 ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_FAIL;
}

/* Runs one request; 0 with r->status, -1 with r->err. */
static int perform(const char *method, const char *path, const char *json_body, xfer_t *x)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[8192], errbuf[CURL_ERROR_SIZE] = "";
	cli_resp_t *r = x->r;
	int rc = -1;

	r->length = -1;
	if (h == NULL) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		return -1;
	}
	if (strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0)
		snprintf(url, sizeof(url), "%s", path); /* a node's own URL (ft cluster show) */
	else
		snprintf(url, sizeof(url), "%s%s", endpoint, path);
	if (auth[0])
		hdrs = curl_slist_append(hdrs, auth);
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (cacert[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, cacert);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	if (x->in != NULL) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->in_size);
		hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
	} else if (json_body != NULL) {
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	} else if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	CURLcode cc = curl_easy_perform(h);
	if (cc != CURLE_OK && r->status >= 200 && r->status < 300) { /* an answer that began, cut short */
		snprintf(r->err, sizeof(r->err), "the answer was cut short: %.400s",
			 errbuf[0] ? errbuf : curl_easy_strerror(cc));
	} else if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && r->status >= 300)) {
		char shown[FT_REDACT_URL_MAX]; /* the endpoint may hold user:password@, a path a signed query */
		snprintf(r->err, sizeof(r->err), "%s %.300s: %.400s", method, ft_redact_url(url, shown, sizeof(shown)),
			 errbuf[0] ? errbuf : curl_easy_strerror(cc));
		r->status = 0;
	} else {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
		rc = 0;
	}
	if (rc == 0 && r->status >= 400) {
		json_t *j = cli_resp_json(r);
		const char *m = json_string_value(json_object_get(j, "message"));
		snprintf(r->err, sizeof(r->err), "%s", m != NULL ? m : (r->body != NULL ? r->body : ""));
		json_decref(j);
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return rc;
}

int cli_call(const char *method, const char *path, const json_t *body, cli_resp_t *r)
{
	xfer_t x = {.r = r};
	char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = perform(method, path, text, &x);
	free(text);
	return rc;
}

int cli_get_to(const char *path, FILE *out, int64_t *progress, cli_resp_t *r)
{
	xfer_t x = {.r = r, .out = out, .progress = progress};

	memset(r, 0, sizeof(*r));
	return perform("GET", path, NULL, &x);
}

int cli_post_to(const char *path, const json_t *body, FILE *out, int64_t *progress, cli_resp_t *r)
{
	xfer_t x = {.r = r, .out = out, .progress = progress};
	char *text = json_dumps(body, JSON_COMPACT);
	int rc;

	memset(r, 0, sizeof(*r));
	if (text == NULL) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		return -1;
	}
	rc = perform("POST", path, text, &x);
	free(text);
	return rc;
}

int cli_put_from(const char *path, FILE *in, int64_t size, int64_t *progress, cli_resp_t *r)
{
	xfer_t x = {.r = r, .in = in, .in_size = size, .progress = progress};

	memset(r, 0, sizeof(*r));
	return perform("PUT", path, NULL, &x);
}

json_t *cli_resp_json(const cli_resp_t *r)
{
	return r->body != NULL ? json_loadb(r->body, r->len, 0, NULL) : NULL;
}

void cli_resp_free(cli_resp_t *r)
{
	free(r->body);
	r->body = NULL;
	r->len = 0;
}

int cli_resp_fail(const cli_resp_t *r, const char *what)
{
	char shown[FT_REDACT_URL_MAX];

	if (r->status == 0)
		return cli_fail(FT_EXIT_CONNECT, "%s: cannot reach the cluster at %s: %s", what,
				ft_redact_url(endpoint, shown, sizeof(shown)), r->err);
	if (r->status < 300)
		return cli_fail(FT_EXIT_FAIL, "%s: %s", what, r->err);
	return cli_fail(FT_EXIT_FAIL, "%s: %ld %s", what, r->status, r->err);
}
