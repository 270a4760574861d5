/* SPDX-License-Identifier: Apache-2.0 */
/* Backend helpers: Content-MD5 from a hex MD5, backend dates as ns, ETags, numbers, endpoint URLs. */
#include "cloud/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

const char *ft_be_buf_str(const ft_strbuf_t *b)
{
	if (b->failed)
		return NULL;
	return b->p != NULL ? b->p : "";
}

/* ---- codecs ---- */

int ft_be_md5_b64(const char *hex, char b64[32])
{
	uint8_t raw[16];

	if (ft_hex_decode(hex, strlen(hex), raw, sizeof(raw), 0) != (long)sizeof(raw))
		return -1;
	ft_base64_encode(raw, sizeof(raw), b64); /* 24 characters and the NUL */
	return 0;
}

/* ---- dates ---- */

int64_t ft_be_parse_http_date(const char *s)
{
	time_t t;

	if (ft_date_parse(s, FT_DATE_HTTP, &t) != 0 || t < 0 || t > INT64_MAX / 1000000000LL)
		return 0; /* unknown, before 1970, or past what int64 ns hold (2262) */
	return (int64_t)t * 1000000000LL;
}

int64_t ft_be_parse_iso8601(const char *s)
{
	int64_t ns;

	if (ft_date_parse_iso8601(s, &ns) != 0 || ns < 0)
		return 0;
	return ns;
}

void ft_be_copy_etag(char *out, size_t cap, const char *etag)
{
	size_t n;

	out[0] = '\0';
	if (etag == NULL)
		return;
	if (strncmp(etag, "W/", 2) == 0)
		etag += 2;
	n = strlen(etag);
	if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"') {
		etag++;
		n -= 2;
	}
	if (n >= cap)
		n = cap - 1;
	memcpy(out, etag, n);
	out[n] = '\0';
}

int ft_be_parse_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (s == NULL || *s == '\0' || !(isdigit((unsigned char)*s) || *s == '-'))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

/* ---- endpoints ---- */

int ft_be_endpoint_parse(const char *url, ft_be_endpoint_t *out)
{
	const char *p, *slash;
	size_t host_len, path_len;

	memset(out, 0, sizeof(*out));
	if (strncasecmp(url, "http://", 7) == 0) {
		strcpy(out->scheme, "http");
		p = url + 7;
	} else if (strncasecmp(url, "https://", 8) == 0) {
		strcpy(out->scheme, "https");
		p = url + 8;
	} else {
		return -1;
	}
	slash = strchr(p, '/');
	host_len = slash != NULL ? (size_t)(slash - p) : strlen(p);
	if (host_len == 0 || host_len >= sizeof(out->host) || memchr(p, '?', host_len) != NULL ||
	    memchr(p, '@', host_len) != NULL)
		return -1;
	memcpy(out->host, p, host_len);
	if (slash == NULL)
		return 0;
	path_len = strlen(slash);
	while (path_len > 0 && slash[path_len - 1] == '/')
		path_len--;
	if (path_len >= sizeof(out->path) || memchr(slash, '?', path_len) != NULL)
		return -1;
	memcpy(out->path, slash, path_len);
	return 0;
}

/* ---- config filling ---- */

int ft_be_fill(char *dst, size_t cap, const char *src)
{
	if (dst[0] != '\0' || src == NULL || *src == '\0')
		return 0;
	if (strlen(src) >= cap)
		return -1;
	strcpy(dst, src);
	return 0;
}

int ft_be_fill_env(char *dst, size_t cap, const char *name)
{
	return ft_be_fill(dst, cap, getenv(name));
}

/* ---- list pages ---- */

int ft_be_page_add(ft_backend_page_t *p, int *cap, const char *name, size_t name_len)
{
	ft_backend_entry_t *e;

	if (p->n == *cap) {
		int ncap = *cap != 0 ? *cap * 2 : 64;
		ft_backend_entry_t *grown = realloc(p->entries, (size_t)ncap * sizeof(*grown));

		if (grown == NULL)
			return -1;
		p->entries = grown;
		*cap = ncap;
	}
	e = &p->entries[p->n];
	memset(e, 0, sizeof(*e));
	e->size = -1;
	e->name = strndup(name, name_len);
	if (e->name == NULL)
		return -1;
	p->n++;
	return 0;
}

void ft_be_query_add(ft_strbuf_t *q, const char *name, const char *value)
{
	if (value == NULL || *value == '\0')
		return;
	ft_strbuf_addf(q, "&%s=", name);
	ft_pct_encode_buf(q, value, strlen(value), 0);
}

int ft_be_page_add_dir(ft_backend_page_t *p, int *cap, const char *name, size_t name_len)
{
	if (name_len == 0)
		return -1;
	if (ft_be_page_add(p, cap, name, name_len) != 0)
		return -2;
	p->entries[p->n - 1].dir = true;
	return 0;
}
