/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for base/codec.c: hex, base64 (RFC 4648 vectors), percent-encoding (RFC 3986), date forms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/codec.h"

#define S(lit) (lit), (sizeof(lit) - 1)

/* 1994-11-06 08:49:37 UTC, RFC 9110's example date. */
#define RFC_EXAMPLE ((time_t)784111777)

/* ---- hex ---- */

static void test_hex(void **state)
{
	static const uint8_t bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
	uint8_t out[8];
	char hex[32];

	(void)state;
	ft_hex_encode(bytes, sizeof(bytes), hex);
	assert_string_equal(hex, "00017f80abff");
	ft_hex_encode(bytes, 0, hex);
	assert_string_equal(hex, "");

	assert_int_equal(ft_hex_decode(S("00017f80abff"), out, sizeof(out), 0), 6);
	assert_memory_equal(out, bytes, 6);
	assert_int_equal(ft_hex_decode(S("00017F80ABFF"), out, sizeof(out), 0), 6);
	assert_memory_equal(out, bytes, 6);
	assert_int_equal(ft_hex_decode(S(""), out, sizeof(out), 0), 0);
	assert_int_equal(ft_hex_decode(S("abc"), out, sizeof(out), 0), -1);                /* odd */
	assert_int_equal(ft_hex_decode(S("0g"), out, sizeof(out), 0), -1);                 /* not a digit */
	assert_int_equal(ft_hex_decode(S(" 0"), out, sizeof(out), 0), -1);                 /* no blanks */
	assert_int_equal(ft_hex_decode(S("000102030405060708"), out, sizeof(out), 0), -1); /* 9 bytes > cap */
	assert_int_equal(ft_hex_decode(S("0001020304050607"), out, sizeof(out), 0), 8);    /* exactly cap */
	assert_int_equal(ft_hex_decode(S("abff"), out, sizeof(out), FT_HEX_LOWERCASE), 2);
	assert_int_equal(ft_hex_decode(S("ABff"), out, sizeof(out), FT_HEX_LOWERCASE), -1);

	for (int c = 0; c < 256; c++) {
		const char *digits = "0123456789abcdef", *upper = "0123456789ABCDEF";
		const char *p = c != 0 ? strchr(digits, c) : NULL, *q = c != 0 ? strchr(upper, c) : NULL;
		int want = p ? (int)(p - digits) : q ? (int)(q - upper) : -1;

		assert_int_equal(ft_hex_digit(c), want);
	}
	/* Round trip of every byte value. */
	{
		uint8_t all[256], back[256];
		char text[513];

		for (int i = 0; i < 256; i++)
			all[i] = (uint8_t)i;
		ft_hex_encode(all, sizeof(all), text);
		assert_int_equal(strlen(text), 512);
		assert_int_equal(ft_hex_decode(text, 512, back, sizeof(back), FT_HEX_LOWERCASE), 256);
		assert_memory_equal(all, back, 256);
	}
}

/* ---- base64 ---- */

/* RFC 4648 section 10. */
static const char *const b64_vectors[][2] = {
	{"", ""},
	{"f", "Zg=="},
	{"fo", "Zm8="},
	{"foo", "Zm9v"},
	{"foob", "Zm9vYg=="},
	{"fooba", "Zm9vYmE="},
	{"foobar", "Zm9vYmFy"},
};

static void test_base64_vectors(void **state)
{
	char enc[16], dec[16];

	(void)state;
	for (size_t i = 0; i < sizeof(b64_vectors) / sizeof(b64_vectors[0]); i++) {
		const char *plain = b64_vectors[i][0], *coded = b64_vectors[i][1];
		size_t n = strlen(plain);

		assert_int_equal(ft_base64_encode(plain, n, enc), strlen(coded));
		assert_string_equal(enc, coded);
		assert_int_equal(FT_BASE64_LEN(n), strlen(coded));
		assert_int_equal(ft_base64_decode(coded, strlen(coded), dec, sizeof(dec)), n);
		assert_memory_equal(dec, plain, n);
		/* base64url: the same text for these (no '+' or '/'), without the padding */
		assert_int_equal(ft_base64url_encode(plain, n, enc), strcspn(coded, "="));
		assert_memory_equal(enc, coded, strcspn(coded, "="));
		assert_int_equal(ft_base64url_decode(enc, strlen(enc), dec, sizeof(dec)), n);
		assert_memory_equal(dec, plain, n);
	}
}

