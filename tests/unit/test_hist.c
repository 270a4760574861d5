/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the latency histogram: bucket layout, precision, percentiles, merge, limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hist.h"

static ft_hist_t *new_hist(void)
{
	ft_hist_t *h = malloc(sizeof(*h));

	assert_non_null(h);
	ft_hist_reset(h);
	return h;
}

/* Every value maps to a bucket whose range holds it; buckets are contiguous and ordered. */
static void test_bucket_layout(void **state)
{
	uint64_t lo, hi, prev_hi = 0;

	(void)state;
	for (unsigned i = 0; i < FT_HIST_BUCKETS; i++) {
		ft_hist_bucket_range(i, &lo, &hi);
		assert_true(lo <= hi);
		if (i > 0)
			assert_int_equal(lo, prev_hi + 1);
		prev_hi = hi;
		assert_int_equal(ft_hist_index(lo), i);
		assert_int_equal(ft_hist_index(hi), i);
		/* width <= 1/128 of the bucket's lowest value above the exact range */
		if (lo >= FT_HIST_SUB)
			assert_true((hi - lo + 1) * 128 <= lo);
	}
	/* one hour in ns is inside the range; beyond the top everything lands in the last bucket */
	assert_true(ft_hist_index(3600ull * 1000000000ull) < FT_HIST_BUCKETS - 1);
	assert_int_equal(ft_hist_index(UINT64_MAX), FT_HIST_BUCKETS - 1);
	for (uint64_t v = 0; v < FT_HIST_SUB; v++)
		assert_int_equal(ft_hist_index(v), v);
}

/* Uniform 1..100000: percentiles within 1% of the exact order statistics. */
static void test_percentiles_uniform(void **state)
{
	ft_hist_t *h = new_hist();
	const double ps[] = {1, 10, 50, 90, 99, 99.9};

	(void)state;
	for (uint64_t v = 1; v <= 100000; v++)
		ft_hist_record(h, v);
	assert_int_equal(h->count, 100000);
	assert_int_equal(h->min, 1);
	assert_int_equal(h->max, 100000);
	assert_true(ft_hist_mean(h) > 50000.4 && ft_hist_mean(h) < 50000.6);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		double exact = ps[i] * 1000.0; /* rank p% of 100000 is value p*1000 */
		double got = (double)ft_hist_percentile(h, ps[i]);
		assert_true(got >= exact * 0.99 && got <= exact * 1.01);
	}
	assert_int_equal(ft_hist_percentile(h, 0), 1);
	assert_int_equal(ft_hist_percentile(h, 100), 100000);
	free(h);
}

/* A few spread values (1 us .. 1 h in ns): each percentile names the right one within 1%. */
static void test_percentiles_wide_range(void **state)
{
	ft_hist_t *h = new_hist();
	const uint64_t vals[] = {1000, 250000, 1000000, 3600ull * 1000000000ull};

	(void)state;
	/* 90% at 1 us, 9% at 250 us, 0.9% at 1 ms, 0.1% at 1 h */
	for (int i = 0; i < 9000; i++)
		ft_hist_record(h, vals[0]);
	for (int i = 0; i < 900; i++)
		ft_hist_record(h, vals[1]);
	for (int i = 0; i < 90; i++)
		ft_hist_record(h, vals[2]);
	for (int i = 0; i < 10; i++)
		ft_hist_record(h, vals[3]);
	assert_int_equal(h->count, 10000);
	uint64_t p50 = ft_hist_percentile(h, 50);
	assert_true(p50 >= 1000 && p50 <= 1010);
	uint64_t p95 = ft_hist_percentile(h, 95);
	assert_true(p95 >= 247500 && p95 <= 252500);
	uint64_t p995 = ft_hist_percentile(h, 99.5);
	assert_true(p995 >= 990000 && p995 <= 1010000);
	uint64_t p9995 = ft_hist_percentile(h, 99.95);
	assert_true(p9995 >= vals[3] / 100 * 99 && p9995 <= vals[3]); /* at most the exact max */
	assert_int_equal(h->max, vals[3]);
	free(h);
}

/* Percentile rank: p50 of {10, 20} is 10 (the first value reaching half the count). */
static void test_rank_rounding(void **state)
{
	ft_hist_t *h = new_hist();

	(void)state;
	assert_int_equal(ft_hist_percentile(h, 50), 0); /* empty */
	assert_true(ft_hist_mean(h) == 0.0);
	ft_hist_record(h, 10);
	ft_hist_record(h, 20);
	assert_int_equal(ft_hist_percentile(h, 50), 10);
	assert_int_equal(ft_hist_percentile(h, 50.1), 20);
	assert_int_equal(ft_hist_percentile(h, 99.9), 20);
	free(h);
}

/* Merging two halves equals recording everything into one. */
static void test_merge(void **state)
{
	ft_hist_t *a = new_hist(), *b = new_hist(), *all = new_hist();

	(void)state;
	for (uint64_t v = 0; v < 50000; v++) {
		uint64_t x = (v * 2654435761u) % 10000000u;
		ft_hist_record(v % 2 ? a : b, x);
		ft_hist_record(all, x);
	}
	ft_hist_merge(a, b);
	assert_int_equal(a->count, all->count);
	assert_int_equal(a->min, all->min);
	assert_int_equal(a->max, all->max);
	assert_true(a->sum == all->sum);
	assert_memory_equal(a->buckets, all->buckets, sizeof(a->buckets));
	/* merging an empty histogram changes nothing, not even min */
	ft_hist_reset(b);
	ft_hist_merge(a, b);
	assert_int_equal(a->min, all->min);
	assert_int_equal(a->count, all->count);
	free(a);
	free(b);
	free(all);
}

/* Huge values are counted (in the top bucket) and max stays exact. */
static void test_overflow_clamped(void **state)
{
	ft_hist_t *h = new_hist();

	(void)state;
	ft_hist_record(h, UINT64_MAX);
	ft_hist_record(h, 5);
	assert_int_equal(h->count, 2);
	assert_int_equal(h->buckets[FT_HIST_BUCKETS - 1], 1);
	assert_int_equal(ft_hist_percentile(h, 100), UINT64_MAX);
	assert_int_equal(ft_hist_percentile(h, 99), UINT64_MAX); /* clamped to max, not past it */
	assert_int_equal(ft_hist_percentile(h, 50), 5);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_layout),
		cmocka_unit_test(test_percentiles_uniform),
		cmocka_unit_test(test_percentiles_wide_range),
		cmocka_unit_test(test_rank_rounding),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_overflow_clamped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
