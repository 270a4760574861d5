/* SPDX-License-Identifier: Apache-2.0 */
/* Byte codecs: hex, base64, percent-encoding and date forms, one implementation of each for every program. */
/*
 * DESIGN
 * - Every rule lives here once, with the variants the protocols need as flags or named functions:
 *   lowercase hex out, either case in (FT_HEX_LOWERCASE for our own texts); uppercase %XX out, the
 *   RFC 3986 unreserved set kept, '/' kept only in paths; '+' a space only in queries; strict
 *   decoding where a bad escape must fail the request.
 * - Standard base64 decodes through OpenSSL's EVP_DecodeBlock, as every caller did before, so
 *   what it tolerates stays what it was; encoding is one loop for both alphabets.
 * - Date parsing has two kinds: strptime(3)-based and lenient, for headers we only compare
 *   (conditional GETs, backend Last-Modified), and exact, for what a signature covers.
 */
#include "base/codec.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#define NS_PER_S 1000000000LL

static const char hex_lower[] = "0123456789abcdef";
static const char hex_upper[] = "0123456789ABCDEF";

/* ---- hex ---- */

void ft_hex_encode(const void *in, size_t n, char *out)
{
	const uint8_t *b = in;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex_lower[b[i] >> 4];
		out[2 * i + 1] = hex_lower[b[i] & 15];
	}
	out[2 * n] = '\0';
}

int ft_hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long ft_hex_decode(const char *hex, size_t len, void *out, size_t cap, unsigned flags)
{
	uint8_t *o = out;

	if (len % 2 != 0 || len / 2 > cap)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (ft_hex_digit((unsigned char)hex[i]) < 0 ||
		    ((flags & FT_HEX_LOWERCASE) && hex[i] >= 'A' && hex[i] <= 'F'))
			return -1;
	for (size_t i = 0; i < len / 2; i++)
		o[i] = (uint8_t)(ft_hex_digit((unsigned char)hex[2 * i]) << 4 |
				 ft_hex_digit((unsigned char)hex[2 * i + 1]));
	return (long)(len / 2);
}

void ft_random_id(char out[FT_RANDOM_ID_LEN + 1])
{
	unsigned char b[16] = {0};

	if (RAND_bytes(b, sizeof(b)) != 1) {
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (read(fd, b, sizeof(b)) != (ssize_t)sizeof(b))
				memset(b, 0, sizeof(b));
			close(fd);
		}
	}
	ft_hex_encode(b, sizeof(b), out);
}

/* ---- base64 ---- */

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* in[0..n) in alphabet, '='-padded when pad; NUL-terminated; returns the length. */
static size_t b64_encode(const uint8_t *in, size_t n, char *out, const char *alphabet, bool pad)
{
	size_t i = 0, o = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = alphabet[v & 63];
	}
	if (n - i > 0) {
		uint32_t v = (uint32_t)in[i] << 16 | (n - i == 2 ? (uint32_t)in[i + 1] << 8 : 0);

		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		if (n - i == 2)
			out[o++] = alphabet[(v >> 6) & 63];
		else if (pad)
			out[o++] = '=';
		if (pad)
			out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

size_t ft_base64_encode(const void *in, size_t n, char *out)
{
	return b64_encode(in, n, out, b64_std, true);
}

size_t ft_base64url_encode(const void *in, size_t n, char *out)
{
	return b64_encode(in, n, out, b64_url, false);
}

long ft_base64_decode(const char *in, size_t n, void *out, size_t cap)
{
	size_t pad = 0, full = n / 4 * 3;
	uint8_t *dst = out, *tmp = NULL;
	int len;

	if (n == 0)
		return 0;
	if (n % 4 != 0 || n > INT_MAX)
		return -1;
	if (in[n - 1] == '=')
		pad++;
	if (n > 1 && in[n - 2] == '=')
		pad++;
	if (full > cap) { /* EVP_DecodeBlock writes the padding's zero bytes too */
		tmp = malloc(full);
		if (tmp == NULL)
			return -1;
		dst = tmp;
	}
	len = EVP_DecodeBlock(dst, (const unsigned char *)in, (int)n);
	if (len < 0 || (size_t)len < pad || (size_t)len - pad > cap) {
		free(tmp);
		return -1;
	}
	len -= (int)pad;
	if (tmp != NULL)
		memcpy(out, tmp, (size_t)len);
	free(tmp);
	return len;
}

static int b64url_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

long ft_base64url_decode(const char *in, size_t n, void *out, size_t cap)
{
	uint8_t *o = out;
	uint32_t acc = 0;
	size_t len = 0;
	int bits = 0;

	for (size_t i = 0; i < n; i++) {
		int v = b64url_value(in[i]);

		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (len == cap)
				return -1;
			o[len++] = (uint8_t)(acc >> bits);
		}
	}
	return (long)len;
}