static void test_base64_alphabets(void **state)
{
	static const uint8_t plus[] = {0xfb, 0xef, 0xbe}, slash[] = {0xff, 0xff, 0xff}, two[] = {0xfb, 0xff};
	uint8_t out[32];
	char enc[16];

	(void)state;
	ft_base64_encode(plus, 3, enc);
	assert_string_equal(enc, "++++");
	ft_base64url_encode(plus, 3, enc);
	assert_string_equal(enc, "----");
	ft_base64_encode(slash, 3, enc);
	assert_string_equal(enc, "////");
	ft_base64url_encode(slash, 3, enc);
	assert_string_equal(enc, "____");
	ft_base64url_encode(two, 2, enc);
	assert_string_equal(enc, "-_8");
	ft_base64_encode(two, 2, enc);
	assert_string_equal(enc, "+/8=");

	assert_int_equal(ft_base64url_decode(S("-_8"), out, sizeof(out)), 2);
	assert_memory_equal(out, two, 2);
	assert_int_equal(ft_base64_decode(S("+/8="), out, sizeof(out)), 2);
	assert_memory_equal(out, two, 2);
	/* Each alphabet refuses the other's two characters. */
	assert_int_equal(ft_base64url_decode(S("+/8"), out, sizeof(out)), -1);
	assert_int_equal(ft_base64_decode(S("-_8="), out, sizeof(out)), -1);
}

static void test_base64_bad_input(void **state)
{
	uint8_t out[32];

	(void)state;
	/* Standard: length a multiple of 4, characters of the alphabet, room in cap. */
	assert_int_equal(ft_base64_decode(S("abc"), out, sizeof(out)), -1);
	assert_int_equal(ft_base64_decode(S("Zg="), out, sizeof(out)), -1);
	assert_int_equal(ft_base64_decode(S("Zm9vY"), out, sizeof(out)), -1);
	assert_int_equal(ft_base64_decode(S("Zm9*"), out, sizeof(out)), -1);
	assert_int_equal(ft_base64_decode(S("Zm\x80v"), out, sizeof(out)), -1);
	assert_int_equal(ft_base64_decode(S("Zm9vYmFy"), out, 5), -1); /* 6 bytes */
	assert_int_equal(ft_base64_decode(S("Zm9vYmE="), out, 5), 5);  /* 5 bytes, decoded through a temporary */
	assert_memory_equal(out, "fooba", 5);
	assert_int_equal(ft_base64_decode(S("1B2M2Y8AsgTpgAmY7PhCfg=="), out, 16), 16);
	/* The tolerance kept from EVP_DecodeBlock (see codec.h): blanks before, line ends after. */
	assert_int_equal(ft_base64_decode(S("    Zm9v"), out, sizeof(out)), 3);
	assert_memory_equal(out, "foo", 3);
	assert_int_equal(ft_base64_decode(S("Zm9v\r\n\r\n"), out, sizeof(out)), 3);
	assert_memory_equal(out, "foo", 3);

	/* base64url: no padding, nothing outside the alphabet, leftover bits dropped, room in cap. */
	assert_int_equal(ft_base64url_decode(S("Zg=="), out, sizeof(out)), -1);
	assert_int_equal(ft_base64url_decode(S("Zm 9"), out, sizeof(out)), -1);
	assert_int_equal(ft_base64url_decode(S("Z"), out, sizeof(out)), 0);
	assert_int_equal(ft_base64url_decode(S("Zh"), out, sizeof(out)), 1); /* "Zg" with stray low bits */
	assert_int_equal(out[0], 'f');
	assert_int_equal(ft_base64url_decode(S("Zm9vYmFy"), out, 5), -1);
	assert_int_equal(ft_base64url_decode(S(""), out, 0), 0);
}

