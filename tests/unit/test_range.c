/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for httputil: Range parsing at every edge, JSON responses, /v1 path split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/util.h"

/*
 * httputil.c calls into the io_uring server only through ft_req_alloc() and ft_resp_bytes().
 * This file defines both over a fake request, so the linker never needs the server: the helpers are
 * tested alone, and what they hand to the server is checked.
 */
struct ft_req {
	void *allocs[16];
	int n_allocs;
	int status;
	char content_type[64];
	char *body;
	size_t body_len;
	int responses;
};

void *ft_req_alloc(ft_req_t *r, size_t size)
{
	void *p = calloc(1, size);

	assert_non_null(p);
	assert_true(r->n_allocs < 16);
	r->allocs[r->n_allocs++] = p;
	return p;
}

void ft_resp_bytes(ft_req_t *r, int status, const char *content_type, const void *body, size_t len)
{
	r->responses++;
	r->status = status;
	snprintf(r->content_type, sizeof(r->content_type), "%s", content_type != NULL ? content_type : "");
	free(r->body);
	r->body = malloc(len + 1);
	assert_non_null(r->body);
	memcpy(r->body, body, len);
	r->body[len] = '\0';
	r->body_len = len;
}

static void req_release(ft_req_t *r)
{
	for (int i = 0; i < r->n_allocs; i++)
		free(r->allocs[i]);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* ---- ranges ---- */

static void expect_ok(const char *hdr, uint64_t size, uint64_t off, uint64_t len)
{
	uint64_t o = 12345, l = 12345;
	ft_range_result_t rc = ft_range_parse(hdr, size, &o, &l);

	if (rc != FT_RANGE_OK || o != off || l != len)
		fail_msg("\"%s\" size %llu: got %d off %llu len %llu, want OK off %llu len %llu", hdr,
			 (unsigned long long)size, rc, (unsigned long long)o, (unsigned long long)l,
			 (unsigned long long)off, (unsigned long long)len);
}

static void expect(const char *hdr, uint64_t size, ft_range_result_t want)
{
	uint64_t o = 0, l = 0;
	ft_range_result_t rc = ft_range_parse(hdr, size, &o, &l);

	if (rc != want)
		fail_msg("\"%s\" size %llu: got %d, want %d", hdr, (unsigned long long)size, rc, want);
}

static void test_range_first_last(void **state)
{
	(void)state;
	expect(NULL, 10, FT_RANGE_NONE);
	expect(NULL, 0, FT_RANGE_NONE);
	expect_ok("bytes=0-0", 10, 0, 1);
	expect_ok("bytes=0-9", 10, 0, 10);
	expect_ok("bytes=3-5", 10, 3, 3);
	expect_ok("bytes=9-9", 10, 9, 1);
	/* last past the end is clamped, however large */
	expect_ok("bytes=0-10", 10, 0, 10);
	expect_ok("bytes=5-1000", 10, 5, 5);
	expect_ok("bytes=0-18446744073709551615", 10, 0, 10);
	expect_ok("bytes=0-999999999999999999999999999", 10, 0, 10);
	/* first at or past the end */
	expect("bytes=10-10", 10, FT_RANGE_UNSAT);
	expect("bytes=10-20", 10, FT_RANGE_UNSAT);
	expect("bytes=11-", 10, FT_RANGE_UNSAT);
	expect("bytes=999999999999999999999999999-", 10, FT_RANGE_UNSAT);
	/* a one-byte object */
	expect_ok("bytes=0-0", 1, 0, 1);
	expect_ok("bytes=0-", 1, 0, 1);
	expect("bytes=1-1", 1, FT_RANGE_UNSAT);
	/* large sizes */
	expect_ok("bytes=0-", UINT64_MAX, 0, UINT64_MAX);
	expect_ok("bytes=4294967296-4294967297", 8589934592ULL, 4294967296ULL, 2);
}

static void test_range_open(void **state)
{
	(void)state;
	expect_ok("bytes=0-", 10, 0, 10);
	expect_ok("bytes=4-", 10, 4, 6);
	expect_ok("bytes=9-", 10, 9, 1);
	expect("bytes=10-", 10, FT_RANGE_UNSAT);
}

static void test_range_suffix(void **state)
{
	(void)state;
	expect_ok("bytes=-1", 10, 9, 1);
	expect_ok("bytes=-3", 10, 7, 3);
	expect_ok("bytes=-10", 10, 0, 10);
	/* more than the object: the whole object */
	expect_ok("bytes=-11", 10, 0, 10);
	expect_ok("bytes=-18446744073709551615", 10, 0, 10);
	expect_ok("bytes=-999999999999999999999999999", 10, 0, 10);
	expect_ok("bytes=-5", 1, 0, 1);
	/* zero-length suffix */
	expect("bytes=-0", 10, FT_RANGE_UNSAT);
	expect("bytes=-00", 10, FT_RANGE_UNSAT);
}

static void test_range_empty_object(void **state)
{
	(void)state;
	expect("bytes=0-0", 0, FT_RANGE_UNSAT);
	expect("bytes=0-", 0, FT_RANGE_UNSAT);
	expect("bytes=0-100", 0, FT_RANGE_UNSAT);
	expect("bytes=-1", 0, FT_RANGE_UNSAT);
	expect("bytes=-0", 0, FT_RANGE_UNSAT);
	/* malformed stays malformed */
	expect("bytes=x", 0, FT_RANGE_BAD);
	expect("bytes=1-0", 0, FT_RANGE_BAD);
}

static void test_range_whitespace_and_case(void **state)
{
	(void)state;
	expect_ok("bytes= 2-3", 10, 2, 2);
	expect_ok("bytes=\t2-3", 10, 2, 2);
	expect_ok("bytes=2-3 ", 10, 2, 2);
	expect_ok("bytes=  -4  ", 10, 6, 4);
	expect_ok(" bytes=2-", 10, 2, 8);
	expect_ok("Bytes=2-3", 10, 2, 2);
	expect_ok("BYTES=2-3", 10, 2, 2);
	expect_ok("bytes=002-003", 10, 2, 2);
	/* RFC 9110 5.6.1: empty list elements are ignored */
	expect_ok("bytes=2-3,", 10, 2, 2);
	expect_ok("bytes=, 2-3", 10, 2, 2);
	/* inside a range-spec no whitespace */
	expect("bytes=2 -3", 10, FT_RANGE_BAD);
	expect("bytes=2- 3", 10, FT_RANGE_BAD);
	expect("bytes=- 3", 10, FT_RANGE_BAD);
	expect("bytes =2-3", 10, FT_RANGE_BAD);
}

static void test_range_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		" ",
		"bytes",
		"bytes=",
		"bytes= ",
		"bytes=,",
		"bytes=-",
		"bytes=--1",
		"bytes=a-b",
		"bytes=1-a",
		"bytes=a-1",
		"bytes=3-2",
		"bytes=1-2-3",
		"bytes=+1-2",
		"bytes=1-+2",
		"bytes=0x1-2",
		"bytes=1",
		"bytes=1.5-2",
		"=0-1",
		"bytes=-1-2",
		"bytes=1-2;",
		"bytes 0-1",
		"0-1",
		"bytes=\0010-1",
		"bytes=1-2 x",
		"by tes=0-1",
		/* multiple ranges are not supported */
		"bytes=0-1,2-3",
		"bytes=0-1, 5-6",
		"bytes=-1,0-0",
		"bytes=0-,0-",
		"bytes=1-2,,3-4",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect(bad[i], 10, FT_RANGE_BAD);
}

