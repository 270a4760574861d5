/* ft-loader HTTP/1.1 client pieces: incremental response parser, request head writer, URL escaping. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/codec.h"
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
	r->trailer_nl = 0;
	r->chunk_digits = 0;
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

static bool name_is(const char *name, size_t len, const char *want)
{
	return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

/* Whether the comma-separated token list v (len bytes) holds token (case-insensitive). */
static bool has_token(const char *v, size_t len, const char *token)
{
	size_t tl = strlen(token);

	for (size_t i = 0; i + tl <= len; i++) {
		if (strncasecmp(v + i, token, tl) != 0)
			continue;
		bool left_ok = i == 0 || v[i - 1] == ',' || v[i - 1] == ' ' || v[i - 1] == '\t';
		bool right_ok =
			i + tl == len || v[i + tl] == ',' || v[i + tl] == ' ' || v[i + tl] == '\t' || v[i + tl] == ';';
		if (left_ok && right_ok)
			return true;
	}
	return false;
}

static void copy_value(char *dst, size_t cap, const char *v, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

/* One header line (without CRLF). Returns 0 or -1. */
static int header_line(ld_resp_t *r, const char *line, size_t len, bool *ka_token, bool *close_token, char *err,
		       size_t errlen)
{
	const char *colon = memchr(line, ':', len), *v, *end = line + len;

	if (colon == NULL || colon == line) {
		snprintf(err, errlen, "malformed header line");
		return -1;
	}
	v = colon + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	size_t nl = (size_t)(colon - line), vl = (size_t)(end - v);
	if (name_is(line, nl, "content-length")) {
		uint64_t x = 0;
		if (vl == 0 || vl > 19)
			goto bad_len;
		for (size_t i = 0; i < vl; i++) {
			if (v[i] < '0' || v[i] > '9')
				goto bad_len;
			x = x * 10 + (uint64_t)(v[i] - '0');
		}
		if (r->content_length >= 0 && (uint64_t)r->content_length != x)
			goto bad_len;
		r->content_length = (int64_t)x;
	} else if (name_is(line, nl, "transfer-encoding")) {
		r->chunked = has_token(v, vl, "chunked");
		if (!r->chunked && vl > 0 && !has_token(v, vl, "identity")) {
			snprintf(err, errlen, "unsupported Transfer-Encoding \"%.*s\"", (int)(vl > 64 ? 64 : vl), v);
			return -1;
		}
	} else if (name_is(line, nl, "connection")) {
		*close_token |= has_token(v, vl, "close");
		*ka_token |= has_token(v, vl, "keep-alive");
	} else if (name_is(line, nl, "location")) {
		if (vl >= sizeof(r->location)) {
			snprintf(err, errlen, "Location longer than %zu bytes", sizeof(r->location) - 1);
			return -1;
		}
		copy_value(r->location, sizeof(r->location), v, vl);
	} else if (name_is(line, nl, "ais-checksum-type")) {
		copy_value(r->cksum_type, sizeof(r->cksum_type), v, vl);
	} else if (name_is(line, nl, "ais-checksum-value")) {
		copy_value(r->cksum_value, sizeof(r->cksum_value), v, vl);
	}
	return 0;
bad_len:
	snprintf(err, errlen, "bad Content-Length \"%.*s\"", (int)(vl > 32 ? 32 : vl), v);
	return -1;
}

/* Parses a complete head h[0..len) ending in CRLF CRLF and sets the body state. Returns 0 or -1. */
static int parse_head(ld_resp_t *r, const char *h, size_t len, char *err, size_t errlen)
{
	const char *p = h, *end = h + len - 2, *eol;
	bool ka = false, close = false;

	eol = memmem(p, (size_t)(end - p), "\r\n", 2);
	if (eol == NULL || eol - p < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') ||
	    p[8] != ' ' || p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
	    (eol - p > 12 && p[12] != ' ')) {
		snprintf(err, errlen, "malformed status line \"%.*s\"", (int)(len > 60 ? 60 : len), h);
		return -1;
	}
	r->minor = p[7] - '0';
	r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	for (p = eol + 2; p < end; p = eol + 2) {
		eol = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);
		if (eol == NULL)
			break;
		if (*p == ' ' || *p == '\t')
			continue; /* obsolete line folding: ignored */
		if (header_line(r, p, (size_t)(eol - p), &ka, &close, err, errlen) != 0)
			return -1;
	}
	r->keep_alive = r->minor >= 1 ? !close : (ka && !close);
	if (r->status < 200 || r->status == 204 || r->status == 304 || r->no_body) {
		r->state = LD_RESP_DONE;
	} else if (r->chunked) {
		r->state = LD_RESP_CHUNK_SIZE;
		r->left = 0;
		r->chunk_digits = 0;
	} else if (r->content_length >= 0) {
		r->left = (uint64_t)r->content_length;
		r->state = r->left == 0 ? LD_RESP_DONE : LD_RESP_BODY_LEN;
	} else {
		r->state = LD_RESP_BODY_EOF;
		r->keep_alive = false;
	}
	return 0;
}

