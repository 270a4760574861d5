/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader discovery at start: bucket listing (native JSON or S3 XML, paged), -filelist, -url-list, cluster map. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/redact.h"
#include "loader.h"

#define SYNC_TIMEOUT_MS 60000

static char proxy_auth[LD_AUTH_MAX];

static int proxy_host(const ld_opts_t *o, char *err, size_t errlen)
{
	if (strchr(o->ip, ':') != NULL && o->ip[0] != '[')
		snprintf(proxy_auth, sizeof(proxy_auth), "[%s]:%d", o->ip, o->port);
	else
		snprintf(proxy_auth, sizeof(proxy_auth), "%s:%d", o->ip, o->port);
	return ld_host_get(proxy_auth, strlen(proxy_auth), o->https, err, errlen);
}

/* Keeps *max_seq up to date with names "<loaderid>-<digits>". */
static void note_seq(const ld_opts_t *o, const char *name, size_t len, uint64_t *max_seq)
{
	size_t il = strlen(o->loaderid);
	uint64_t v = 0;

	if (len <= il + 1 || memcmp(name, o->loaderid, il) != 0 || name[il] != '-' || len - il - 1 > 19)
		return;
	for (size_t i = il + 1; i < len; i++) {
		if (name[i] < '0' || name[i] > '9')
			return;
		v = v * 10 + (uint64_t)(name[i] - '0');
	}
	if (v > *max_seq)
		*max_seq = v;
}

