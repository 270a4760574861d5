/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.x request- and response-head parsers, framing analysis and chunked decoder (see parse.h). */
#include "http/parse.h"

#include <string.h>

#include "base/codec.h"

/* RFC 9110 tchar: the characters of a method, a header name or any token. */
const bool ft_hp_tchar[256] = {
	['0' ... '9'] = true, ['A' ... 'Z'] = true, ['a' ... 'z'] = true, ['!'] = true, ['#'] = true, ['$'] = true,
	['%'] = true,         ['&'] = true,         ['\''] = true,        ['*'] = true, ['+'] = true, ['-'] = true,
	['.'] = true,         ['^'] = true,         ['_'] = true,         ['`'] = true, ['|'] = true, ['~'] = true,
};

static bool is_tchar(unsigned char ch)
{
	return ft_hp_tchar[ch];
}

/* A request-target byte: visible ASCII or obs-text (clients should escape, some send raw UTF-8). */
static bool is_target_char(unsigned char ch)
{
	return (ch > 0x20 && ch < 0x7f) || ch >= 0x80;
}

/* field-content byte: VCHAR, obs-text, SP, HTAB. */
static bool is_value_char(unsigned char ch)
{
	return ch == '\t' || (ch >= 0x20 && ch != 0x7f);
}

bool ft_hp_token_eq(const char *a, size_t n, const char *b)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];

		if (y == 0)
			return false;
		if (x >= 'A' && x <= 'Z')
			x += 'a' - 'A';
		if (y >= 'A' && y <= 'Z')
			y += 'a' - 'A';
		if (x != y)
			return false;
	}
	return b[n] == 0;
}

/*
 * Finds the end of the line starting at p. Returns the offset of the first byte after the line
 * terminator and sets *line_len (without terminator); 0 if no terminator yet; -1 on a bare CR.
 */
static long line_end(const char *buf, size_t pos, size_t len, size_t *line_len)
{
	const char *nl = memchr(buf + pos, '\n', len - pos);
	size_t end;

	if (nl == NULL) {
		/* a CR anywhere but as the last byte seen is already invalid */
		const char *cr = memchr(buf + pos, '\r', len - pos);

		if (cr != NULL && (size_t)(cr - buf) + 1 < len)
			return -1;
		return 0;
	}
	end = (size_t)(nl - buf);
	if (end > pos && buf[end - 1] == '\r')
		*line_len = end - 1 - pos;
	else
		*line_len = end - pos;
	return (long)(end + 1);
}

/* Parses "METHOD SP target SP HTTP/d.d" of exactly n bytes. */
static ft_hp_result_t parse_request_line(const char *p, size_t n, ft_hp_head_t *out)
{
	size_t i = 0, start;

	while (i < n && is_tchar((unsigned char)p[i]))
		i++;
	if (i == 0 || i >= n || p[i] != ' ')
		return FT_HP_BAD;
	out->method = p;
	out->method_len = i;
	start = ++i;
	while (i < n && is_target_char((unsigned char)p[i]))
		i++;
	if (i == start || i >= n || p[i] != ' ')
		return FT_HP_BAD;
	out->target = p + start;
	out->target_len = i - start;
	i++;
	if (n - i != 8 || memcmp(p + i, "HTTP/", 5) != 0)
		return FT_HP_BAD;
	if (p[i + 5] < '0' || p[i + 5] > '9' || p[i + 6] != '.' || p[i + 7] < '0' || p[i + 7] > '9')
		return FT_HP_BAD;
	if (p[i + 5] != '1')
		return FT_HP_VERSION;
	out->version_minor = p[i + 7] - '0';
	return FT_HP_DONE;
}