static void test_base64_round_trip(void **state)
{
	uint8_t data[300], back[300];
	char enc[FT_BASE64_LEN(300) + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 151 + 7);
	for (size_t n = 0; n <= sizeof(data); n += (n < 10 ? 1 : 37)) {
		size_t len = ft_base64_encode(data, n, enc);

		assert_int_equal(len, FT_BASE64_LEN(n));
		assert_int_equal(ft_base64_decode(enc, len, back, sizeof(back)), n);
		assert_memory_equal(back, data, n);
		len = ft_base64url_encode(data, n, enc);
		assert_int_equal(len, (n * 4 + 2) / 3);
		assert_int_equal(ft_base64url_decode(enc, len, back, sizeof(back)), n);
		assert_memory_equal(back, data, n);
	}
}

/* ---- percent-encoding ---- */

static void test_pct_encode(void **state)
{
	char out[128], *dup;
	ft_strbuf_t b = {0};

	(void)state;
	/* RFC 3986 2.3: unreserved characters stay. */
	assert_int_equal(ft_pct_encode(S("AZaz09-._~"), out, 0), 10);
	assert_string_equal(out, "AZaz09-._~");
	/* 2.2: gen-delims and sub-delims are encoded, uppercase hex (2.1); '/' only without KEEP_SLASH. */
	ft_pct_encode(S(":/?#[]@"), out, 0);
	assert_string_equal(out, "%3A%2F%3F%23%5B%5D%40");
	ft_pct_encode(S("!$&'()*+,;="), out, 0);
	assert_string_equal(out, "%21%24%26%27%28%29%2A%2B%2C%3B%3D");
	ft_pct_encode(S(":/?#[]@"), out, FT_PCT_KEEP_SLASH);
	assert_string_equal(out, "%3A/%3F%23%5B%5D%40");
	/* A path, bytes of UTF-8, a NUL, '%' itself, a space (never '+'). */
	ft_pct_encode(S("dir/a b%c\0\xc3\xa9~._-Z9"), out, FT_PCT_KEEP_SLASH);
	assert_string_equal(out, "dir/a%20b%25c%00%C3%A9~._-Z9");
	ft_pct_encode(S("a/b c&d=e+f~"), out, 0);
	assert_string_equal(out, "a%2Fb%20c%26d%3De%2Bf~");
	/* A path keeps no "." or ".." segment a URL library would remove (RFC 3986 5.2.4); other dots stay. */
	ft_pct_encode(S("./a/../b/.../.c/d./.."), out, FT_PCT_KEEP_SLASH);
	assert_string_equal(out, "%2E/a/%2E%2E/b/.../.c/d./%2E%2E");
	ft_pct_encode(S("."), out, FT_PCT_KEEP_SLASH);
	assert_string_equal(out, "%2E");
	ft_pct_encode(S("a//./"), out, FT_PCT_KEEP_SLASH);
	assert_string_equal(out, "a//%2E/");
	ft_pct_encode(S("../x"), out, 0);
	assert_string_equal(out, "..%2Fx");
	ft_pct_encode(S(""), out, 0);
	assert_string_equal(out, "");

	ft_pct_encode_buf(&b, S("a b/c+d~\xc3\xa9"), FT_PCT_KEEP_SLASH);
	ft_pct_encode_buf(&b, S("/"), 0);
	assert_false(b.failed);
	assert_string_equal(b.p, "a%20b/c%2Bd~%C3%A9%2F");
	ft_strbuf_free(&b);

	dup = ft_pct_encode_dup(S("?#&=+"), FT_PCT_KEEP_SLASH);
	assert_string_equal(dup, "%3F%23%26%3D%2B");
	free(dup);
	dup = ft_pct_encode_dup(S(""), 0);
	assert_string_equal(dup, "");
	free(dup);
}

