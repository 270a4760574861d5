/* SPDX-License-Identifier: Apache-2.0 */
/* Fixed-memory latency histogram: log-linear buckets, exact min/max/count/sum, percentile queries. */
#include "hist.h"

#include <string.h>

void ft_hist_reset(ft_hist_t *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned ft_hist_index(uint64_t v)
{
	unsigned e, shift;

	if (v < FT_HIST_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	if (e >= FT_HIST_TOP_BITS)
		return FT_HIST_BUCKETS - 1;
	shift = e - FT_HIST_SUB_BITS;
	/* (v >> shift) is in [SUB, 2*SUB): the linear position inside the power of two */
	return FT_HIST_SUB + shift * FT_HIST_SUB + (unsigned)((v >> shift) - FT_HIST_SUB);
}

void ft_hist_bucket_range(unsigned index, uint64_t *lo, uint64_t *hi)
{
	unsigned shift, sub;

	if (index < FT_HIST_SUB) {
		*lo = *hi = index;
		return;
	}
	shift = (index - FT_HIST_SUB) / FT_HIST_SUB;
	sub = (index - FT_HIST_SUB) % FT_HIST_SUB;
	*lo = (uint64_t)(FT_HIST_SUB + sub) << shift;
	*hi = *lo + ((uint64_t)1 << shift) - 1;
}

void ft_hist_record(ft_hist_t *h, uint64_t v)
{
	h->buckets[ft_hist_index(v)]++;
	h->count++;
	h->sum += (double)v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void ft_hist_merge(ft_hist_t *dst, const ft_hist_t *src)
{
	if (src->count == 0)
		return;
	for (unsigned i = 0; i < FT_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t ft_hist_percentile(const ft_hist_t *h, double p)
{
	uint64_t rank, seen = 0, lo, hi, mid;
	double want;

	if (h->count == 0)
		return 0;
	if (p <= 0)
		return h->min;
	if (p >= 100)
		return h->max;
	/* ceil without libm: the daemons' link line has no -lm */
	want = p / 100.0 * (double)h->count;
	rank = (uint64_t)want;
	if ((double)rank < want)
		rank++;
	if (rank == 0)
		rank = 1;
	for (unsigned i = 0; i < FT_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen < rank)
			continue;
		if (i == FT_HIST_BUCKETS - 1)
			return h->max; /* the overflow bucket has no useful midpoint */
		ft_hist_bucket_range(i, &lo, &hi);
		mid = lo + (hi - lo) / 2;
		if (mid < h->min)
			mid = h->min;
		if (mid > h->max)
			mid = h->max;
		return mid;
	}
	return h->max;
}

double ft_hist_mean(const ft_hist_t *h)
{
	return h->count != 0 ? h->sum / (double)h->count : 0.0;
}