/* ---- percent-encoding ---- */

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
	       c == '_' || c == '~';
}

/* Writes c, as is or as %XX, at out; returns 1 or 3. */
static size_t encode_byte(unsigned char c, char *out, unsigned flags)
{
	if (unreserved(c) || ((flags & FT_PCT_KEEP_SLASH) && c == '/')) {
		out[0] = (char)c;
		return 1;
	}
	out[0] = '%';
	out[1] = hex_upper[c >> 4];
	out[2] = hex_upper[c & 15];
	return 3;
}

/*
 * With FT_PCT_KEEP_SLASH, whether s[i] is a dot of a "." or ".." segment: encoded as %2E, so that no
 * client library or server on the way removes it as a dot segment (RFC 3986 5.2.4).
 */
static bool dot_segment(const char *s, size_t n, size_t i, unsigned flags)
{
	size_t a = i, z = i;

	if (!(flags & FT_PCT_KEEP_SLASH) || s[i] != '.')
		return false;
	while (a > 0 && s[a - 1] == '.')
		a--;
	while (z < n && s[z] == '.')
		z++;
	return z - a <= 2 && (a == 0 || s[a - 1] == '/') && (z == n || s[z] == '/');
}

/* Writes s[i] encoded at out; returns 1 or 3. */
static size_t encode_at(const char *s, size_t n, size_t i, char *out, unsigned flags)
{
	if (dot_segment(s, n, i, flags)) {
		memcpy(out, "%2E", 3);
		return 3;
	}
	return encode_byte((unsigned char)s[i], out, flags);
}

size_t ft_pct_encode(const char *s, size_t n, char *out, unsigned flags)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++)
		o += encode_at(s, n, i, out + o, flags);
	out[o] = '\0';
	return o;
}

void ft_pct_encode_buf(ft_strbuf_t *b, const char *s, size_t n, unsigned flags)
{
	for (size_t i = 0; i < n; i++) {
		char esc[3];

		ft_strbuf_add(b, esc, encode_at(s, n, i, esc, flags));
	}
}

char *ft_pct_encode_dup(const char *s, size_t n, unsigned flags)
{
	char *out = malloc(3 * n + 1);

	if (out != NULL)
		ft_pct_encode(s, n, out, flags);
	return out;
}

int ft_pct_next(const char *s, size_t n, size_t *i, unsigned flags)
{
	unsigned char c = (unsigned char)s[*i];

	if (c == '%') {
		int hi = *i + 1 < n ? ft_hex_digit((unsigned char)s[*i + 1]) : -1;
		int lo = *i + 2 < n ? ft_hex_digit((unsigned char)s[*i + 2]) : -1;

		if (hi >= 0 && lo >= 0) {
			*i += 3;
			return hi << 4 | lo;
		}
		if (flags & FT_PCT_STRICT)
			return -1;
	}
	*i += 1;
	return c == '+' && (flags & FT_PCT_PLUS_SPACE) ? ' ' : c;
}