/* Parses "name: value" of exactly n bytes into *h. */
static ft_hp_result_t parse_header_line(const char *p, size_t n, ft_hp_header_t *h)
{
	size_t i = 0, vs, ve;

	while (i < n && is_tchar((unsigned char)p[i]))
		i++;
	if (i == 0 || i >= n || p[i] != ':')
		return FT_HP_BAD;
	h->name = p;
	h->name_len = i;
	for (vs = i + 1; vs < n && (p[vs] == ' ' || p[vs] == '\t'); vs++)
		;
	for (i = vs; i < n; i++)
		if (!is_value_char((unsigned char)p[i]))
			return FT_HP_BAD;
	for (ve = n; ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t'); ve--)
		;
	h->value = p + vs;
	h->value_len = ve - vs;
	return FT_HP_DONE;
}

/*
 * The line at pos: FT_HP_DONE with its length without the terminator (*n) and the offset after it
 * (*next); otherwise the result the head parse ends with (incomplete, too large, a bad CR).
 */
static ft_hp_result_t next_line(const char *buf, size_t len, size_t pos, size_t max_bytes, size_t *n, size_t *next)
{
	long end;

	if (pos >= len)
		return len > max_bytes ? FT_HP_TOO_LARGE : FT_HP_AGAIN;
	end = line_end(buf, pos, len, n);
	if (end < 0)
		return FT_HP_BAD;
	if (end == 0)
		return len > max_bytes ? FT_HP_TOO_LARGE : FT_HP_AGAIN;
	if ((size_t)end > max_bytes)
		return FT_HP_TOO_LARGE;
	if (memchr(buf + pos, '\r', *n) != NULL)
		return FT_HP_BAD; /* a CR inside a line */
	*next = (size_t)end;
	return FT_HP_DONE;
}

/*
 * The header lines from pos through the empty line that ends the head, appended to hdrs (room for
 * max_headers; *nheaders filled so far); *head_len = the offset after the empty line.
 */
static ft_hp_result_t parse_fields(const char *buf, size_t len, size_t pos, size_t max_bytes, ft_hp_header_t *hdrs,
				   size_t max_headers, size_t *nheaders, size_t *head_len)
{
	size_t n, next;
	ft_hp_result_t rc;

	for (;; pos = next) {
		rc = next_line(buf, len, pos, max_bytes, &n, &next);
		if (rc != FT_HP_DONE)
			return rc;
		if (n == 0) {
			*head_len = next;
			return FT_HP_DONE;
		}
		if (buf[pos] == ' ' || buf[pos] == '\t')
			return FT_HP_BAD; /* obsolete line folding */
		if (*nheaders >= max_headers)
			return FT_HP_TOO_LARGE;
		rc = parse_header_line(buf + pos, n, &hdrs[*nheaders]);
		if (rc != FT_HP_DONE)
			return rc;
		(*nheaders)++;
	}
}

ft_hp_result_t ft_hp_parse_head(const char *buf, size_t len, size_t max_bytes, ft_hp_header_t *hdrs, size_t max_headers,
				ft_hp_head_t *out)
{
	size_t pos = 0, n = 0, next;
	ft_hp_result_t rc;

	memset(out, 0, sizeof(*out));
	/* empty lines before the request line are ignored (RFC 9112 2.2) */
	for (;; pos = next) {
		rc = next_line(buf, len, pos, max_bytes, &n, &next);
		if (rc != FT_HP_DONE)
			return rc;
		if (n > 0)
			break;
	}
	rc = parse_request_line(buf + pos, n, out);
	if (rc != FT_HP_DONE)
		return rc;
	return parse_fields(buf, len, next, max_bytes, hdrs, max_headers, &out->nheaders, &out->head_len);
}

bool ft_hp_peek_target(const char *buf, size_t len, const char **target, size_t *target_len)
{
	size_t i = 0, start;

	while (i < len && (buf[i] == '\r' || buf[i] == '\n')) /* leading empty lines */
		i++;
	start = i;
	while (i < len && is_tchar((unsigned char)buf[i]))
		i++;
	if (i == start || i >= len || buf[i] != ' ')
		return false;
	start = ++i;
	while (i < len && is_target_char((unsigned char)buf[i]))
		i++;
	if (i == start || i >= len || buf[i] != ' ')
		return false;
	*target = buf + start;
	*target_len = i - start;
	return true;
}

/* Calls fn on each comma-separated, whitespace-trimmed element of v[0..n); empty elements are skipped. */
typedef int (*list_fn)(const char *e, size_t n, void *arg);

static int each_list_element(const char *v, size_t n, list_fn fn, void *arg)
{
	size_t i = 0, s, e;
	int rc;

	while (i <= n) {
		s = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (s < e && (v[s] == ' ' || v[s] == '\t'))
			s++;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > s) {
			rc = fn(v + s, e - s, arg);
			if (rc != 0)
				return rc;
		}
		i++;
	}
	return 0;
}

typedef struct {
	int64_t value; /* -1 until the first one */
} cl_state_t;

