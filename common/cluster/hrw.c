/* SPDX-License-Identifier: Apache-2.0 */
/* Highest-random-weight placement: xxhash64 digests and names, scored through a 64-bit mixer. */
#include "cluster/hrw.h"

#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH64_state_t on the stack: no allocation per name */
#include <xxhash.h>

/*
 * DESIGN
 * score(name, node) = mix64(name_hash ^ digest(node)); the node with the highest score wins.
 * XOR of two xxhash64 values alone is not enough: nodes whose digests share high bits would
 * win together. The splitmix64 finalizer spreads every input bit over the whole word, so the
 * scores of one name against different nodes behave as independent uniform draws. That gives
 * an even spread, and adding a node moves only the names the new node now wins (about 1/(N+1)).
 */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t ft_hrw_digest(const char *id)
{
	return XXH64(id, strlen(id), 0);
}

/* Hashes the bytes "provider/bucket/obj"; obj may hold NUL bytes, so its length is explicit. */
uint64_t ft_hrw_name_hash(const char *provider, const char *bucket, const char *obj, size_t obj_len)
{
	XXH64_state_t st;

	XXH64_reset(&st, 0);
	XXH64_update(&st, provider, strlen(provider));
	XXH64_update(&st, "/", 1);
	XXH64_update(&st, bucket, strlen(bucket));
	XXH64_update(&st, "/", 1);
	if (obj_len > 0)
		XXH64_update(&st, obj, obj_len);
	return XXH64_digest(&st);
}

uint64_t ft_hrw_score(uint64_t name_hash, uint64_t digest)
{
	return mix64(name_hash ^ digest);
}

/* Ties (practically impossible) go to the lowest index, so every node agrees. */
int ft_hrw_pick(uint64_t name_hash, const uint64_t *digests, int n)
{
	int best = -1;
	uint64_t best_score = 0;

	for (int i = 0; i < n; i++) {
		uint64_t s = ft_hrw_score(name_hash, digests[i]);
		if (best < 0 || s > best_score) {
			best = i;
			best_score = s;
		}
	}
	return best;
}