/* RFC 9110 14.2: a range unit the server does not know is ignored (whole object). */
static void test_range_other_unit(void **state)
{
	(void)state;
	expect("items=0-1", 10, FT_RANGE_NONE);
	expect("none=", 10, FT_RANGE_NONE);
}

/* ---- JSON responses ---- */

static void test_resp_json(void **state)
{
	ft_req_t r;

	(void)state;
	memset(&r, 0, sizeof(r));
	ft_resp_json(&r, 201, json_pack("{s:s, s:i}", "status", "ok", "n", 3));
	assert_int_equal(r.responses, 1);
	assert_int_equal(r.status, 201);
	assert_string_equal(r.content_type, "application/json");
	json_t *j = json_loads(r.body, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "status")), "ok");
	assert_int_equal(json_integer_value(json_object_get(j, "n")), 3);
	assert_int_equal(strlen(r.body), r.body_len);
	json_decref(j);
	req_release(&r);

	ft_resp_json(&r, 200, json_array());
	assert_string_equal(r.body, "[]");
	req_release(&r);

	/* A body that failed to build upstream still gets exactly one (error) response. */
	ft_resp_json(&r, 200, NULL);
	assert_int_equal(r.responses, 1);
	assert_int_equal(r.status, 500);
	assert_string_equal(r.content_type, "application/json");
	req_release(&r);
}