static int cl_element(const char *e, size_t n, void *arg)
{
	cl_state_t *st = arg;
	int64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (e[i] < '0' || e[i] > '9')
			return 400;
		if (v > (INT64_MAX - (e[i] - '0')) / 10)
			return 400;
		v = v * 10 + (e[i] - '0');
	}
	if (st->value >= 0 && st->value != v)
		return 400;
	st->value = v;
	return 0;
}

typedef struct {
	int nchunked;       /* "chunked" codings seen */
	bool after_chunked; /* a coding followed "chunked" */
	bool unknown;       /* a coding other than chunked */
	int ncodings;
} te_state_t;

static int te_element(const char *e, size_t n, void *arg)
{
	te_state_t *st = arg;
	size_t k = 0;

	while (k < n && e[k] != ';' && e[k] != ' ' && e[k] != '\t')
		k++;
	st->ncodings++;
	if (st->nchunked > 0)
		st->after_chunked = true;
	if (k == n && ft_hp_token_eq(e, k, "chunked"))
		st->nchunked++;
	else
		st->unknown = true;
	return 0;
}

typedef struct {
	bool close, keep_alive;
} conn_state_t;

static int conn_element(const char *e, size_t n, void *arg)
{
	conn_state_t *st = arg;

	if (ft_hp_token_eq(e, n, "close"))
		st->close = true;
	else if (ft_hp_token_eq(e, n, "keep-alive"))
		st->keep_alive = true;
	return 0;
}

/* What the framing and connection headers of a head say, before the rules of a request or a response. */
typedef struct {
	cl_state_t cl;
	te_state_t te;
	conn_state_t conn;
	bool have_cl, have_te, expect_continue;
	int nhost;
} fields_t;

/* Collects the framing and connection headers of hdrs[0..n). 0, or 400 for a malformed Content-Length. */
static int scan_fields(const ft_hp_header_t *hdrs, size_t n, fields_t *f)
{
	int rc;
	size_t i;

	memset(f, 0, sizeof(*f));
	f->cl.value = -1;
	for (i = 0; i < n; i++) {
		const ft_hp_header_t *x = &hdrs[i];

		if (ft_hp_token_eq(x->name, x->name_len, "content-length")) {
			f->have_cl = true;
			if (x->value_len == 0)
				return 400;
			rc = each_list_element(x->value, x->value_len, cl_element, &f->cl);
			if (rc != 0)
				return rc;
			if (f->cl.value < 0)
				return 400; /* only commas */
		} else if (ft_hp_token_eq(x->name, x->name_len, "transfer-encoding")) {
			f->have_te = true;
			each_list_element(x->value, x->value_len, te_element, &f->te);
		} else if (ft_hp_token_eq(x->name, x->name_len, "connection")) {
			each_list_element(x->value, x->value_len, conn_element, &f->conn);
		} else if (ft_hp_token_eq(x->name, x->name_len, "expect")) {
			if (ft_hp_token_eq(x->value, x->value_len, "100-continue"))
				f->expect_continue = true;
		} else if (ft_hp_token_eq(x->name, x->name_len, "host")) {
			f->nhost++;
		}
	}
	return 0;
}

/* HTTP/1.1 keeps the connection unless "close"; HTTP/1.0 only with "keep-alive". */
static bool keeps_alive(int version_minor, const conn_state_t *conn)
{
	if (version_minor >= 1)
		return !conn->close;
	return conn->keep_alive && !conn->close;
}

int ft_hp_analyze(const ft_hp_head_t *h, const ft_hp_header_t *hdrs, ft_hp_info_t *out)
{
	fields_t f;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = scan_fields(hdrs, h->nheaders, &f);
	if (rc != 0)
		return rc;
	if (f.have_cl && f.have_te)
		return 400;
	if (f.have_te) {
		if (f.te.ncodings == 0 || f.te.nchunked > 1 || f.te.after_chunked)
			return f.te.unknown && f.te.nchunked == 0 ? 501 : 400;
		if (f.te.unknown)
			return 501;
		out->chunked = true;
		out->content_length = -1;
	} else {
		out->content_length = f.have_cl ? f.cl.value : 0;
	}
	if (h->version_minor >= 1 && f.nhost != 1)
		return 400;
	out->keep_alive = keeps_alive(h->version_minor, &f.conn);
	out->expect_continue = f.expect_continue;
	return 0;
}