long ft_pct_decode(const char *s, size_t n, char *out, unsigned flags)
{
	size_t i = 0, o = 0;

	while (i < n) {
		int c = ft_pct_next(s, n, &i, flags);

		if (c < 0)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return (long)o;
}

int ft_pct_decode_buf(ft_strbuf_t *b, const char *s, size_t n, unsigned flags)
{
	for (size_t i = 0; i < n;) {
		int c = ft_pct_next(s, n, &i, flags);

		if (c < 0)
			return -1;
		ft_strbuf_addc(b, (char)c);
	}
	return 0;
}

void ft_pct_recode_buf(ft_strbuf_t *b, const char *s, size_t n, unsigned flags)
{
	size_t o;

	/* one reservation for the worst case (every byte escaped), then bytes written in place */
	if (n > ((size_t)-1) / 4) {
		b->failed = true;
		return;
	}
	if (ft_strbuf_reserve(b, 3 * n) != 0)
		return;
	o = b->len;
	for (size_t i = 0; i < n;) {
		int c = ft_pct_next(s, n, &i, flags & ~(unsigned)FT_PCT_STRICT);

		o += encode_byte((unsigned char)c, b->p + o, flags);
	}
	b->len = o;
	b->p[o] = '\0';
}

/* ---- numbers ---- */

size_t ft_u64_dec(uint64_t v, char out[FT_U64_DEC_MAX])
{
	char rev[FT_U64_DEC_MAX];
	size_t n = 0, i;

	do {
		rev[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		out[i] = rev[n - 1 - i];
	out[n] = '\0';
	return n;
}

/* ---- dates ---- */

static const char weekdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Writes v (0 <= v < 10^n) as n digits at p; returns p + n. */
static char *put_digits(char *p, int v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		p[i] = (char)('0' + v % 10);
		v /= 10;
	}
	return p + n;
}

/*
 * UTC calendar fields of t (year, month, day, weekday, time of day) by integer arithmetic: the same
 * as gmtime_r, without its time-zone lock (a response's Last-Modified is formatted on every GET).
 * Days are counted in 400-year eras starting on 1 March, so a leap day is the last day of its year.
 */
void ft_utc_fields(int64_t t, struct tm *tm)
{
	int64_t days = t / 86400, secs = t % 86400, era, doe, yoe, doy, mp;

	if (secs < 0) {
		secs += 86400;
		days--;
	}
	memset(tm, 0, sizeof(*tm));
	tm->tm_hour = (int)(secs / 3600);
	tm->tm_min = (int)(secs / 60 % 60);
	tm->tm_sec = (int)(secs % 60);
	tm->tm_wday = (int)((days % 7 + 11) % 7); /* 1970-01-01 was a Thursday */
	days += 719468;                           /* days from 0000-03-01 to 1970-01-01 */
	era = (days >= 0 ? days : days - 146096) / 146097;
	doe = days - era * 146097;                                   /* day of the era, 0..146096 */
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* year of the era, 0..399 */
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* day of the year from 1 March */
	mp = (5 * doy + 2) / 153;                                    /* month from March, 0..11 */
	tm->tm_mday = (int)(doy - (153 * mp + 2) / 5 + 1);
	tm->tm_mon = (int)(mp < 10 ? mp + 2 : mp - 10);
	tm->tm_year = (int)(yoe + era * 400 + (mp >= 10) - 1900);
}

void ft_date_format_http(time_t t, char out[FT_DATE_HTTP_MAX])
{
	struct tm tm;
	char *p = out;

	out[0] = '\0';
	ft_utc_fields((int64_t)t, &tm);
	if (tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999)
		return;
	memcpy(p, weekdays[tm.tm_wday % 7], 3);
	memcpy(p + 3, ", ", 2);
	p = put_digits(p + 5, tm.tm_mday, 2);
	*p++ = ' ';
	memcpy(p, months[tm.tm_mon % 12], 3);
	p += 3;
	*p++ = ' ';
	p = put_digits(p, tm.tm_year + 1900, 4);
	*p++ = ' ';
	p = put_digits(p, tm.tm_hour, 2);
	*p++ = ':';
	p = put_digits(p, tm.tm_min, 2);
	*p++ = ':';
	p = put_digits(p, tm.tm_sec, 2);
	memcpy(p, " GMT", 5);
}

void ft_date_format_amz(time_t t, char out[FT_DATE_AMZ_MAX])
{
	struct tm tm;
	char *p = out;

	out[0] = '\0';
	ft_utc_fields((int64_t)t, &tm);
	if (tm.tm_year + 1900 < 1000 || tm.tm_year + 1900 > 9999)
		return;
	p = put_digits(p, tm.tm_year + 1900, 4);
	p = put_digits(p, tm.tm_mon + 1, 2);
	p = put_digits(p, tm.tm_mday, 2);
	*p++ = 'T';
	p = put_digits(p, tm.tm_hour, 2);
	p = put_digits(p, tm.tm_min, 2);
	p = put_digits(p, tm.tm_sec, 2);
	memcpy(p, "Z", 2);
}

void ft_date_format_iso8601(int64_t ns, char *out, size_t cap)
{
	struct tm tm;

	ft_utc_fields(ns / 1000000000, &tm);
	snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)((ns / 1000000) % 1000));
}

