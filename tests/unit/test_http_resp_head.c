/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the response-head parser of common/http/parse.c (ft_hp_parse_resp_head). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http/parse.h"

#define MAXH 16

static ft_hp_header_t hdrs[MAXH];

static ft_hp_result_t parse(const char *s, ft_hp_resp_head_t *h)
{
	return ft_hp_parse_resp_head(s, strlen(s), 8192, hdrs, MAXH, h);
}

static void assert_span(const char *p, size_t n, const char *want)
{
	assert_int_equal(n, strlen(want));
	assert_memory_equal(p, want, n);
}

static void test_valid_head(void **state)
{
	const char *s =
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"abc\"\r\nX-Empty:\r\nX-Pad: \t v a l \t\r\n\r\nhello";
	ft_hp_resp_head_t h;

	(void)state;
	assert_int_equal(parse(s, &h), FT_HP_DONE);
	assert_int_equal(h.version_minor, 1);
	assert_int_equal(h.status, 200);
	assert_span(h.reason, h.reason_len, "OK");
	assert_int_equal(h.nheaders, 4);
	assert_span(hdrs[0].name, hdrs[0].name_len, "Content-Length");
	assert_span(hdrs[1].value, hdrs[1].value_len, "\"abc\"");
	assert_int_equal(hdrs[2].value_len, 0);
	assert_span(hdrs[3].value, hdrs[3].value_len, "v a l");
	assert_int_equal(h.head_len, strlen(s) - 5); /* the body follows */
	assert_int_equal(h.content_length, 5);
	assert_false(h.chunked);
	assert_true(h.keep_alive);
}