/* ---- /v1 paths ---- */

static void split_ok(const char *path, size_t len, const char *prefix, const char *bucket, const char *obj,
		     size_t obj_len)
{
	ft_req_t r;
	char *b = NULL;
	const char *o = NULL;
	size_t ol = 99;

	memset(&r, 0, sizeof(r));
	if (ft_path_split(&r, path, len, prefix, &b, &o, &ol) != 0)
		fail_msg("split \"%s\" under \"%s\" failed", path, prefix);
	assert_string_equal(b, bucket);
	assert_int_equal(ol, obj_len);
	if (obj_len > 0)
		assert_memory_equal(o, obj, obj_len);
	req_release(&r);
}

static void split_fails(const char *path, size_t len, const char *prefix)
{
	ft_req_t r;
	char *b = NULL;
	const char *o = NULL;
	size_t ol = 0;

	memset(&r, 0, sizeof(r));
	assert_int_equal(ft_path_split(&r, path, len, prefix, &b, &o, &ol), -1);
	req_release(&r);
}

#define S(lit) lit, sizeof(lit) - 1

static void test_path_split(void **state)
{
	(void)state;
	split_ok(S("/v1/objects/b/o"), "/v1/objects", "b", "o", 1);
	split_ok(S("/v1/objects/b/dir/sub/o.txt"), "/v1/objects", "b", "dir/sub/o.txt", 13);
	split_ok(S("/v1/objects/b"), "/v1/objects", "b", "", 0);
	split_ok(S("/v1/objects/b/"), "/v1/objects", "b", "", 0);
	split_ok(S("/v1/objects"), "/v1/objects", "", "", 0);
	split_ok(S("/v1/objects/"), "/v1/objects", "", "", 0);
	split_ok(S("/v1/buckets/b"), "/v1/buckets", "b", "", 0);
	split_ok(S("/v1/objects/b/o"), "/v1/objects/", "b", "o", 1);
	/* the object keeps every byte, '/' runs and NULs included: validation is the caller's */
	split_ok(S("/v1/objects/b/a\0b"), "/v1/objects", "b", "a\0b", 3);
	split_ok(S("/v1/objects/b//x/"), "/v1/objects", "b", "/x/", 3);
	/* only the given length counts */
	split_ok("/v1/objects/b/o/trailing", 15, "/v1/objects", "b", "o", 1);

	split_fails(S("/v1/objectsX/b/o"), "/v1/objects");
	split_fails(S("/v1/object"), "/v1/objects");
	split_fails(S("/v1/buckets/b"), "/v1/objects");
	split_fails(S(""), "/v1/objects");
	split_fails(S("/v1/objects/b\0c/o"), "/v1/objects");
}

static void test_clocks(void **state)
{
	(void)state;
	int64_t ns = ft_now_ns();
	assert_true(ns > 1600000000LL * 1000000000LL); /* after 2020 */
	int64_t a = ft_mono_ms();
	int64_t b = ft_mono_ms();
	assert_true(a >= 0 && b >= a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range_first_last),
		cmocka_unit_test(test_range_open),
		cmocka_unit_test(test_range_suffix),
		cmocka_unit_test(test_range_empty_object),
		cmocka_unit_test(test_range_whitespace_and_case),
		cmocka_unit_test(test_range_malformed),
		cmocka_unit_test(test_range_other_unit),
		cmocka_unit_test(test_resp_json),
		cmocka_unit_test(test_path_split),

		cmocka_unit_test(test_clocks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