/* ---- response heads ---- */

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* Parses "HTTP/d.d SP 3DIGIT [SP reason-phrase]" of exactly n bytes. */
static ft_hp_result_t parse_status_line(const char *p, size_t n, ft_hp_resp_head_t *out)
{
	size_t i;

	if (n < 12 || memcmp(p, "HTTP/", 5) != 0 || !is_digit(p[5]) || p[6] != '.' || !is_digit(p[7]) || p[8] != ' ' ||
	    !is_digit(p[9]) || !is_digit(p[10]) || !is_digit(p[11]))
		return FT_HP_BAD;
	/* the space before the reason is required, but a client should take a line without it (RFC 9112 4) */
	if (n > 12 && p[12] != ' ')
		return FT_HP_BAD;
	for (i = 13; i < n; i++)
		if (!is_value_char((unsigned char)p[i]))
			return FT_HP_BAD;
	out->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	if (out->status < 100 || out->status > 599)
		return FT_HP_BAD; /* RFC 9110 15: every valid status is in 100..599 */
	out->reason = n > 12 ? p + 13 : p + n;
	out->reason_len = n > 12 ? n - 13 : 0;
	if (p[5] != '1')
		return FT_HP_VERSION;
	out->version_minor = p[7] - '0';
	return FT_HP_DONE;
}

/*
 * Framing and connection of a parsed response (RFC 9112 6): a Content-Length, or a
 * Transfer-Encoding of exactly "chunked", never both. 0, or -1 when the framing is not one of those.
 */
static int resp_framing(ft_hp_resp_head_t *out, const ft_hp_header_t *hdrs)
{
	fields_t f;

	if (scan_fields(hdrs, out->nheaders, &f) != 0)
		return -1;
	if (f.have_cl && f.have_te)
		return -1; /* a sign of response splitting (RFC 9112 6.3) */
	if (f.have_te && (f.te.ncodings != 1 || f.te.nchunked != 1))
		return -1; /* another coding: no length this client can find */
	out->chunked = f.have_te;
	out->content_length = f.have_cl ? f.cl.value : -1;
	out->keep_alive = keeps_alive(out->version_minor, &f.conn);
	return 0;
}

ft_hp_result_t ft_hp_parse_resp_head(const char *buf, size_t len, size_t max_bytes, ft_hp_header_t *hdrs,
				     size_t max_headers, ft_hp_resp_head_t *out)
{
	size_t n = 0, next;
	ft_hp_result_t rc;

	memset(out, 0, sizeof(*out));
	out->content_length = -1;
	/* not a response at all: no need to wait for its line end */
	if (len > 0 && memcmp(buf, "HTTP/", len < 5 ? len : 5) != 0)
		return FT_HP_BAD;
	rc = next_line(buf, len, 0, max_bytes, &n, &next);
	if (rc != FT_HP_DONE)
		return rc;
	rc = parse_status_line(buf, n, out);
	if (rc != FT_HP_DONE)
		return rc;
	rc = parse_fields(buf, len, next, max_bytes, hdrs, max_headers, &out->nheaders, &out->head_len);
	if (rc != FT_HP_DONE)
		return rc;
	return resp_framing(out, hdrs) == 0 ? FT_HP_DONE : FT_HP_BAD;
}

/* ---- chunked ---- */

enum {
	CH_SIZE = 0, /* hex digits of a chunk size */
	CH_SIZE_WS,  /* after the digits: optional whitespace, then ';' or the line end */
	CH_EXT,      /* chunk extensions, up to the line end */
	CH_SIZE_LF,  /* CR seen at the end of the size line */
	CH_DATA,     /* chunk data */
	CH_DATA_CR,  /* CRLF after the chunk data */
	CH_DATA_LF,
	CH_TRAILER, /* start of a trailer line (or of the final empty line) */
	CH_TRAILER_LINE,
	CH_TRAILER_LF, /* CR seen at the end of a trailer line */
	CH_END_LF,     /* CR of the final empty line seen */
	CH_FINISHED,
};

void ft_hp_chunked_init(ft_hp_chunked_t *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CH_SIZE;
}

/* The size line is over: go to data, or to the trailers after the last chunk. */
static void size_line_done(ft_hp_chunked_t *c)
{
	c->line_len = 0;
	c->state = c->size == 0 ? CH_TRAILER : CH_DATA;
}