/* Lines of a file, blank ones and '#' comments skipped; fn gets each (without line end). */
static int each_line(const char *path, int (*fn)(void *ctx, const char *line, size_t len), void *ctx, char *err,
		     size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((n = getline(&line, &cap, f)) >= 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			n--;
		if (n == 0 || line[0] == '#')
			continue;
		if (fn(ctx, line, (size_t)n) != 0) {
			snprintf(err, errlen, "%s: bad line \"%.*s\"", path, (int)(n > 200 ? 200 : n), line);
			rc = -1;
			break;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

typedef struct {
	const ld_opts_t *o;
	uint64_t max_seq;
	char err[256];
} lines_ctx_t;

static int add_filelist_line(void *ctx, const char *line, size_t len)
{
	lines_ctx_t *c = ctx;

	if (len > LD_NAME_MAX)
		return -1;
	note_seq(c->o, line, len, &c->max_seq);
	return ld_objs_add_named(line, len, 0, -1);
}

static int add_url_line(void *ctx, const char *line, size_t len)
{
	lines_ctx_t *c = ctx;
	char url[LD_PATH_MAX + LD_AUTH_MAX];
	const char *auth, *path;
	size_t alen;
	int host;
	bool tls;

	if (len >= sizeof(url))
		return -1;
	memcpy(url, line, len);
	url[len] = '\0';
	if (ld_url_split(url, &auth, &alen, &path, &tls) != 0 || auth == NULL || strlen(path) >= LD_PATH_MAX)
		return -1;
	host = ld_host_get(auth, alen, tls, c->err, sizeof(c->err));
	if (host < 0)
		return -1;
	return ld_objs_add_named(path, strlen(path), 0, host);
}

/* One page of the native listing. Returns 0 (token updated, "" at the end), 1 for 404, -1 on error. */
static int native_page(const ld_opts_t *o, int host, char *token, size_t token_cap, uint64_t *max_seq, char *err,
		       size_t errlen)
{
	char path[LD_PATH_MAX];
	ld_buf_t b = {path, 0, sizeof(path) - 1, false};
	ld_sync_resp_t r;
	json_t *j = NULL, *entries, *e;
	json_error_t je;
	size_t i;
	int rc = -1;

	ld_buf_str(&b, "/v1/buckets/");
	ld_buf_escape(&b, o->bucket, strlen(o->bucket), false);
	ld_buf_str(&b, "?pagesize=10000");
	if (strcmp(o->provider, "ais") != 0) {
		ld_buf_str(&b, "&provider=");
		ld_buf_escape(&b, o->provider, strlen(o->provider), false);
	}
	if (token[0]) {
		ld_buf_str(&b, "&continuation_token=");
		ld_buf_escape(&b, token, strlen(token), false);
	}
	if (b.overflow) {
		snprintf(err, errlen, "listing URL too long");
		return -1;
	}
	path[b.len] = '\0';
	ld_reqspec_t rs = {
		.method = "GET", .authority = ld_host_at(host)->authority, .path = path, .content_length = -1};
	if (ld_sync_do(host, &rs, NULL, 0, &r, SYNC_TIMEOUT_MS, err, errlen) != 0)
		return -1;
	if (r.status == 404) {
		rc = 1;
		goto out;
	}
	if (r.status != 200) {
		snprintf(err, errlen, "list bucket \"%s\": HTTP %d: %.300s", o->bucket, r.status, r.body);
		goto out;
	}
	j = json_loadb(r.body, r.body_len, 0, &je);
	entries = j != NULL ? json_object_get(j, "entries") : NULL;
	if (!json_is_array(entries)) {
		snprintf(err, errlen, "list bucket \"%s\": unexpected reply %.200s", o->bucket, r.body);
		goto out;
	}
	json_array_foreach(entries, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		json_int_t size = json_integer_value(json_object_get(e, "size"));
		if (name == NULL)
			continue;
		note_seq(o, name, strlen(name), max_seq);
		if (ld_objs_add_named(name, strlen(name), (uint64_t)size, -1) != 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	const char *next = json_string_value(json_object_get(j, "continuation_token"));
	snprintf(token, token_cap, "%s", next != NULL ? next : "");
	if (token[0] && json_array_size(entries) == 0) {
		snprintf(err, errlen, "list bucket \"%s\": empty page with a continuation token", o->bucket);
		goto out;
	}
	rc = 0;
out:
	json_decref(j);
	free(r.body);
	return rc;
}

static int create_bucket(const ld_opts_t *o, int host, char *err, size_t errlen)
{
	static const char body[] = "{\"action\":\"create-bck\"}";
	char path[LD_PATH_MAX];
	ld_buf_t b = {path, 0, sizeof(path) - 1, false};
	ld_sync_resp_t r;
	int rc = -1;

	ld_buf_str(&b, "/v1/buckets/");
	ld_buf_escape(&b, o->bucket, strlen(o->bucket), false);
	path[b.len] = '\0';
	ld_reqspec_t rs = {.method = "POST",
			   .authority = ld_host_at(host)->authority,
			   .path = path,
			   .content_length = (int64_t)sizeof(body) - 1};
	if (ld_sync_do(host, &rs, body, sizeof(body) - 1, &r, SYNC_TIMEOUT_MS, err, errlen) != 0)
		return -1;
	if (r.status == 200 || r.status == 201 || r.status == 409)
		rc = 0;
	else
		snprintf(err, errlen, "create bucket \"%s\": HTTP %d: %.300s", o->bucket, r.status, r.body);
	free(r.body);
	return rc;
}

int ld_destroy_bucket(const ld_opts_t *o, char *err, size_t errlen)
{
	char path[LD_PATH_MAX];
	ld_buf_t b = {path, 0, sizeof(path) - 1, false};
	ld_sync_resp_t r;
	int host = proxy_host(o, err, errlen), rc = -1;

	if (host < 0)
		return -1;
	ld_buf_str(&b, "/v1/buckets/");
	ld_buf_escape(&b, o->bucket, strlen(o->bucket), false);
	path[b.len] = '\0';
	ld_reqspec_t rs = {
		.method = "DELETE", .authority = ld_host_at(host)->authority, .path = path, .content_length = -1};
	if (ld_sync_do(host, &rs, NULL, 0, &r, SYNC_TIMEOUT_MS, err, errlen) != 0)
		return -1;
	if (r.status == 200 || r.status == 404)
		rc = 0;
	else
		snprintf(err, errlen, "destroy bucket \"%s\": HTTP %d: %.300s", o->bucket, r.status, r.body);
	free(r.body);
	return rc;
}

/* ---- S3 ListObjectsV2 ---- */

/* XML text with the five entities and numeric references decoded, into out (cap). Returns the length or -1. */
static ssize_t xml_text(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '&') {
			const char *semi = memchr(s + i, ';', n - i);
			if (semi == NULL)
				return -1;
			size_t el = (size_t)(semi - (s + i));
			if (el == 4 && memcmp(s + i, "&amp", 4) == 0)
				c = '&';
			else if (el == 3 && memcmp(s + i, "&lt", 3) == 0)
				c = '<';
			else if (el == 3 && memcmp(s + i, "&gt", 3) == 0)
				c = '>';
			else if (el == 5 && memcmp(s + i, "&quot", 5) == 0)
				c = '"';
			else if (el == 5 && memcmp(s + i, "&apos", 5) == 0)
				c = '\'';
			else if (el > 2 && s[i + 1] == '#') {
				long v = s[i + 2] == 'x' ? strtol(s + i + 3, NULL, 16) : strtol(s + i + 2, NULL, 10);
				if (v <= 0 || v > 0x7f)
					return -1; /* non-ASCII references do not occur in keys we write */
				c = (char)v;
			} else {
				return -1;
			}
			i += el;
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = c;
	}
	out[o] = '\0';
	return (ssize_t)o;
}

/* The text of the first <tag> in [p, end); NULL if absent. */
static const char *xml_find(const char *p, const char *end, const char *tag, size_t *len)
{
	char open[64], close[64];
	const char *a, *b;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	a = memmem(p, (size_t)(end - p), open, strlen(open));
	if (a == NULL)
		return NULL;
	a += strlen(open);
	b = memmem(a, (size_t)(end - a), close, strlen(close));
	if (b == NULL)
		return NULL;
	*len = (size_t)(b - a);
	return a;
}

static int s3_page(const ld_opts_t *o, int host, const char *prefix, char *token, size_t token_cap, uint64_t *max_seq,
		   char *err, size_t errlen)
{
	char path[LD_PATH_MAX], key[LD_NAME_MAX + 1];
	ld_buf_t b = {path, 0, sizeof(path) - 1, false};
	ld_sync_resp_t r;
	const char *p, *end, *v;
	size_t vl;
	int rc = -1;

	ld_buf_str(&b, prefix);
	if (o->s3_path_style) {
		ld_buf_str(&b, "/");
		ld_buf_escape(&b, o->bucket, strlen(o->bucket), false);
	}
	ld_buf_str(&b, "?");
	if (token[0]) { /* SigV4 wants the query sorted: continuation-token < list-type < max-keys */
		ld_buf_str(&b, "continuation-token=");
		ld_buf_escape(&b, token, strlen(token), false);
		ld_buf_str(&b, "&");
	}
	ld_buf_str(&b, "list-type=2&max-keys=1000");
	if (b.overflow) {
		snprintf(err, errlen, "listing URL too long");
		return -1;
	}
	path[b.len] = '\0';
	if (!o->s3_path_style && path[0] == '?') {
		memmove(path + 1, path, b.len + 1);
		path[0] = '/';
	}
	ld_reqspec_t rs = {.method = "GET",
			   .authority = ld_host_at(host)->authority,
			   .path = path,
			   .content_length = -1,
			   .s3_sign = true};
	if (ld_sync_do(host, &rs, NULL, 0, &r, SYNC_TIMEOUT_MS, err, errlen) != 0)
		return -1;
	if (r.status != 200) {
		snprintf(err, errlen, "S3 list bucket \"%s\": HTTP %d: %.300s", o->bucket, r.status, r.body);
		goto out;
	}
	p = r.body;
	end = r.body + r.body_len;
	if (memmem(p, r.body_len, "<ListBucketResult", 17) == NULL) {
		/* e.g. a server without virtual-hosted buckets answering ListBuckets: say so, do not read it as empty */
		snprintf(err, errlen, "S3 list bucket \"%s\": the reply is no ListBucketResult%s: %.200s", o->bucket,
			 o->s3_path_style ? "" : " (try -s3-use-path-style)", r.body);
		goto out;
	}
	for (;;) {
		const char *c = memmem(p, (size_t)(end - p), "<Contents>", 10), *ce;
		if (c == NULL)
			break;
		ce = memmem(c, (size_t)(end - c), "</Contents>", 11);
		if (ce == NULL)
			break;
		v = xml_find(c, ce, "Key", &vl);
		ssize_t kl = v != NULL ? xml_text(v, vl, key, sizeof(key)) : -1;
		if (kl <= 0) {
			snprintf(err, errlen, "S3 list: bad <Key>");
			goto out;
		}
		v = xml_find(c, ce, "Size", &vl);
		uint64_t size = v != NULL ? strtoull(v, NULL, 10) : 0;
		note_seq(o, key, (size_t)kl, max_seq);
		if (ld_objs_add_named(key, (size_t)kl, size, -1) != 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		p = ce + 11;
	}
	token[0] = '\0';
	v = xml_find(r.body, end, "IsTruncated", &vl);
	if (v != NULL && vl == 4 && memcmp(v, "true", 4) == 0) {
		v = xml_find(r.body, end, "NextContinuationToken", &vl);
		if (v == NULL || xml_text(v, vl, token, token_cap) <= 0) {
			snprintf(err, errlen, "S3 list: truncated page without NextContinuationToken");
			goto out;
		}
	}
	rc = 0;
out:
	free(r.body);
	return rc;
}

static int s3_list(const ld_opts_t *o, uint64_t *max_seq, char *err, size_t errlen)
{
	const char *auth, *path;
	size_t alen, plen;
	char prefix[512], host_name[LD_AUTH_MAX + 300], token[2048] = "";
	int host;
	bool tls;

	if (ld_url_split(o->s3endpoint, &auth, &alen, &path, &tls) != 0 || auth == NULL) {
		char shown[FT_REDACT_URL_MAX];
		snprintf(err, errlen, "bad -s3endpoint \"%s\"", ft_redact_url(o->s3endpoint, shown, sizeof(shown)));
		return -1;
	}
	plen = strcspn(path, "?#");
	while (plen > 0 && path[plen - 1] == '/')
		plen--;
	snprintf(prefix, sizeof(prefix), "%.*s", (int)plen, path);
	host = ld_host_get(auth, alen, tls, err, errlen);
	if (host < 0)
		return -1;
	if (!o->s3_path_style) {
		snprintf(host_name, sizeof(host_name), "%s.%.*s", o->bucket, (int)alen, auth);
		host = ld_host_alias(host_name, strlen(host_name), host, err, errlen);
		if (host < 0)
			return -1;
	}
	do {
		if (s3_page(o, host, prefix, token, sizeof(token), max_seq, err, errlen) != 0)
			return -1;
	} while (token[0]);
	return 0;
}

int ld_discover(const ld_opts_t *o, uint64_t *seq_first, bool *created, char *err, size_t errlen)
{
	uint64_t max_seq = 0;
	lines_ctx_t lc = {.o = o};
	char token[2048] = "";
	int host, rc;

	*created = false;
	if (o->api == LD_API_URLS) {
		if (each_line(o->url_list, add_url_line, &lc, err, errlen) != 0) {
			if (lc.err[0])
				snprintf(err, errlen, "%s", lc.err);
			return -1;
		}
		if (ld_objs_count() == 0) {
			snprintf(err, errlen, "%s holds no URLs", o->url_list);
			return -1;
		}
		*seq_first = 1;
		return 0;
	}
	if (o->filelist[0]) {
		if (each_line(o->filelist, add_filelist_line, &lc, err, errlen) != 0)
			return -1;
		*seq_first = lc.max_seq + 1;
		return 0;
	}
	if (o->api == LD_API_S3) {
		if (s3_list(o, &max_seq, err, errlen) != 0)
			return -1;
		*seq_first = max_seq + 1;
		return 0;
	}
	host = proxy_host(o, err, errlen);
	if (host < 0)
		return -1;
	do {
		rc = native_page(o, host, token, sizeof(token), &max_seq, err, errlen);
		if (rc < 0)
			return -1;
		if (rc == 1) {
			if (o->pctput == 0) {
				snprintf(err, errlen, "bucket \"%s\" does not exist (and -pctput is 0)", o->bucket);
				return -1;
			}
			if (create_bucket(o, host, err, errlen) != 0)
				return -1;
			*created = true;
			break;
		}
	} while (token[0]);
	*seq_first = max_seq + 1;
	return 0;
}

ft_smap_t *ld_fetch_smap(const ld_opts_t *o, char *err, size_t errlen)
{
	ld_sync_resp_t r;
	json_t *j;
	json_error_t je;
	ft_smap_t *m = NULL;
	int host = proxy_host(o, err, errlen);

	if (host < 0)
		return NULL;
	ld_reqspec_t rs = {.method = "GET",
			   .authority = ld_host_at(host)->authority,
			   .path = "/v1/cluster?what=smap",
			   .content_length = -1};
	if (ld_sync_do(host, &rs, NULL, 0, &r, SYNC_TIMEOUT_MS, err, errlen) != 0)
		return NULL;
	if (r.status != 200) {
		snprintf(err, errlen, "cluster map: HTTP %d: %.300s", r.status, r.body);
		free(r.body);
		return NULL;
	}
	j = json_loadb(r.body, r.body_len, 0, &je);
	if (j == NULL)
		snprintf(err, errlen, "cluster map: not JSON: %s", je.text);
	else
		m = ft_smap_from_json(j, err, errlen);
	json_decref(j);
	free(r.body);
	return m;
}