static void test_status_lines(void **state)
{
	ft_hp_resp_head_t h;

	(void)state;
	/* no reason phrase, with or without the space before it */
	assert_int_equal(parse("HTTP/1.1 204\r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.status, 204);
	assert_int_equal(h.reason_len, 0);
	assert_int_equal(parse("HTTP/1.1 404 \r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.status, 404);
	assert_int_equal(h.reason_len, 0);
	/* a reason with spaces, tabs and obs-text */
	assert_int_equal(parse("HTTP/1.1 500 Internal \tServer \xe9rror\r\n\r\n", &h), FT_HP_DONE);
	assert_span(h.reason, h.reason_len, "Internal \tServer \xe9rror");
	/* the ends of the valid range */
	assert_int_equal(parse("HTTP/1.1 100 Continue\r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.status, 100);
	assert_int_equal(parse("HTTP/1.1 599 X\r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.status, 599);
	/* bare LF line ends */
	assert_int_equal(parse("HTTP/1.1 307 Temporary Redirect\nLocation: http://a/b\n\n", &h), FT_HP_DONE);
	assert_int_equal(h.status, 307);
	assert_int_equal(h.nheaders, 1);
}

static void test_connection(void **state)
{
	ft_hp_resp_head_t h;

	(void)state;
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nConnection: foo, Close\r\n\r\n", &h), FT_HP_DONE);
	assert_false(h.keep_alive);
	assert_int_equal(parse("HTTP/1.0 200 OK\r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.version_minor, 0);
	assert_false(h.keep_alive);
	assert_int_equal(parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", &h), FT_HP_DONE);
	assert_true(h.keep_alive);
	assert_int_equal(parse("HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\n\r\n", &h), FT_HP_DONE);
	assert_false(h.keep_alive);
}

static void test_framing(void **state)
{
	ft_hp_resp_head_t h;

	(void)state;
	/* no length: delimited by the close (or no body, as the status or the request says) */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.content_length, -1);
	assert_false(h.chunked);
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", &h), FT_HP_DONE);
	assert_true(h.chunked);
	assert_int_equal(h.content_length, -1);
	/* repeated Content-Length with the same value, as a list or as several fields */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\ncontent-length: 7\r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.content_length, 7);
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.content_length, 0);
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.content_length, INT64_MAX);
}

static void test_bad_framing(void **state)
{
	static const char *bad[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", /* overflow */
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", /* negative */
		"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: ,\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", /* conflicting duplicates */
		"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", /* both */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",                         /* not decodable here */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\n",
	};
	ft_hp_resp_head_t h;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ft_hp_result_t rc = parse(bad[i], &h);

		if (rc != FT_HP_BAD)
			fail_msg("case %zu (%s): got %d, want BAD", i, bad[i], rc);
	}
}

static void test_bad_status_line(void **state)
{
	static const char *bad[] = {
		"HTTP/1.1 20 OK\r\n\r\n",   /* two digits */
		"HTTP/1.1 2000 OK\r\n\r\n", /* four digits */
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 099 X\r\n\r\n", /* outside 100..599 */
		"HTTP/1.1 600 X\r\n\r\n",
		"HTTP/1.1  200 OK\r\n\r\n", /* two spaces */
		"HTTP/1.1 200\tOK\r\n\r\n", /* no space before the reason */
		"HTTP/1.1\r\n\r\n",
		"http/1.1 200 OK\r\n\r\n", /* lowercase protocol */
		"HTTP/1.10 200 OK\r\n\r\n",
		"HTTP/1 200 OK\r\n\r\n",
		"HTTP/x.1 200 OK\r\n\r\n",
		"HTTP/2 200\r\n\r\n",                /* HTTP/2's own status line is no HTTP/1.x one */
		"ICY 200 OK\r\n\r\n",                /* not HTTP */
		" HTTP/1.1 200 OK\r\n\r\n",          /* leading space */
		"\r\nHTTP/1.1 200 OK\r\n\r\n",       /* an empty line before the status line */
		"HTTP/1.1 200 O\x01K\r\n\r\n",       /* control char in the reason */
		"HTTP/1.1 200 OK\rX\r\n\r\n",        /* bare CR after the status line */
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n", /* a request */
	};
	ft_hp_resp_head_t h;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ft_hp_result_t rc = parse(bad[i], &h);

		if (rc != FT_HP_BAD)
			fail_msg("case %zu (%s): got %d, want BAD", i, bad[i], rc);
	}
	/* garbage is refused before any line end arrived */
	assert_int_equal(ft_hp_parse_resp_head("HTTX", 4, 8192, hdrs, MAXH, &h), FT_HP_BAD);
	assert_int_equal(ft_hp_parse_resp_head("<html>", 6, 8192, hdrs, MAXH, &h), FT_HP_BAD);
	/* another major version */
	assert_int_equal(parse("HTTP/2.0 200 OK\r\n\r\n", &h), FT_HP_VERSION);
	assert_int_equal(parse("HTTP/0.9 200 OK\r\n\r\n", &h), FT_HP_VERSION);
}

static void test_bad_headers(void **state)
{
	static const char *bad[] = {
		"HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n",  /* obs-fold */
		"HTTP/1.1 200 OK\r\nA: b\r\n\tc\r\n\r\n", /* obs-fold with a tab */
		"HTTP/1.1 200 OK\r\nA : b\r\n\r\n",       /* space before the colon */
		"HTTP/1.1 200 OK\r\n: b\r\n\r\n",         /* empty name */
		"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: b\x01\r\n\r\n", /* control char in a value */
		"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n",  /* bare CR in a value */
		"HTTP/1.1 200 OK\r\nA: b\r\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA\x80: b\r\n\r\n", /* non-token in a name */
	};
	ft_hp_resp_head_t h;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ft_hp_result_t rc = parse(bad[i], &h);

		if (rc != FT_HP_BAD)
			fail_msg("case %zu (%s): got %d, want BAD", i, bad[i], rc);
	}
	/* NUL inside a value */
	assert_int_equal(ft_hp_parse_resp_head("HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n", 27, 8192, hdrs, MAXH, &h),
			 FT_HP_BAD);
}

static void test_split_reads(void **state)
{
	const char *full =
		"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/10\r\nContent-Length: 4\r\n\r\nbody";
	size_t head = strlen(full) - 4, i;
	ft_hp_resp_head_t h, whole;

	(void)state;
	assert_int_equal(ft_hp_parse_resp_head(full, strlen(full), 8192, hdrs, MAXH, &whole), FT_HP_DONE);
	assert_int_equal(whole.head_len, head);
	/* every strict prefix of the head is incomplete, never an error */
	for (i = 0; i < head; i++)
		if (ft_hp_parse_resp_head(full, i, 8192, hdrs, MAXH, &h) != FT_HP_AGAIN)
			fail_msg("prefix of %zu bytes is not AGAIN", i);
	/* the head alone, or with any part of the body after it, parses the same */
	for (i = head; i <= strlen(full); i++) {
		assert_int_equal(ft_hp_parse_resp_head(full, i, 8192, hdrs, MAXH, &h), FT_HP_DONE);
		assert_int_equal(h.head_len, head);
		assert_int_equal(h.status, 206);
		assert_int_equal(h.content_length, 4);
	}
	/* the final empty line missing, or only half there */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nA: b\r\n", &h), FT_HP_AGAIN);
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nA: b\r\n\r", &h), FT_HP_AGAIN);
	assert_int_equal(parse("HTTP/1.1 200 OK", &h), FT_HP_AGAIN);
}

static void test_limits(void **state)
{
	char buf[4096];
	ft_hp_resp_head_t h;
	int i, n;

	(void)state;
	/* too many headers */
	n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\n");
	for (i = 0; i < MAXH + 1; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "H%d: v\r\n", i);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
	assert_int_equal(ft_hp_parse_resp_head(buf, (size_t)n, 8192, hdrs, MAXH, &h), FT_HP_TOO_LARGE);
	/* exactly MAXH is fine */
	n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\n");
	for (i = 0; i < MAXH; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "H%d: v\r\n", i);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
	assert_int_equal(ft_hp_parse_resp_head(buf, (size_t)n, 8192, hdrs, MAXH, &h), FT_HP_DONE);
	assert_int_equal(h.nheaders, MAXH);
	/* byte limit: a complete head longer than max, and an incomplete one already past it */
	assert_int_equal(ft_hp_parse_resp_head(buf, (size_t)n, (size_t)n - 1, hdrs, MAXH, &h), FT_HP_TOO_LARGE);
	assert_int_equal(ft_hp_parse_resp_head(buf, (size_t)n, (size_t)n, hdrs, MAXH, &h), FT_HP_DONE);
	memset(buf, 'a', sizeof(buf));
	memcpy(buf, "HTTP/1.1 200 ", 13);
	assert_int_equal(ft_hp_parse_resp_head(buf, 200, 100, hdrs, MAXH, &h), FT_HP_TOO_LARGE);
	assert_int_equal(ft_hp_parse_resp_head(buf, 100, 100, hdrs, MAXH, &h), FT_HP_AGAIN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_head),  cmocka_unit_test(test_status_lines),
		cmocka_unit_test(test_connection),  cmocka_unit_test(test_framing),
		cmocka_unit_test(test_bad_framing), cmocka_unit_test(test_bad_status_line),
		cmocka_unit_test(test_bad_headers), cmocka_unit_test(test_split_reads),
		cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
