/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader HTTP/1.1 client pieces: incremental response parser, request head writer, URL escaping. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "http/parse.h"
#include "loader.h"

/* ---- buffers ---- */
void ld_buf_add(ld_buf_t *b, const char *s, size_t n)
{
	if (b->overflow || n > b->cap - b->len) {
		b->overflow = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

void ld_buf_str(ld_buf_t *b, const char *s)
{
	ld_buf_add(b, s, strlen(s));
}

void ld_buf_u64(ld_buf_t *b, uint64_t v)
{
	char tmp[24];
	int i = (int)sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	ld_buf_add(b, tmp + i, sizeof(tmp) - (size_t)i);
}

void ld_buf_escape(ld_buf_t *b, const char *s, size_t n, bool keep_slash)
{
	for (size_t i = 0; i < n; i++) {
		char e[4]; /* one byte encoded, and the NUL */
		ld_buf_add(b, e, ft_pct_encode(&s[i], 1, e, keep_slash ? FT_PCT_KEEP_SLASH : 0));
	}
}

/* ---- access token ---- */
static char bearer[4200]; /* "Authorization: Bearer <token>\r\n", or "" */

int ld_token_load(char *err, size_t errlen)
{
	const char *env = getenv("FT_TOKEN"), *dir = getenv("FT_STATE_DIR");
	char tok[4100] = "", path[4096];
	size_t n;

	if (env != NULL && env[0] != '\0') {
		snprintf(tok, sizeof(tok), "%s", env);
	} else if (dir != NULL && dir[0] != '\0') {
		snprintf(path, sizeof(path), "%s/token", dir);
		FILE *f = fopen(path, "r");
		if (f == NULL) {
			snprintf(err, errlen, "FT_STATE_DIR: cannot read %s: %s", path, strerror(errno));
			return -1;
		}
		n = fread(tok, 1, sizeof(tok) - 1, f);
		tok[n] = '\0';
		fclose(f);
	}
	n = strlen(tok);
	while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
		tok[--n] = '\0';
	if (strpbrk(tok, "\r\n") != NULL) {
		snprintf(err, errlen, "the access token holds a line break");
		return -1;
	}
	if (n > 0)
		snprintf(bearer, sizeof(bearer), "Authorization: Bearer %s\r\n", tok);
	return 0;
}

/* ---- request head ---- */
int ld_req_write(ld_buf_t *b, const ld_reqspec_t *rs)
{
	b->len = 0;
	b->overflow = false;
	ld_buf_str(b, rs->method);
	ld_buf_add(b, " ", 1);
	ld_buf_str(b, rs->path);
	ld_buf_add(b, " HTTP/1.1\r\nHost: ", 17);
	ld_buf_str(b, rs->authority);
	ld_buf_add(b, "\r\n", 2);
	if (rs->range) {
		ld_buf_add(b, "Range: bytes=", 13);
		ld_buf_u64(b, rs->range_off);
		ld_buf_add(b, "-", 1);
		if (rs->range_len > 0)
			ld_buf_u64(b, rs->range_off + rs->range_len - 1);
		ld_buf_add(b, "\r\n", 2);
	}
	if (rs->content_length >= 0) {
		ld_buf_add(b, "Content-Length: ", 16);
		ld_buf_u64(b, (uint64_t)rs->content_length);
		ld_buf_add(b, "\r\n", 2);
	}
	if (rs->expect_continue)
		ld_buf_str(b, "Expect: 100-continue\r\n");
	if (rs->s3_sign && ld_s3_sign_headers(b, rs) != 0)
		return -1;
	if (!rs->s3_sign && bearer[0] != '\0')
		ld_buf_str(b, bearer);
	ld_buf_add(b, "\r\n", 2);
	return b->overflow ? -1 : 0;
}

/* ---- response parser ---- */
void ld_resp_reset(ld_resp_t *r, bool head_request)
{
	r->state = LD_RESP_HEAD;
	r->status = 0;
	r->minor = 1;
	r->chunked = false;
	r->keep_alive = false;
	r->no_body = head_request;
	r->content_length = -1;
	r->left = 0;
	r->body_bytes = 0;
	r->hlen = 0;
	r->location[0] = '\0';
	r->cksum_type[0] = '\0';
	r->cksum_value[0] = '\0';
}

void ld_resp_free(ld_resp_t *r)
{
	free(r->hbuf);
	r->hbuf = NULL;
}

static void copy_value(char *dst, size_t cap, const char *v, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

/* Takes a parsed head: status, framing, keep-alive, the headers kept, and the body state. Returns 0 or -1. */
static int head_apply(ld_resp_t *r, const ft_hp_resp_head_t *h, const ft_hp_header_t *hdrs, char *err, size_t errlen)
{
	r->minor = h->version_minor;
	r->status = h->status;
	r->chunked = h->chunked;
	r->content_length = h->content_length;
	r->keep_alive = h->keep_alive;
	for (size_t i = 0; i < h->nheaders; i++) {
		const ft_hp_header_t *x = &hdrs[i];

		if (ft_hp_token_eq(x->name, x->name_len, "location")) {
			if (x->value_len >= sizeof(r->location)) {
				snprintf(err, errlen, "Location longer than %zu bytes", sizeof(r->location) - 1);
				return -1;
			}
			copy_value(r->location, sizeof(r->location), x->value, x->value_len);
		} else if (ft_hp_token_eq(x->name, x->name_len, "ais-checksum-type")) {
			copy_value(r->cksum_type, sizeof(r->cksum_type), x->value, x->value_len);
		} else if (ft_hp_token_eq(x->name, x->name_len, "ais-checksum-value")) {
			copy_value(r->cksum_value, sizeof(r->cksum_value), x->value, x->value_len);
		}
	}
	if (r->status < 200 || r->status == 204 || r->status == 304 || r->no_body) {
		r->state = LD_RESP_DONE;
	} else if (r->chunked) {
		r->state = LD_RESP_CHUNKED;
		ft_hp_chunked_init(&r->chunk);
	} else if (r->content_length >= 0) {
		r->left = (uint64_t)r->content_length;
		r->state = r->left == 0 ? LD_RESP_DONE : LD_RESP_BODY_LEN;
	} else {
		r->state = LD_RESP_BODY_EOF;
		r->keep_alive = false;
	}
	return 0;
}

/* Says in err why the head h[0..len) did not parse (rc); returns -1. */
static ssize_t head_fail(ft_hp_result_t rc, const char *h, size_t len, char *err, size_t errlen)
{
	size_t line = 0;

	while (line < len && line < 60 && h[line] != '\r' && h[line] != '\n')
		line++;
	if (rc == FT_HP_TOO_LARGE)
		snprintf(err, errlen, "response head larger than %d bytes or with more than %d headers", LD_HEAD_MAX,
			 LD_HEADERS_MAX);
	else if (rc == FT_HP_VERSION)
		snprintf(err, errlen, "not an HTTP/1.x response \"%.*s\"", (int)line, h);
	else
		snprintf(err, errlen, "malformed response head \"%.*s\"", (int)line, h);
	return -1;
}

/* Head bytes: parsed in place when complete in p, else gathered in hbuf. Returns bytes used or -1. */
static ssize_t feed_head(ld_resp_t *r, const char *p, size_t n, char *err, size_t errlen)
{
	ft_hp_header_t hdrs[LD_HEADERS_MAX];
	ft_hp_resp_head_t h;
	ft_hp_result_t rc = FT_HP_AGAIN;
	size_t take, had = r->hlen;

	if (had == 0) {
		rc = ft_hp_parse_resp_head(p, n, LD_HEAD_MAX, hdrs, LD_HEADERS_MAX, &h);
		if (rc == FT_HP_DONE)
			return head_apply(r, &h, hdrs, err, errlen) == 0 ? (ssize_t)h.head_len : -1;
		if (rc != FT_HP_AGAIN)
			return head_fail(rc, p, n, err, errlen);
	}
	if (r->hbuf == NULL && (r->hbuf = malloc(LD_HEAD_MAX)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* a first piece that is not yet a whole head has at most LD_HEAD_MAX bytes: all of it fits */
	take = n < LD_HEAD_MAX - had ? n : LD_HEAD_MAX - had;
	memcpy(r->hbuf + had, p, take);
	r->hlen += take;
	if (had > 0)
		rc = ft_hp_parse_resp_head(r->hbuf, r->hlen, LD_HEAD_MAX, hdrs, LD_HEADERS_MAX, &h);
	if (rc == FT_HP_AGAIN) {
		if (r->hlen == LD_HEAD_MAX)
			return head_fail(FT_HP_TOO_LARGE, r->hbuf, r->hlen, err, errlen);
		return (ssize_t)take;
	}
	r->hlen = 0;
	if (rc != FT_HP_DONE)
		return head_fail(rc, r->hbuf, had + take, err, errlen);
	return head_apply(r, &h, hdrs, err, errlen) == 0 ? (ssize_t)(h.head_len - had) : -1; /* p's bytes of the head */
}

/* Decodes chunked body bytes from p[0..n): data to fn, *used advanced. Returns 0 or -1. */
static int chunked_feed(ld_resp_t *r, const char *p, size_t n, size_t *used, ld_body_fn fn, void *ctx, char *err,
			size_t errlen)
{
	const char *data;
	size_t consumed, data_len;
	ft_hp_chunk_result_t cr = ft_hp_chunked_decode(&r->chunk, p, n, &consumed, &data, &data_len);

	if (cr == FT_HP_CHUNK_BAD || consumed == 0) {
		snprintf(err, errlen, "malformed chunked body");
		return -1;
	}
	if (data_len > 0 && fn != NULL)
		fn(ctx, data, data_len);
	r->body_bytes += data_len;
	*used += consumed;
	if (cr == FT_HP_CHUNK_DONE)
		r->state = LD_RESP_DONE;
	return 0;
}

ssize_t ld_resp_feed(ld_resp_t *r, const char *p, size_t n, ld_body_fn fn, void *ctx, char *err, size_t errlen)
{
	size_t used = 0, take;
	ssize_t k;

	while (used < n && r->state != LD_RESP_DONE) {
		switch (r->state) {
		case LD_RESP_HEAD:
			k = feed_head(r, p + used, n - used, err, errlen);
			if (k < 0)
				return -1;
			used += (size_t)k;
			break;
		case LD_RESP_BODY_LEN:
			take = n - used < r->left ? n - used : (size_t)r->left;
			if (fn != NULL)
				fn(ctx, p + used, take);
			r->body_bytes += take;
			r->left -= take;
			used += take;
			if (r->left == 0)
				r->state = LD_RESP_DONE;
			break;
		case LD_RESP_CHUNKED:
			if (chunked_feed(r, p + used, n - used, &used, fn, ctx, err, errlen) != 0)
				return -1;
			break;
		case LD_RESP_BODY_EOF:
			if (fn != NULL)
				fn(ctx, p + used, n - used);
			r->body_bytes += n - used;
			used = n;
			break;
		default:
			snprintf(err, errlen, "response parser in a bad state");
			return -1;
		}
	}
	return (ssize_t)used;
}

bool ld_resp_eof(ld_resp_t *r)
{
	if (r->state == LD_RESP_BODY_EOF) {
		r->state = LD_RESP_DONE;
		return true;
	}
	return r->state == LD_RESP_DONE;
}