/* Processes one byte of framing (not data). Returns FT_HP_CHUNK_OK, DONE or BAD. */
static ft_hp_chunk_result_t chunk_byte(ft_hp_chunked_t *c, unsigned char ch)
{
	int hv;

	switch (c->state) {
	case CH_SIZE:
		hv = ft_hex_digit(ch);
		if (hv >= 0) {
			if (c->size > (UINT64_MAX >> 4))
				return FT_HP_CHUNK_BAD;
			c->size = (c->size << 4) | (uint64_t)hv;
			c->ndigits = 1;
			if (++c->line_len > FT_HP_CHUNK_LINE_MAX)
				return FT_HP_CHUNK_BAD;
			return FT_HP_CHUNK_OK;
		}
		if (c->ndigits == 0)
			return FT_HP_CHUNK_BAD;
		c->state = CH_SIZE_WS;
		/* fall through */
	case CH_SIZE_WS:
	case CH_EXT:
		if (++c->line_len > FT_HP_CHUNK_LINE_MAX)
			return FT_HP_CHUNK_BAD;
		if (c->state == CH_SIZE_WS && ch == ';') {
			c->state = CH_EXT;
		} else if (c->state == CH_SIZE_WS && ch != ' ' && ch != '\t' && ch != '\r' && ch != '\n') {
			return FT_HP_CHUNK_BAD; /* junk after the size */
		} else if (ch == '\r') {
			c->state = CH_SIZE_LF;
		} else if (ch == '\n') {
			size_line_done(c);
		} else if (ch != '\t' && (ch < 0x20 || ch == 0x7f)) {
			return FT_HP_CHUNK_BAD;
		}
		return FT_HP_CHUNK_OK;
	case CH_SIZE_LF:
		if (ch != '\n')
			return FT_HP_CHUNK_BAD;
		size_line_done(c);
		return FT_HP_CHUNK_OK;
	case CH_DATA_CR:
	case CH_DATA_LF:
		if (ch == '\r' && c->state == CH_DATA_CR) {
			c->state = CH_DATA_LF;
			return FT_HP_CHUNK_OK;
		}
		if (ch != '\n') /* a bare LF is accepted */
			return FT_HP_CHUNK_BAD;
		c->state = CH_SIZE;
		c->size = 0;
		c->ndigits = 0;
		return FT_HP_CHUNK_OK;
	case CH_TRAILER:
		if (++c->trailer_len > FT_HP_TRAILER_MAX)
			return FT_HP_CHUNK_BAD;
		if (ch == '\r') {
			c->state = CH_END_LF;
		} else if (ch == '\n') {
			c->state = CH_FINISHED;
			return FT_HP_CHUNK_DONE;
		} else {
			c->state = CH_TRAILER_LINE;
		}
		return FT_HP_CHUNK_OK;
	case CH_TRAILER_LINE:
		if (++c->trailer_len > FT_HP_TRAILER_MAX)
			return FT_HP_CHUNK_BAD;
		if (ch == '\r')
			c->state = CH_TRAILER_LF;
		else if (ch == '\n')
			c->state = CH_TRAILER;
		else if (ch != '\t' && (ch < 0x20 || ch == 0x7f))
			return FT_HP_CHUNK_BAD;
		return FT_HP_CHUNK_OK;
	case CH_TRAILER_LF:
		if (ch != '\n')
			return FT_HP_CHUNK_BAD;
		c->state = CH_TRAILER;
		return FT_HP_CHUNK_OK;
	case CH_END_LF:
		if (ch != '\n')
			return FT_HP_CHUNK_BAD;
		c->state = CH_FINISHED;
		return FT_HP_CHUNK_DONE;
	default:
		return FT_HP_CHUNK_BAD;
	}
}

ft_hp_chunk_result_t ft_hp_chunked_decode(ft_hp_chunked_t *c, const char *in, size_t len, size_t *consumed,
					  const char **data, size_t *data_len)
{
	size_t i = 0, n;
	ft_hp_chunk_result_t rc;

	*data = NULL;
	*data_len = 0;
	while (i < len) {
		if (c->state == CH_DATA) {
			n = len - i;
			if (n > c->size)
				n = (size_t)c->size;
			*data = in + i;
			*data_len = n;
			c->size -= n;
			if (c->size == 0)
				c->state = CH_DATA_CR;
			*consumed = i + n;
			return FT_HP_CHUNK_OK;
		}
		rc = chunk_byte(c, (unsigned char)in[i++]);
		if (rc != FT_HP_CHUNK_OK) {
			*consumed = i;
			return rc;
		}
	}
	*consumed = i;
	return FT_HP_CHUNK_OK;
}
