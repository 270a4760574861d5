/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader object list: names listed at start plus objects PUT during the run, readable from any thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"

/*
 * DESIGN
 * Entries live in fixed-size segments that never move, so a reader holding an index below the
 * published count can read its entry without a lock. Writers (startup, then PUT completions) take
 * mu, fill the entry (allocating a segment when needed) and publish the new count with release
 * order; readers load it with acquire. Listed names are copied into owned strings; generated names
 * are kept as their number only and formatted on use.
 */
#define SEG_BITS 16
#define SEG_SIZE (1u << SEG_BITS)
#define MAX_SEGS 65536 /* 4 billion entries */

static ld_obj_t *segs[MAX_SEGS];
static atomic_uint_fast64_t n_objs;
static pthread_mutex_t objs_mu = PTHREAD_MUTEX_INITIALIZER;
static char loaderid[64] = "0";

void ld_objs_set_loaderid(const char *id)
{
	snprintf(loaderid, sizeof(loaderid), "%s", id);
}

/* Slot for the next entry (caller holds mu); NULL on allocation failure. */
static ld_obj_t *next_slot(uint64_t n)
{
	uint64_t s = n >> SEG_BITS;

	if (s >= MAX_SEGS)
		return NULL;
	if (segs[s] == NULL) {
		segs[s] = calloc(SEG_SIZE, sizeof(ld_obj_t));
		if (segs[s] == NULL)
			return NULL;
	}
	return &segs[s][n & (SEG_SIZE - 1)];
}

static int add(const ld_obj_t *o)
{
	uint64_t n;
	ld_obj_t *slot;
	int rc = -1;

	pthread_mutex_lock(&objs_mu);
	n = atomic_load_explicit(&n_objs, memory_order_relaxed);
	slot = next_slot(n);
	if (slot != NULL) {
		*slot = *o;
		atomic_store_explicit(&n_objs, n + 1, memory_order_release);
		rc = 0;
	}
	pthread_mutex_unlock(&objs_mu);
	return rc;
}

int ld_objs_add_named(const char *name, size_t len, uint64_t size, int host)
{
	ld_obj_t o = {.size = size, .host = host};
	char *copy = malloc(len + 1);

	if (copy == NULL)
		return -1;
	memcpy(copy, name, len);
	copy[len] = '\0';
	o.name = copy;
	if (add(&o) != 0) {
		free(copy);
		return -1;
	}
	return 0;
}

int ld_objs_add_put(uint64_t seq, uint64_t size, uint64_t hash, bool has_hash)
{
	ld_obj_t o = {.seq = seq, .size = size, .hash = hash, .has_hash = has_hash, .host = -1};

	return add(&o);
}

uint64_t ld_objs_count(void)
{
	return atomic_load_explicit(&n_objs, memory_order_acquire);
}

const ld_obj_t *ld_objs_at(uint64_t i)
{
	return &segs[i >> SEG_BITS][i & (SEG_SIZE - 1)];
}

void ld_objs_free(void)
{
	uint64_t n = ld_objs_count();

	for (uint64_t i = 0; i < n; i++)
		free((char *)ld_objs_at(i)->name);
	for (size_t s = 0; s < MAX_SEGS && segs[s] != NULL; s++) {
		free(segs[s]);
		segs[s] = NULL;
	}
	atomic_store(&n_objs, 0);
}

size_t ld_seq_name(uint64_t seq, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s-%llu", loaderid, (unsigned long long)seq);

	return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

size_t ld_obj_name(const ld_obj_t *o, char *buf, size_t cap)
{
	size_t n;

	if (o->name == NULL)
		return ld_seq_name(o->seq, buf, cap);
	n = strlen(o->name);
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, o->name, n);
	buf[n] = '\0';
	return n;
}
