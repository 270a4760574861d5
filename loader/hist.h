/* SPDX-License-Identifier: Apache-2.0 */
/* Fixed-memory latency histogram (HDR-style log-linear buckets): record, merge, percentiles. */
#ifndef FT_HIST_H
#define FT_HIST_H

#include <stdint.h>

/*
 * Values are non-negative integers in any unit (the loader records nanoseconds). Values below
 * FT_HIST_SUB (128) have a bucket each (exact); above, every power of two [2^e, 2^(e+1)) is split
 * into 128 equal buckets, so a bucket is at most 1/128 (0.78%) of its values wide and a reported
 * percentile (the bucket's midpoint) is within 0.4% of a recorded value. The top bucket
 * ends at 2^FT_HIST_TOP_BITS (2^42 ns = 73 minutes); larger values are counted in it (max stays
 * exact). min, max, count and sum are exact.
 *
 * A histogram is a plain struct (about 36 KiB) with no pointers: embed it, memset-free it with
 * ft_hist_reset, copy it with memcpy. Not thread-safe: one writer at a time.
 */
#define FT_HIST_SUB_BITS 7
#define FT_HIST_SUB (1u << FT_HIST_SUB_BITS)
#define FT_HIST_TOP_BITS 42
#define FT_HIST_BUCKETS (FT_HIST_SUB + (FT_HIST_TOP_BITS - FT_HIST_SUB_BITS) * FT_HIST_SUB)

typedef struct {
	uint64_t count;
	uint64_t min; /* UINT64_MAX while empty */
	uint64_t max;
	double sum; /* for the mean; a double so it cannot overflow */
	uint64_t buckets[FT_HIST_BUCKETS];
} ft_hist_t;

/* Empties h. */
void ft_hist_reset(ft_hist_t *h);
/* Adds one value. */
void ft_hist_record(ft_hist_t *h, uint64_t v);
/* Adds every value of src to dst. */
void ft_hist_merge(ft_hist_t *dst, const ft_hist_t *src);
/*
 * The value at percentile p (0..100): the smallest bucket whose cumulative count reaches
 * ceil(p/100 * count), reported as the bucket's midpoint clamped to [min, max]. p <= 0 gives min,
 * p >= 100 gives max; 0 for an empty histogram.
 */
uint64_t ft_hist_percentile(const ft_hist_t *h, double p);
/* The mean (0 when empty). */
double ft_hist_mean(const ft_hist_t *h);

/* Bucket index of v and the [lo, hi] value range of a bucket (exposed for tests). */
unsigned ft_hist_index(uint64_t v);
void ft_hist_bucket_range(unsigned index, uint64_t *lo, uint64_t *hi);

#endif