/* Head bytes: in place when complete in p, else gathered in hbuf. Returns bytes used or -1. */
static ssize_t feed_head(ld_resp_t *r, const char *p, size_t n, char *err, size_t errlen)
{
	const char *end;
	size_t take, from, hl;

	if (r->hlen == 0) {
		end = memmem(p, n, "\r\n\r\n", 4);
		if (end != NULL) {
			hl = (size_t)(end + 4 - p);
			return parse_head(r, p, hl, err, errlen) == 0 ? (ssize_t)hl : -1;
		}
	}
	if (r->hbuf == NULL && (r->hbuf = malloc(LD_HEAD_MAX)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	take = n < LD_HEAD_MAX - r->hlen ? n : LD_HEAD_MAX - r->hlen;
	memcpy(r->hbuf + r->hlen, p, take);
	from = r->hlen >= 3 ? r->hlen - 3 : 0;
	end = memmem(r->hbuf + from, r->hlen + take - from, "\r\n\r\n", 4);
	if (end == NULL) {
		if (r->hlen + take == LD_HEAD_MAX) {
			snprintf(err, errlen, "response head larger than %d bytes", LD_HEAD_MAX);
			return -1;
		}
		r->hlen += take;
		return (ssize_t)take;
	}
	hl = (size_t)(end + 4 - r->hbuf);
	take = hl - r->hlen; /* bytes of p that belong to the head */
	r->hlen = 0;
	return parse_head(r, r->hbuf, hl, err, errlen) == 0 ? (ssize_t)take : -1;
}

/* One byte of chunk framing (not data). Returns 0 or -1. */
static int chunk_byte(ld_resp_t *r, char c, char *err, size_t errlen)
{
	int v;

	switch (r->state) {
	case LD_RESP_CHUNK_SIZE:
		v = ft_hex_digit((unsigned char)c);
		if (v >= 0) {
			if (++r->chunk_digits > 15)
				goto bad;
			r->left = r->left * 16 + (uint64_t)v;
			return 0;
		}
		if (r->chunk_digits == 0)
			goto bad;
		if (c == ';' || c == ' ' || c == '\t')
			r->state = LD_RESP_CHUNK_EXT;
		else if (c == '\r')
			r->state = LD_RESP_CHUNK_SIZE_LF;
		else
			goto bad;
		return 0;
	case LD_RESP_CHUNK_EXT:
		if (c == '\r')
			r->state = LD_RESP_CHUNK_SIZE_LF;
		return 0;
	case LD_RESP_CHUNK_SIZE_LF:
		if (c != '\n')
			goto bad;
		if (r->left == 0) {
			r->state = LD_RESP_TRAILER;
			r->trailer_nl = 0;
		} else {
			r->state = LD_RESP_CHUNK_DATA;
		}
		return 0;
	case LD_RESP_CHUNK_DATA_CR:
		if (c != '\r')
			goto bad;
		r->state = LD_RESP_CHUNK_DATA_LF;
		return 0;
	case LD_RESP_CHUNK_DATA_LF:
		if (c != '\n')
			goto bad;
		r->state = LD_RESP_CHUNK_SIZE;
		r->left = 0;
		r->chunk_digits = 0;
		return 0;
	case LD_RESP_TRAILER:
		/* trailer_nl: 0 at a line start, 1 after a CR at a line start, 2 inside a trailer line */
		if (r->trailer_nl == 0)
			r->trailer_nl = c == '\r' ? 1 : 2;
		else if (r->trailer_nl == 1)
			if (c == '\n')
				r->state = LD_RESP_DONE;
			else
				goto bad;
		else if (c == '\n')
			r->trailer_nl = 0;
		return 0;
	default:
		goto bad;
	}
bad:
	snprintf(err, errlen, "malformed chunked body");
	return -1;
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
		case LD_RESP_CHUNK_DATA:
			take = n - used < r->left ? n - used : (size_t)r->left;
			if (fn != NULL)
				fn(ctx, p + used, take);
			r->body_bytes += take;
			r->left -= take;
			used += take;
			if (r->left == 0)
				r->state = r->state == LD_RESP_BODY_LEN ? LD_RESP_DONE : LD_RESP_CHUNK_DATA_CR;
			break;
		case LD_RESP_BODY_EOF:
			if (fn != NULL)
				fn(ctx, p + used, n - used);
			r->body_bytes += n - used;
			used = n;
			break;
		default:
			if (chunk_byte(r, p[used], err, errlen) != 0)
				return -1;
			used++;
			break;
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