static void test_pct_decode(void **state)
{
	char out[64];
	ft_strbuf_t b = {0};
	size_t i = 0;

	(void)state;
	assert_int_equal(ft_pct_decode(S("/a%20b%2Fc"), out, FT_PCT_STRICT), 6);
	assert_string_equal(out, "/a b/c");
	assert_int_equal(ft_pct_decode(S("a+b"), out, FT_PCT_STRICT), 3);
	assert_string_equal(out, "a+b");
	assert_int_equal(ft_pct_decode(S("a+b%2b"), out, FT_PCT_PLUS_SPACE | FT_PCT_STRICT), 4);
	assert_string_equal(out, "a b+");
	assert_int_equal(ft_pct_decode(S("x%00y"), out, FT_PCT_STRICT), 3);
	assert_memory_equal(out, "x\0y", 3);
	assert_int_equal(ft_pct_decode(S("%7e%7E"), out, 0), 2);
	assert_string_equal(out, "~~");
	assert_int_equal(ft_pct_decode(S("%e2%82%ac"), out, FT_PCT_STRICT), 3);
	assert_string_equal(out, "\xe2\x82\xac");
	/* Bad escapes: an error when strict, else a plain '%'. */
	assert_int_equal(ft_pct_decode(S("%zz"), out, FT_PCT_STRICT), -1);
	assert_int_equal(ft_pct_decode(S("%4"), out, FT_PCT_STRICT), -1);
	assert_int_equal(ft_pct_decode(S("%"), out, FT_PCT_STRICT), -1);
	assert_int_equal(ft_pct_decode(S("%4"), out, 0), 2);
	assert_string_equal(out, "%4");
	assert_int_equal(ft_pct_decode(S("a%%41"), out, 0), 3);
	assert_string_equal(out, "a%A");
	assert_int_equal(ft_pct_decode(S("%+"), out, FT_PCT_PLUS_SPACE), 2);
	assert_string_equal(out, "% ");
	/* The escape must end inside n even when the text goes on. */
	assert_int_equal(ft_pct_decode("%41", 2, out, 0), 2);
	assert_string_equal(out, "%4");

	assert_int_equal(ft_pct_next(S("%41+"), &i, FT_PCT_PLUS_SPACE), 'A');
	assert_int_equal(i, 3);
	assert_int_equal(ft_pct_next(S("%41+"), &i, FT_PCT_PLUS_SPACE), ' ');
	assert_int_equal(i, 4);
	i = 0;
	assert_int_equal(ft_pct_next(S("%ff"), &i, 0), 0xff);
	i = 0;
	assert_int_equal(ft_pct_next(S("%g0"), &i, FT_PCT_STRICT), -1);
	assert_int_equal(i, 0);

	assert_int_equal(ft_pct_decode_buf(&b, S("a%2Fb+c"), FT_PCT_PLUS_SPACE), 0);
	assert_int_equal(ft_pct_decode_buf(&b, S("|%zz"), FT_PCT_STRICT), -1);
	assert_string_equal(b.p, "a/b c|");
	ft_strbuf_free(&b);

	/* Every byte survives encode then decode, whatever the flags. */
	{
		char all[256], enc[3 * 256 + 1], back[257];

		for (int k = 0; k < 256; k++)
			all[k] = (char)k;
		for (unsigned flags = 0; flags <= FT_PCT_KEEP_SLASH; flags++) {
			size_t n = ft_pct_encode(all, sizeof(all), enc, flags);

			assert_int_equal(ft_pct_decode(enc, n, back, FT_PCT_STRICT | FT_PCT_PLUS_SPACE), 256);
			assert_memory_equal(back, all, 256);
		}
	}
}

