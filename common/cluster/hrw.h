/* SPDX-License-Identifier: Apache-2.0 */
/* Highest-random-weight (rendezvous) placement over xxhash64. */
#ifndef FT_HRW_H
#define FT_HRW_H

#include <stddef.h>
#include <stdint.h>

/* Digest of a node or mountpath id, computed once when the map is built. */
uint64_t ft_hrw_digest(const char *id);
/* Hash of an object's unique name "provider/bucket/object" (object may hold any bytes). */
uint64_t ft_hrw_name_hash(const char *provider, const char *bucket, const char *obj, size_t obj_len);
/* Score of a candidate for name_hash: the highest wins (ft_hrw_pick; ties to the lowest index). */
uint64_t ft_hrw_score(uint64_t name_hash, uint64_t digest);
/* Index in digests[0..n) of the highest-scoring candidate for name_hash; -1 when n == 0. */
int ft_hrw_pick(uint64_t name_hash, const uint64_t *digests, int n);

#endif
