/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for HRW placement: spread over 4 targets, movement when a 5th joins, determinism. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <xxhash.h>

#include "cluster/hrw.h"

#define N_NAMES 100000

/* Owner index of "ais/bkt/obj-<i>" among the first n of ids t1..t5. */
static int owner_of(int i, const uint64_t *digests, int n)
{
	char obj[32];
	int len = snprintf(obj, sizeof(obj), "obj-%d", i);

	return ft_hrw_pick(ft_hrw_name_hash("ais", "bkt", obj, (size_t)len), digests, n);
}

static void make_digests(uint64_t *d, int n)
{
	char id[8];

	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "t%d", i + 1);
		d[i] = ft_hrw_digest(id);
	}
}

/* The brief's placement target: with 4 targets and 100k names the busiest holds <= 1.05x the mean. */
static void test_spread_four_targets(void **state)
{
	uint64_t d[4];
	int count[4] = {0};
	int busiest = 0;

	(void)state;
	make_digests(d, 4);
	for (int i = 0; i < N_NAMES; i++) {
		int o = owner_of(i, d, 4);
		assert_in_range(o, 0, 3);
		count[o]++;
	}
	for (int t = 0; t < 4; t++) {
		print_message("t%d: %d\n", t + 1, count[t]);
		if (count[t] > busiest)
			busiest = count[t];
	}
	/* busiest / (N/4) <= 1.05  <=>  busiest * 4 * 100 <= N * 105 */
	assert_true((int64_t)busiest * 4 * 100 <= (int64_t)N_NAMES * 105);
}

/* Adding a 5th target moves 15%..25% of names, and every moved name goes to the new target. */
static void test_add_fifth_target(void **state)
{
	uint64_t d[5];
	int moved = 0;

	(void)state;
	make_digests(d, 5);
	for (int i = 0; i < N_NAMES; i++) {
		int before = owner_of(i, d, 4);
		int after = owner_of(i, d, 5);
		if (before != after) {
			assert_int_equal(after, 4); /* only ever to the new one */
			moved++;
		}
	}
	print_message("moved: %d of %d\n", moved, N_NAMES);
	assert_true(moved * 100 >= N_NAMES * 15);
	assert_true(moved * 100 <= N_NAMES * 25);
}

/* The pick does not depend on the order candidates are listed in, only on their ids. */
static void test_order_independent(void **state)
{
	uint64_t d[4], r[4];

	(void)state;
	make_digests(d, 4);
	for (int i = 0; i < 4; i++)
		r[i] = d[3 - i];
	for (int i = 0; i < 1000; i++) {
		int a = owner_of(i, d, 4);
		int b = owner_of(i, r, 4);
		assert_int_equal(d[a], r[b]);
	}
}

static void test_edges(void **state)
{
	uint64_t d[1];

	(void)state;
	assert_int_equal(ft_hrw_pick(123, NULL, 0), -1);
	d[0] = ft_hrw_digest("only");
	assert_int_equal(ft_hrw_pick(123, d, 1), 0);
	/* The digest is xxhash64 seed 0 of the id (reference value of XXH64("", 0)). */
	assert_true(ft_hrw_digest("") == 0xEF46DB3751D8E999ULL);
	assert_true(ft_hrw_digest("t1") == ft_hrw_digest("t1"));
	assert_true(ft_hrw_digest("t1") != ft_hrw_digest("t2"));
}

/* The name hash covers every byte, including NULs inside the object name, and the separators. */
static void test_name_hash(void **state)
{
	(void)state;
	uint64_t a = ft_hrw_name_hash("ais", "bkt", "a\0b", 3);
	uint64_t b = ft_hrw_name_hash("ais", "bkt", "a\0c", 3);
	uint64_t c = ft_hrw_name_hash("ais", "bkt", "a", 1);
	assert_true(a != b);
	assert_true(a != c);
	/* The hashed bytes are exactly "provider/bucket/object" (a bucket name never holds '/'). */
	assert_true(ft_hrw_name_hash("ais", "bkt", "dir/x", 5) == XXH64("ais/bkt/dir/x", 13, 0));
	assert_true(ft_hrw_name_hash("ais", "bkt", "a\0b", 3) == XXH64("ais/bkt/a\0b", 11, 0));
	assert_true(ft_hrw_name_hash("ais", "bkt", "x", 1) != ft_hrw_name_hash("ais", "bkt2", "x", 1));
	assert_true(ft_hrw_name_hash("ais", "bkt", "x", 1) != ft_hrw_name_hash("aws", "bkt", "x", 1));
	assert_true(ft_hrw_name_hash("ais", "bkt", "", 0) == ft_hrw_name_hash("ais", "bkt", NULL, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spread_four_targets), cmocka_unit_test(test_add_fifth_target),
		cmocka_unit_test(test_order_independent),   cmocka_unit_test(test_edges),
		cmocka_unit_test(test_name_hash),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