/* SigV4's canonical spelling: decoded once, encoded again. */
static void test_pct_recode(void **state)
{
	static const struct {
		const char *in;
		unsigned flags;
		const char *out;
	} cases[] = {
		{"~", 0, "~"},
		{"%7e", 0, "~"},
		{"%7E", 0, "~"},
		{"%2F", 0, "%2F"},
		{"%2f", 0, "%2F"},
		{"a/b", 0, "a%2Fb"},
		{"a/b", FT_PCT_KEEP_SLASH, "a/b"},
		{"a b", 0, "a%20b"},
		{"a+b", 0, "a%2Bb"},
		{"a+b", FT_PCT_PLUS_SPACE, "a%20b"},
		{"a%2Bb", FT_PCT_PLUS_SPACE, "a%2Bb"},
		{"%zz", 0, "%25zz"},
		{"100%", FT_PCT_STRICT, "100%25"}, /* never strict */
		{"\xc3\xa9", 0, "%C3%A9"},
		{"%c3%a9", 0, "%C3%A9"},
		{"%2541", 0, "%2541"}, /* decoded once only */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ft_strbuf_t b = {0};

		ft_pct_recode_buf(&b, cases[i].in, strlen(cases[i].in), cases[i].flags);
		assert_false(b.failed);
		if (strcmp(b.p, cases[i].out) != 0)
			fail_msg("recode \"%s\" (flags %u): \"%s\", want \"%s\"", cases[i].in, cases[i].flags, b.p,
				 cases[i].out);
		ft_strbuf_free(&b);
	}
}

/* ---- dates ---- */

/* The calendar arithmetic agrees with gmtime_r: every day of 1600-2500 at a varying second, leap days and
 * century years included, and the seconds around the epoch on both sides. */
static void test_utc_fields(void **state)
{
	const int64_t first = -11676096000LL, last = 16725225600LL; /* 1600-01-01, 2500-01-01 */
	struct tm want, got;
	int64_t t;

	(void)state;
	for (t = first; t < last; t += 86400 + 7919) {
		time_t tt = (time_t)t;

		assert_non_null(gmtime_r(&tt, &want));
		ft_utc_fields(t, &got);
		assert_int_equal(got.tm_year, want.tm_year);
		assert_int_equal(got.tm_mon, want.tm_mon);
		assert_int_equal(got.tm_mday, want.tm_mday);
		assert_int_equal(got.tm_wday, want.tm_wday);
		assert_int_equal(got.tm_hour, want.tm_hour);
		assert_int_equal(got.tm_min, want.tm_min);
		assert_int_equal(got.tm_sec, want.tm_sec);
	}
	ft_utc_fields(-1, &got); /* 1969-12-31 23:59:59, a Wednesday */
	assert_int_equal(got.tm_year, 69);
	assert_int_equal(got.tm_mon, 11);
	assert_int_equal(got.tm_mday, 31);
	assert_int_equal(got.tm_wday, 3);
	assert_int_equal(got.tm_sec, 59);
	ft_utc_fields(951782400LL, &got); /* 2000-02-29: a leap day of a century year */
	assert_int_equal(got.tm_mon, 1);
	assert_int_equal(got.tm_mday, 29);
}

static void test_date_format(void **state)
{
	char http[FT_DATE_HTTP_MAX], amz[FT_DATE_AMZ_MAX], iso[FT_DATE_ISO8601_MAX];

	(void)state;
	ft_date_format_http(RFC_EXAMPLE, http);
	assert_string_equal(http, "Sun, 06 Nov 1994 08:49:37 GMT");
	ft_date_format_http(0, http);
	assert_string_equal(http, "Thu, 01 Jan 1970 00:00:00 GMT");
	ft_date_format_http(1138985109, http);
	assert_string_equal(http, "Fri, 03 Feb 2006 16:45:09 GMT");
	ft_date_format_http((time_t)253402300799LL, http); /* the last second of 9999 */
	assert_string_equal(http, "Fri, 31 Dec 9999 23:59:59 GMT");
	ft_date_format_http((time_t)253402300800LL, http);
	assert_string_equal(http, "");

	ft_date_format_amz(RFC_EXAMPLE, amz);
	assert_string_equal(amz, "19941106T084937Z");
	ft_date_format_amz(0, amz);
	assert_string_equal(amz, "19700101T000000Z");
	ft_date_format_amz((time_t)-31000000000LL, amz); /* year 987 */
	assert_string_equal(amz, "");
	ft_date_format_amz((time_t)253402300800LL, amz); /* year 10000 */
	assert_string_equal(amz, "");

	ft_date_format_iso8601(1138985109123000000LL, iso, sizeof(iso));
	assert_string_equal(iso, "2006-02-03T16:45:09.123Z");
	ft_date_format_iso8601(0, iso, sizeof(iso));
	assert_string_equal(iso, "1970-01-01T00:00:00.000Z");
	ft_date_format_iso8601((int64_t)RFC_EXAMPLE * 1000000000LL + 999999999LL, iso, sizeof(iso));
	assert_string_equal(iso, "1994-11-06T08:49:37.999Z");
}

