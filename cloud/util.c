/* Backend helpers: percent-encoding, base64/hex, HTTP and ISO dates, endpoint URLs. */
#include "cloud/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

static int unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

void ft_be_buf_add_encoded(ft_strbuf_t *b, const char *s, int keep_slash)
{
	static const char digits[] = "0123456789ABCDEF";

	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[3] = {'%', digits[c >> 4], digits[c & 15]};

		if (unreserved(c) || (keep_slash && c == '/'))
			ft_strbuf_add(b, s, 1);
		else
			ft_strbuf_add(b, esc, 3);
	}
}

const char *ft_be_buf_str(const ft_strbuf_t *b)
{
	if (b->failed)
		return NULL;
	return b->p != NULL ? b->p : "";
}

/* ---- base64 / hex ---- */

int ft_be_b64_decode(const char *in, uint8_t *out, size_t cap)
{
	size_t n = strlen(in), pad = 0;
	uint8_t *tmp;
	int len;

	if (n == 0)
		return 0;
	if (n % 4 != 0)
		return -1;
	if (in[n - 1] == '=')
		pad++;
	if (n > 1 && in[n - 2] == '=')
		pad++;
	tmp = malloc(n / 4 * 3 + 1);
	if (tmp == NULL)
		return -1;
	len = EVP_DecodeBlock(tmp, (const unsigned char *)in, (int)n);
	if (len < 0 || (size_t)len < pad || (size_t)len - pad > cap) {
		free(tmp);
		return -1;
	}
	len -= (int)pad;
	memcpy(out, tmp, (size_t)len);
	free(tmp);
	return len;
}

int ft_be_b64_encode(const uint8_t *in, size_t n, char *out, size_t cap)
{
	if (cap < (n + 2) / 3 * 4 + 1)
		return -1;
	EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	return 0;
}

void ft_be_hex(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ft_be_unhex(const char *hex, uint8_t *out, size_t n)
{
	if (strlen(hex) != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi * 16 + lo);
	}
	return 0;
}

int ft_be_md5_b64(const char *hex, char b64[32])
{
	uint8_t raw[16];

	if (ft_be_unhex(hex, raw, sizeof(raw)) != 0)
		return -1;
	return ft_be_b64_encode(raw, sizeof(raw), b64, 32);
}

/* ---- dates ---- */

int64_t ft_be_parse_http_date(const char *s)
{
	struct tm tm;
	const char *end;
	time_t t;

	if (s == NULL)
		return 0;
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL || *end != '\0')
		return 0;
	t = timegm(&tm);
	return t < 0 ? 0 : (int64_t)t * 1000000000LL;
}

int64_t ft_be_parse_iso8601(const char *s)
{
	struct tm tm;
	const char *p;
	int64_t frac = 0, scale = 100000000;
	time_t t;

	if (s == NULL)
		return 0;
	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (p == NULL)
		return 0;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			frac += (*p - '0') * scale;
			scale /= 10;
		}
	}
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
		return 0;
	t = timegm(&tm);
	return t < 0 ? 0 : (int64_t)t * 1000000000LL + frac;
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