/* strptime(s, form) over all of s, then timegm; 0 with *t, or -1. */
static int parse_form(const char *s, const char *form, time_t *t)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, form, &tm);
	if (end == NULL || *end != '\0')
		return -1;
	*t = timegm(&tm);
	return *t == (time_t)-1 ? -1 : 0;
}

int ft_date_parse(const char *s, unsigned forms, time_t *t)
{
	if (s == NULL)
		return -1;
	if ((forms & FT_DATE_HTTP) && parse_form(s, "%a, %d %b %Y %H:%M:%S GMT", t) == 0)
		return 0;
	if ((forms & FT_DATE_HTTP_OBSOLETE) &&
	    (parse_form(s, "%A, %d-%b-%y %H:%M:%S GMT", t) == 0 || parse_form(s, "%a %b %e %H:%M:%S %Y", t) == 0))
		return 0;
	if ((forms & FT_DATE_AMZ) && parse_form(s, "%Y%m%dT%H%M%SZ", t) == 0)
		return 0;
	return -1;
}

/* The n digits at s as a number; -1 when one is not a digit. */
static int digits_value(const char *s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int make_time(int year, int mon, int day, int hour, int min, int sec, time_t *t)
{
	struct tm tm = {0};

	if (year < 1970 || mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
		return -1;
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	*t = timegm(&tm);
	return *t == (time_t)-1 ? -1 : 0;
}

/* Exactly yyyymmddThhmmssZ. */
static int parse_amz_exact(const char *s, time_t *t)
{
	int y, mo, d, h, mi, se;

	if (strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
		return -1;
	if (digits_value(s, 4, &y) || digits_value(s + 4, 2, &mo) || digits_value(s + 6, 2, &d) ||
	    digits_value(s + 9, 2, &h) || digits_value(s + 11, 2, &mi) || digits_value(s + 13, 2, &se))
		return -1;
	return make_time(y, mo, d, h, mi, se, t);
}

/* Exactly "Www, DD Mon YYYY HH:MM:SS GMT", the zone also UTC, +0000 or -0000. */
static int parse_http_exact(const char *s, time_t *t)
{
	int y, d, h, mi, se, mon = -1;
	const char *zone;

	if (strlen(s) < 25 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
	    s[19] != ':' || s[22] != ':')
		return -1;
	zone = s + 25;
	if (strcmp(zone, " GMT") != 0 && strcmp(zone, " UTC") != 0 && strcmp(zone, " +0000") != 0 &&
	    strcmp(zone, " -0000") != 0)
		return -1;
	if (digits_value(s + 5, 2, &d) || digits_value(s + 12, 4, &y) || digits_value(s + 17, 2, &h) ||
	    digits_value(s + 20, 2, &mi) || digits_value(s + 23, 2, &se))
		return -1;
	for (int m = 0; m < 12; m++)
		if (strncmp(months[m], s + 8, 3) == 0)
			mon = m + 1;
	if (mon < 0)
		return -1;
	return make_time(y, mon, d, h, mi, se, t);
}

int ft_date_parse_exact(const char *s, unsigned forms, time_t *t)
{
	if (s == NULL)
		return -1;
	if ((forms & FT_DATE_HTTP) && parse_http_exact(s, t) == 0)
		return 0;
	if ((forms & FT_DATE_AMZ) && parse_amz_exact(s, t) == 0)
		return 0;
	return -1;
}

int ft_date_parse_iso8601(const char *s, int64_t *ns)
{
	struct tm tm;
	const char *p;
	int64_t frac = 0, scale = 100000000;
	time_t t;

	if (s == NULL)
		return -1;
	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (p == NULL)
		return -1;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			frac += (*p - '0') * scale;
			scale /= 10;
		}
	}
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
		return -1;
	t = timegm(&tm);
	if (t == (time_t)-1 || t < INT64_MIN / NS_PER_S || t > (INT64_MAX - frac) / NS_PER_S)
		return -1; /* or more than int64 ns hold: before 1677, after 2262 */
	*ns = (int64_t)t * NS_PER_S + frac;
	return 0;
}

bool ft_utf8_valid_n(const char *s, size_t len, bool *non_ascii)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	bool high = false;

	while (p < end) {
		int n = *p < 0x80             ? 0
			: (*p & 0xe0) == 0xc0 ? 1
			: (*p & 0xf0) == 0xe0 ? 2
			: (*p & 0xf8) == 0xf0 ? 3
					      : -1;
		if (n < 0 || (n == 1 && *p < 0xc2) || end - p <= n)
			return false;
		high = high || n > 0;
		p++;
		for (int i = 0; i < n; i++, p++)
			if ((*p & 0xc0) != 0x80)
				return false;
	}
	if (non_ascii != NULL)
		*non_ascii = high;
	return true;
}