static void test_date_parse(void **state)
{
	const unsigned all = FT_DATE_HTTP | FT_DATE_HTTP_OBSOLETE | FT_DATE_AMZ;
	time_t t;

	(void)state;
	/* RFC 9110 5.6.7: the three forms of one instant. */
	t = 0;
	assert_int_equal(ft_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", FT_DATE_HTTP, &t), 0);
	assert_int_equal(t, RFC_EXAMPLE);
	t = 0;
	assert_int_equal(ft_date_parse("Sunday, 06-Nov-94 08:49:37 GMT", FT_DATE_HTTP_OBSOLETE, &t), 0);
	assert_int_equal(t, RFC_EXAMPLE);
	t = 0;
	assert_int_equal(ft_date_parse("Sun Nov  6 08:49:37 1994", FT_DATE_HTTP_OBSOLETE, &t), 0);
	assert_int_equal(t, RFC_EXAMPLE);
	t = 0;
	assert_int_equal(ft_date_parse("19941106T084937Z", FT_DATE_AMZ, &t), 0);
	assert_int_equal(t, RFC_EXAMPLE);
	/* Only the forms asked for. */
	assert_int_equal(ft_date_parse("Sunday, 06-Nov-94 08:49:37 GMT", FT_DATE_HTTP | FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse("Sun Nov  6 08:49:37 1994", FT_DATE_HTTP, &t), -1);
	assert_int_equal(ft_date_parse("19941106T084937Z", FT_DATE_HTTP | FT_DATE_HTTP_OBSOLETE, &t), -1);
	assert_int_equal(ft_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", FT_DATE_AMZ, &t), -1);
	/* strptime's leniency: names in any case. */
	t = 0;
	assert_int_equal(ft_date_parse("sun, 06 nov 1994 08:49:37 GMT", FT_DATE_HTTP, &t), 0);
	assert_int_equal(t, RFC_EXAMPLE);
	/* Not dates, or with something after them. */
	assert_int_equal(ft_date_parse("yesterday", all, &t), -1);
	assert_int_equal(ft_date_parse("", all, &t), -1);
	assert_int_equal(ft_date_parse(NULL, all, &t), -1);
	assert_int_equal(ft_date_parse("Sun, 06 Nov 1994 08:49:37 GMT+1", all, &t), -1);
	assert_int_equal(ft_date_parse("Sun, 06 Nov 1994 08:49:37 UTC", all, &t), -1);
	assert_int_equal(ft_date_parse("Sun, 06 Xyz 1994 08:49:37 GMT", all, &t), -1);
}

static void test_date_parse_exact(void **state)
{
	time_t t;

	(void)state;
	t = 0;
	assert_int_equal(ft_date_parse_exact("Sun, 06 Nov 1994 08:49:37 GMT", FT_DATE_HTTP, &t), 0);
	assert_int_equal(t, RFC_EXAMPLE);
	for (size_t i = 0; i < 3; i++) {
		static const char *const zones[] = {"Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 +0000",
						    "Sun, 06 Nov 1994 08:49:37 -0000"};
		t = 0;
		assert_int_equal(ft_date_parse_exact(zones[i], FT_DATE_HTTP, &t), 0);
		assert_int_equal(t, RFC_EXAMPLE);
	}
	t = 0;
	assert_int_equal(ft_date_parse_exact("Xyz, 06 Nov 1994 08:49:37 GMT", FT_DATE_HTTP, &t),
			 0); /* weekday unchecked */
	assert_int_equal(t, RFC_EXAMPLE);
	t = 0;
	assert_int_equal(ft_date_parse_exact("19941106T084937Z", FT_DATE_AMZ, &t), 0);
	assert_int_equal(t, RFC_EXAMPLE);
	t = 0;
	assert_int_equal(ft_date_parse_exact("19941106T084937Z", FT_DATE_HTTP | FT_DATE_AMZ, &t), 0);
	assert_int_equal(t, RFC_EXAMPLE);

	/* One spelling only. */
	assert_int_equal(ft_date_parse_exact("sun, 06 nov 1994 08:49:37 GMT", FT_DATE_HTTP, &t), -1);
	assert_int_equal(ft_date_parse_exact("Sun, 6 Nov 1994 08:49:37 GMT", FT_DATE_HTTP, &t), -1);
	assert_int_equal(ft_date_parse_exact("Sun, 06 Nov 1994 08:49:37 GMT ", FT_DATE_HTTP, &t), -1);
	assert_int_equal(ft_date_parse_exact("Sun, 06 Nov 1994 08:49:37 +0100", FT_DATE_HTTP, &t), -1);
	assert_int_equal(ft_date_parse_exact("Sunday, 06-Nov-94 08:49:37 GMT", FT_DATE_HTTP, &t), -1);
	assert_int_equal(ft_date_parse_exact("Sun, 06 Nov 1994 08:49:37 GMT", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact("1994116T084937Z", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact("19941106T084937", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact("19941106 084937Z", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact("1994110GT084937Z", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact(NULL, FT_DATE_AMZ, &t), -1);
	/* Fields out of range, and years before 1970. */
	assert_int_equal(ft_date_parse_exact("19941306T084937Z", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact("19941100T084937Z", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact("19941106T244937Z", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact("19941106T086037Z", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact("19691231T235959Z", FT_DATE_AMZ, &t), -1);
	assert_int_equal(ft_date_parse_exact("Wed, 31 Dec 1969 23:59:59 GMT", FT_DATE_HTTP, &t), -1);
}

static void test_utf8_valid(void **state)
{
	bool high = true;

	(void)state;
	assert_true(ft_utf8_valid("plain", &high));
	assert_false(high);
	assert_true(ft_utf8_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", &high));
	assert_true(high);
	assert_false(ft_utf8_valid("caf\xe9", NULL));      /* Latin-1 */
	assert_false(ft_utf8_valid("\xc0\xaf", NULL));     /* overlong */
	assert_false(ft_utf8_valid("\xe2\x82", NULL));     /* cut sequence */
	assert_false(ft_utf8_valid("\xf8\x88\x80", NULL)); /* no such lead byte */
}

static void test_date_iso8601(void **state)
{
	const int64_t base = (int64_t)RFC_EXAMPLE * 1000000000LL;
	char iso[FT_DATE_ISO8601_MAX];
	int64_t ns;

	(void)state;
	ns = 0;
	assert_int_equal(ft_date_parse_iso8601("1994-11-06T08:49:37Z", &ns), 0);
	assert_int_equal(ns, base);
	assert_int_equal(ft_date_parse_iso8601("1994-11-06T08:49:37.250Z", &ns), 0);
	assert_int_equal(ns, base + 250000000);
	assert_int_equal(ft_date_parse_iso8601("1994-11-06T08:49:37.123456789123Z", &ns), 0); /* past ns: dropped */
	assert_int_equal(ns, base + 123456789);
	assert_int_equal(ft_date_parse_iso8601("1994-11-06T08:49:37+00:00", &ns), 0);
	assert_int_equal(ns, base);
	assert_int_equal(ft_date_parse_iso8601("1994-11-06T08:49:37.5+00:00", &ns), 0);
	assert_int_equal(ns, base + 500000000);

	assert_int_equal(ft_date_parse_iso8601("1994-11-06T08:49:37", &ns), -1);
	assert_int_equal(ft_date_parse_iso8601("1994-11-06T08:49:37+01:00", &ns), -1);
	assert_int_equal(ft_date_parse_iso8601("1994-11-06 08:49:37Z", &ns), -1);
	assert_int_equal(ft_date_parse_iso8601("1994-11-06T08:49:37.Zx", &ns), -1);
	assert_int_equal(ft_date_parse_iso8601("", &ns), -1);
	/* Only what int64 ns hold: 1677-09-21T00:12:44Z to 2262-04-11T23:47:16.854775807Z. */
	assert_int_equal(ft_date_parse_iso8601("2262-04-11T23:47:16.854775807Z", &ns), 0);
	assert_int_equal(ns, INT64_MAX);
	assert_int_equal(ft_date_parse_iso8601("2262-04-11T23:47:16.854775808Z", &ns), -1);
	assert_int_equal(ft_date_parse_iso8601("2300-01-01T00:00:00Z", &ns), -1);
	assert_int_equal(ft_date_parse_iso8601("1677-09-21T00:12:44Z", &ns), 0);
	assert_int_equal(ns, -9223372036000000000LL);
	assert_int_equal(ft_date_parse_iso8601("1677-09-21T00:12:43Z", &ns), -1);
	assert_int_equal(ft_date_parse_iso8601("1004-01-01T00:00:00Z", &ns), -1);
	assert_int_equal(ft_date_parse_iso8601(NULL, &ns), -1);

	/* What S3 listings write parses back. */
	ft_date_format_iso8601(base + 42000000, iso, sizeof(iso));
	assert_int_equal(ft_date_parse_iso8601(iso, &ns), 0);
	assert_int_equal(ns, base + 42000000);
}

static void test_duration_parse(void **state)
{
	static const struct {
		const char *s;
		int64_t ns;
	} good[] = {
		{"0", 0},
		{"5m", 300000000000},
		{"5m0s", 300000000000},
		{"1h30m", 5400000000000},
		{"1.5s", 1500000000},
		{"300ms", 300000000},
		{"2us", 2000},
		{"2\xc2\xb5s", 2000},
		{"2\xce\xbcs", 2000},
		{"7ns", 7},
		{".5s", 500000000},
		{"1.s", 1000000000},
		{"0.000000001s", 1},
		{"2562047h47m16.854775807s", INT64_MAX},
	};
	static const char *bad[] = {"",
				    "5",
				    "m",
				    "-5m",
				    "+5m",
				    "5 m",
				    "5mm",
				    "5x",
				    "1h 2m",
				    ".s",
				    "5m.",
				    "1e3s",
				    "2562048h",
				    "9223372036854775808ns",
				    "99999999999999999999s"};
	int64_t ns;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ns = -1;
		assert_int_equal(ft_duration_parse(good[i].s, &ns), 0);
		assert_true(ns == good[i].ns);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ft_duration_parse(bad[i], &ns), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hex),
		cmocka_unit_test(test_base64_vectors),
		cmocka_unit_test(test_base64_alphabets),
		cmocka_unit_test(test_base64_bad_input),
		cmocka_unit_test(test_base64_round_trip),
		cmocka_unit_test(test_pct_encode),
		cmocka_unit_test(test_pct_decode),
		cmocka_unit_test(test_pct_recode),
		cmocka_unit_test(test_utc_fields),
		cmocka_unit_test(test_date_format),
		cmocka_unit_test(test_date_parse),
		cmocka_unit_test(test_date_parse_exact),
		cmocka_unit_test(test_date_iso8601),
		cmocka_unit_test(test_utf8_valid),
		cmocka_unit_test(test_duration_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
