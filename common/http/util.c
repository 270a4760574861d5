/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP helpers for both daemons: Range parsing, JSON responses, /v1 path splitting, clocks. */
#include "http/util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/*
 * The only calls into the server are ft_resp_bytes() and ft_req_alloc(), so the pure helpers here can
 * be unit-tested with those two faked.
 */

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static const char *skip_ows(const char *p, const char *end)
{
	while (p < end && is_ows(*p))
		p++;
	return p;
}

/* Reads decimal digits at *p (at least one); a value past UINT64_MAX saturates. Returns false if none. */
static bool read_uint(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s >= end || *s < '0' || *s > '9')
		return false;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		uint64_t d = (uint64_t)(*s - '0');
		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
	}
	*p = s;
	*out = v;
	return true;
}

typedef struct {
	bool suffix;          /* "-n" */
	bool open_end;        /* "a-" */
	uint64_t first, last; /* for suffix: first = n */
} range_spec_t;

/* Parses one range-spec occupying exactly [p, end) (whitespace trimmed). */
static bool parse_spec(const char *p, const char *end, range_spec_t *r)
{
	memset(r, 0, sizeof(*r));
	if (p < end && *p == '-') {
		p++;
		r->suffix = true;
		if (!read_uint(&p, end, &r->first))
			return false;
		return p == end;
	}
	if (!read_uint(&p, end, &r->first) || p >= end || *p != '-')
		return false;
	p++;
	if (p == end) {
		r->open_end = true;
		return true;
	}
	if (!read_uint(&p, end, &r->last) || p != end)
		return false;
	return r->first <= r->last;
}

/*
 * RFC 9110 section 14: the unit "bytes" is case-insensitive; whitespace is allowed around list
 * elements and empty list elements are ignored ("bytes=, 0-5" is one range). A well-formed
 * header in another unit ("items=0-5") is ignored as the RFC requires: NONE.
 */
ft_range_result_t ft_range_parse(const char *hdr, uint64_t size, uint64_t *off, uint64_t *len)
{
	const char *p, *end, *eq;
	range_spec_t r;
	int n_specs = 0;

	if (hdr == NULL)
		return FT_RANGE_NONE;
	end = hdr + strlen(hdr);
	p = skip_ows(hdr, end);
	eq = memchr(p, '=', (size_t)(end - p));
	if (eq == NULL || eq == p)
		return FT_RANGE_BAD;
	if ((size_t)(eq - p) != 5 || strncasecmp(p, "bytes", 5) != 0) {
		for (const char *u = p; u < eq; u++) {
			if (!((*u >= 'a' && *u <= 'z') || (*u >= 'A' && *u <= 'Z') || (*u >= '0' && *u <= '9') ||
			      *u == '-' || *u == '_' || *u == '.'))
				return FT_RANGE_BAD;
		}
		return FT_RANGE_NONE;
	}
	for (p = eq + 1; p <= end;) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *elem_end = comma != NULL ? comma : end;
		const char *s = skip_ows(p, elem_end);
		const char *e = elem_end;
		while (e > s && is_ows(e[-1]))
			e--;
		if (s < e) {
			if (++n_specs > 1)
				return FT_RANGE_BAD; /* multiple ranges: not supported */
			if (!parse_spec(s, e, &r))
				return FT_RANGE_BAD;
		}
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	if (n_specs == 0)
		return FT_RANGE_BAD;

	if (size == 0)
		return FT_RANGE_UNSAT;
	if (r.suffix) {
		if (r.first == 0)
			return FT_RANGE_UNSAT;
		*len = r.first < size ? r.first : size;
		*off = size - *len;
		return FT_RANGE_OK;
	}
	if (r.first >= size)
		return FT_RANGE_UNSAT;
	if (r.open_end || r.last >= size)
		r.last = size - 1;
	*off = r.first;
	*len = r.last - r.first + 1;
	return FT_RANGE_OK;
}

/* A NULL body (allocation failure upstream) is sent as a 500 with a JSON error. */
void ft_resp_json(ft_req_t *r, int status, json_t *body)
{
	static const char oom[] = "{\"status\":500,\"message\":\"out of memory\"}";
	char *s = NULL;

	if (body != NULL)
		s = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(body);
	if (s == NULL) {
		ft_resp_bytes(r, 500, "application/json", oom, sizeof(oom) - 1);
		return;
	}
	ft_resp_bytes(r, status, "application/json", s, strlen(s));
	free(s);
}

/*
 * Also returns -1 when the bucket segment holds a NUL byte: its C-string copy would name a
 * different bucket.
 */
int ft_path_split(ft_req_t *r, const char *path, size_t len, const char *prefix, char **bucket, const char **obj,
		  size_t *obj_len)
{
	size_t plen = strlen(prefix);
	const char *p, *end = path + len, *slash;
	size_t blen;

	while (plen > 0 && prefix[plen - 1] == '/')
		plen--;
	if (len < plen || memcmp(path, prefix, plen) != 0)
		return -1;
	p = path + plen;
	if (p < end && *p != '/')
		return -1; /* "/v1/objectsX" is not under "/v1/objects" */
	if (p < end)
		p++;
	slash = memchr(p, '/', (size_t)(end - p));
	blen = (size_t)((slash != NULL ? slash : end) - p);
	if (memchr(p, '\0', blen) != NULL)
		return -1;
	*bucket = ft_req_alloc(r, blen + 1);
	memcpy(*bucket, p, blen);
	(*bucket)[blen] = '\0';
	if (slash != NULL) {
		*obj = slash + 1;
		*obj_len = (size_t)(end - *obj);
	} else {
		*obj = end;
		*obj_len = 0;
	}
	return 0;
}

int64_t ft_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ft_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