bool ft_utf8_valid(const char *s, bool *non_ascii)
{
	return ft_utf8_valid_n(s, strlen(s), non_ascii);
}

/* The nanoseconds of the duration unit at s (its length in *len); 0 when none. */
static int64_t duration_unit(const char *s, size_t *len)
{
	static const struct {
		const char *name;
		int64_t ns;
	} units[] = {
		{"ns", 1},
		{"us", 1000},
		{"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
		{"\xce\xbcs", 1000}, /* U+03BC Greek mu */
		{"ms", 1000000},
		{"s", 1000000000},
		{"m", 60 * (int64_t)1000000000},
		{"h", 3600 * (int64_t)1000000000},
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		size_t n = strlen(units[i].name);
		if (strncmp(s, units[i].name, n) == 0) { /* "ms" is tried before "m" */
			*len = n;
			return units[i].ns;
		}
	}
	return 0;
}

int ft_duration_parse(const char *s, int64_t *ns)
{
	int64_t total = 0;

	if (strcmp(s, "0") == 0) {
		*ns = 0;
		return 0;
	}
	if (*s == '\0')
		return -1;
	while (*s != '\0') {
		uint64_t whole = 0, frac = 0, scale = 1;
		bool digits = false;
		size_t ulen;
		for (; *s >= '0' && *s <= '9'; s++, digits = true)
			if (whole > (UINT64_MAX - 9) / 10 || (whole = whole * 10 + (uint64_t)(*s - '0')) > INT64_MAX)
				return -1;
		if (*s == '.')
			for (s++; *s >= '0' && *s <= '9'; s++, digits = true)
				if (scale < 1000000000000000000ull) { /* digits past 10^-18 change nothing */
					frac = frac * 10 + (uint64_t)(*s - '0');
					scale *= 10;
				}
		int64_t unit = duration_unit(s, &ulen);
		if (!digits || unit == 0)
			return -1;
		s += ulen;
		if (whole > (uint64_t)(INT64_MAX / unit))
			return -1;
		/* the fraction's share: frac / scale of a unit (a unit is at most 3.6e12 ns, frac / scale < 1) */
		int64_t part =
			(int64_t)whole * unit + (int64_t)((long double)frac * (long double)unit / (long double)scale);
		if (part < 0 || total > INT64_MAX - part)
			return -1;
		total += part;
	}
	*ns = total;
	return 0;
}
