/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the epoch order hints: the order store, the cursor (reordered and skipped reads), expiry, victim order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/hrw.h"
#include "xact/hint.h"

#define NOW 1000000 /* a monotonic ms at which the tests install */

typedef struct {
	tgt_t t;
	char **names;
	size_t n;
} fixture_t;

static int setup(void **state)
{
	fixture_t *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	f->t.cfg.hint_max_bytes = 1 << 20;
	if (tgt_hint_store_init(&f->t) != 0)
		return -1;
	*state = f;
	return 0;
}

static void names_free(fixture_t *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->names[i]);
	free(f->names);
	f->names = NULL;
	f->n = 0;
}

static int teardown(void **state)
{
	fixture_t *f = *state;

	tgt_hint_store_free(&f->t);
	names_free(f);
	free(f);
	return 0;
}

/* f->names = "<prefix>0" .. "<prefix>{n-1}". */
static void make_names(fixture_t *f, const char *prefix, size_t n)
{
	names_free(f);
	f->names = calloc(n, sizeof(*f->names));
	for (size_t i = 0; i < n; i++) {
		char buf[64];
		snprintf(buf, sizeof(buf), "%s%zu", prefix, i);
		f->names[i] = strdup(buf);
	}
	f->n = n;
}

static int install(fixture_t *f, const char *provider, const char *bucket, const char *job, int64_t epoch,
		   int64_t ttl_s, int64_t now)
{
	tgt_hint_spec_t s = {.provider = provider,
			     .bucket = bucket,
			     .job = job,
			     .epoch = epoch,
			     .ttl_s = ttl_s,
			     .names = (const char *const *)f->names,
			     .n = f->n};
	char why[300];
	size_t dups;

	return tgt_hint_install_at(&f->t, &s, now, &dups, why, sizeof(why));
}

static uint64_t hash_of(const char *provider, const char *bucket, const char *name)
{
	return ft_hrw_name_hash(provider, bucket, name, strlen(name));
}

static void read_name(fixture_t *f, const char *bucket, const char *name, int64_t now)
{
	tgt_hint_note_at(&f->t, "ht", bucket, hash_of("ht", bucket, name), false, now);
}

static int64_t next_use(fixture_t *f, const char *bucket, const char *name, int64_t now)
{
	return tgt_hint_next_use_at(&f->t, "ht", bucket, hash_of("ht", bucket, name), now);
}

/* The "cursor" of the only hint. */
static int64_t cursor_of(fixture_t *f, int64_t now, const char *key)
{
	json_t *doc = tgt_hint_json_at(&f->t, now);
	json_t *h = json_array_get(json_object_get(doc, "hints"), 0);
	int64_t v = h ? json_integer_value(json_object_get(h, key)) : -1;

	json_decref(doc);
	return v;
}

/* ---- the order store ---- */

static void test_store_order(void **state)
{
	fixture_t *f = *state;

	make_names(f, "s-", 100);
	assert_int_equal(install(f, "ht", "b", "train", 1, 60, NOW), 0);
	for (int i = 0; i < 100; i++) {
		char name[16];
		snprintf(name, sizeof(name), "s-%d", i);
		assert_int_equal(next_use(f, "b", name, NOW), i);
	}
	assert_int_equal(next_use(f, "b", "not-listed", NOW), -1);
	assert_int_equal(next_use(f, "other", "s-3", NOW), -1); /* another bucket */
	assert_true(tgt_hint_active_at(&f->t, "ht", "b", NOW));
	assert_false(tgt_hint_active_at(&f->t, "ht", "other", NOW));
}

static void test_store_duplicates(void **state)
{
	fixture_t *f = *state;
	size_t dups = 0;
	char why[300];
	const char *names[] = {"a", "b", "a", "c"};
	tgt_hint_spec_t s = {
		.provider = "ht", .bucket = "b", .job = "j", .epoch = 0, .ttl_s = 10, .names = names, .n = 4};

	assert_int_equal(tgt_hint_install_at(&f->t, &s, NOW, &dups, why, sizeof(why)), 0);
	assert_int_equal(dups, 1);
	assert_int_equal(next_use(f, "b", "a", NOW), 0);
	assert_int_equal(next_use(f, "b", "c", NOW), 2);
}

static void test_store_bad_input(void **state)
{
	fixture_t *f = *state;

	make_names(f, "x", 3);
	assert_int_equal(install(f, "ht", "b", "bad job!", 1, 10, NOW), 400);
	assert_int_equal(install(f, "ht", "b", "j", -1, 10, NOW), 400);
	assert_int_equal(install(f, "ht", "b", "j", 1, 0, NOW), 400);
	assert_int_equal(install(f, "ht", "b", "j", 1, TGT_HINT_TTL_MAX + 1, NOW), 400);
	free(f->names[1]);
	f->names[1] = strdup("bad\xff"
			     "utf-8"); /* "../escape" is a name like any other */
	assert_int_equal(install(f, "ht", "b", "j", 1, 10, NOW), 400);
}

static void test_store_epochs(void **state)
{
	fixture_t *f = *state;

	make_names(f, "e", 10);
	assert_int_equal(install(f, "ht", "b", "j", 5, 60, NOW), 0);
	assert_int_equal(install(f, "ht", "b", "j", 4, 60, NOW), 409); /* never back */
	read_name(f, "b", "e0", NOW);
	assert_int_equal(cursor_of(f, NOW, "cursor"), 1);
	assert_int_equal(install(f, "ht", "b", "j", 6, 60, NOW), 0); /* the next epoch replaces it */
	assert_int_equal(cursor_of(f, NOW, "cursor"), 0);
	assert_int_equal(cursor_of(f, NOW, "epoch"), 6);
}

static void test_store_memory_cap(void **state)
{
	fixture_t *f = *state;
	uint64_t cost = tgt_hint_cost(1000, 1000 * 8);

	/* the stated bound per name */
	assert_true(cost <= 1000 * (uint64_t)(TGT_HINT_BYTES_PER_NAME + 8) + 4096);
	f->t.cfg.hint_max_bytes = (int64_t)(cost + cost / 2);
	make_names(f, "name-", 1000); /* 6 or 8 bytes each with the NUL */
	assert_int_equal(install(f, "ht", "b", "one", 1, 60, NOW), 0);
	assert_int_equal(install(f, "ht", "b", "two", 1, 60, NOW), 413); /* both do not fit */
	assert_int_equal(install(f, "ht", "b", "one", 2, 60, NOW), 0);   /* replacing frees the old one first */
	make_names(f, "name-", 3000);
	assert_int_equal(install(f, "ht", "c", "big", 1, 60, NOW), 413); /* alone over the cap */
}

/* ---- the cursor ---- */

static void test_cursor_in_order(void **state)
{
	fixture_t *f = *state;

	make_names(f, "o", 50);
	assert_int_equal(install(f, "ht", "b", "j", 1, 60, NOW), 0);
	for (int i = 0; i < 20; i++) {
		char name[16];
		snprintf(name, sizeof(name), "o%d", i);
		read_name(f, "b", name, NOW);
		assert_int_equal(cursor_of(f, NOW, "cursor"), i + 1);
		assert_int_equal(next_use(f, "b", name, NOW), -1); /* read this epoch: no next use */
	}
	assert_int_equal(next_use(f, "b", "o20", NOW), 0);
	assert_int_equal(next_use(f, "b", "o49", NOW), 29);
}

static void test_cursor_out_of_order(void **state)
{
	fixture_t *f = *state;
	/* parallel readers: 1 0 3 2 5 4 ... within a small window */
	static const int order[] = {1, 0, 3, 2, 5, 4, 8, 6, 7};

	make_names(f, "r", 20);
	assert_int_equal(install(f, "ht", "b", "j", 1, 60, NOW), 0);
	read_name(f, "b", "r1", NOW);
	assert_int_equal(cursor_of(f, NOW, "cursor"), 0); /* r0 not read yet: waits for it */
	assert_int_equal(next_use(f, "b", "r0", NOW), 0);
	assert_int_equal(next_use(f, "b", "r2", NOW), 2);
	for (size_t i = 1; i < sizeof(order) / sizeof(order[0]); i++) {
		char name[16];
		snprintf(name, sizeof(name), "r%d", order[i]);
		read_name(f, "b", name, NOW);
	}
	assert_int_equal(cursor_of(f, NOW, "cursor"), 9);
	assert_int_equal(cursor_of(f, NOW, "skipped"), 0);
	assert_int_equal(cursor_of(f, NOW, "read"), 9);
	read_name(f, "b", "r3", NOW); /* read again: counted, nothing moves */
	assert_int_equal(cursor_of(f, NOW, "rereads"), 1);
	assert_int_equal(cursor_of(f, NOW, "cursor"), 9);
}

static void test_cursor_skipped(void **state)
{
	fixture_t *f = *state;
	size_t n = TGT_HINT_REORDER * 3;

	make_names(f, "k", n);
	assert_int_equal(install(f, "ht", "b", "j", 1, 60, NOW), 0);
	read_name(f, "b", "k0", NOW);
	/* k1 is never read: the cursor waits while the reads stay within the window ... */
	for (size_t i = 2; i < TGT_HINT_REORDER; i++) {
		char name[16];
		snprintf(name, sizeof(name), "k%zu", i);
		read_name(f, "b", name, NOW);
	}
	assert_int_equal(cursor_of(f, NOW, "cursor"), 1);
	assert_int_equal(next_use(f, "b", "k1", NOW), 0);
	/* ... and counts it skipped once a read TGT_HINT_REORDER places later comes */
	char name[16];
	snprintf(name, sizeof(name), "k%d", 1 + TGT_HINT_REORDER);
	read_name(f, "b", name, NOW);
	assert_int_equal(cursor_of(f, NOW, "skipped"), 1);
	assert_true(cursor_of(f, NOW, "cursor") > 1);
	assert_int_equal(next_use(f, "b", "k1", NOW), -1);
	/* unknown names do not move anything */
	int64_t c = cursor_of(f, NOW, "cursor");
	read_name(f, "b", "unknown", NOW);
	assert_int_equal(cursor_of(f, NOW, "cursor"), c);
	/* a skipped name read late is counted, not lost */
	read_name(f, "b", "k1", NOW);
	assert_int_equal(cursor_of(f, NOW, "late"), 1);
	assert_int_equal(cursor_of(f, NOW, "skipped"), 0);
}

/* ---- expiry ---- */

static void test_expiry(void **state)
{
	fixture_t *f = *state;

	make_names(f, "t", 10);
	assert_int_equal(install(f, "ht", "b", "j", 1, 5, NOW), 0);
	assert_int_equal(next_use(f, "b", "t3", NOW + 4999), 3);
	assert_int_equal(next_use(f, "b", "t3", NOW + 5000), -1); /* expired: no longer used */
	assert_false(tgt_hint_active_at(&f->t, "ht", "b", NOW + 5000));
	assert_int_equal(tgt_hint_expire_at(&f->t, NOW + 5000), 1);
	json_t *doc = tgt_hint_json_at(&f->t, NOW + 5000);
	assert_int_equal(json_array_size(json_object_get(doc, "hints")), 0);
	assert_int_equal(json_integer_value(json_object_get(doc, "bytes")), 0);
	json_decref(doc);
	/* an older epoch is accepted again once the newer one expired */
	assert_int_equal(install(f, "ht", "b", "j", 0, 5, NOW + 6000), 0);
}

/* ---- several hints ---- */

static void test_merge_jobs(void **state)
{
	fixture_t *f = *state;
	const char *a[] = {"x", "y", "z", "w"};
	const char *b[] = {"w", "z"};
	tgt_hint_spec_t s1 = {
		.provider = "ht", .bucket = "b", .job = "one", .epoch = 1, .ttl_s = 60, .names = a, .n = 4};
	tgt_hint_spec_t s2 = {
		.provider = "ht", .bucket = "b", .job = "two", .epoch = 1, .ttl_s = 60, .names = b, .n = 2};
	char why[300];
	size_t dups;

	assert_int_equal(tgt_hint_install_at(&f->t, &s1, NOW, &dups, why, sizeof(why)), 0);
	assert_int_equal(tgt_hint_install_at(&f->t, &s2, NOW, &dups, why, sizeof(why)), 0);
	assert_int_equal(next_use(f, "b", "w", NOW), 0); /* the soonest over both jobs */
	assert_int_equal(next_use(f, "b", "z", NOW), 1);
	assert_int_equal(next_use(f, "b", "y", NOW), 1);
	read_name(f, "b", "w", NOW); /* a read moves every job that lists it */
	assert_int_equal(next_use(f, "b", "w", NOW), -1);
	assert_int_equal(next_use(f, "b", "z", NOW), 0);
	assert_int_equal(tgt_hint_remove(&f->t, "ht", "b", "two", -1), 1);
	assert_int_equal(next_use(f, "b", "z", NOW), 2);
	assert_int_equal(tgt_hint_remove(&f->t, "ht", "b", NULL, 1), 1);
	assert_int_equal(next_use(f, "b", "z", NOW), -1);
}

/* ---- victim order ---- */

static int rank_cmp(const void *a, const void *b)
{
	return tgt_hint_rank_cmp(a, b);
}

static void test_victim_order(void **state)
{
	(void)state;
	/* no hint: oldest first, as LRU */
	tgt_hint_rank_t lru[] = {{.at = 30, .next = -1}, {.at = 10, .next = -1}, {.at = 20, .next = -1}};
	qsort(lru, 3, sizeof(lru[0]), rank_cmp);
	assert_int_equal(lru[0].at, 10);
	assert_int_equal(lru[1].at, 20);
	assert_int_equal(lru[2].at, 30);
	/* with a hint: the ones no hint expects (oldest first), then the furthest next use first */
	tgt_hint_rank_t v[] = {{.at = 1, .next = 0},
			       {.at = 50, .next = -1},
			       {.at = 2, .next = 7},
			       {.at = 3, .next = 3},
			       {.at = 40, .next = -1}};
	qsort(v, 5, sizeof(v[0]), rank_cmp);
	assert_int_equal(v[0].at, 40);
	assert_int_equal(v[1].at, 50);
	assert_int_equal(v[2].next, 7);
	assert_int_equal(v[3].next, 3);
	assert_int_equal(v[4].next, 0);
}

/* What lru.c does: ranks the cached objects by the store's next uses and evicts from the front. */
static void test_victim_order_under_hint(void **state)
{
	fixture_t *f = *state;
	const char *cached[] = {"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "other-a", "other-b"};
	tgt_hint_rank_t rank[10];

	make_names(f, "v", 8);
	assert_int_equal(install(f, "ht", "b", "j", 1, 60, NOW), 0);
	read_name(f, "b", "v0", NOW);
	read_name(f, "b", "v1", NOW);
	for (int i = 0; i < 10; i++) {
		rank[i].at = 100 - i; /* v0 the newest access, other-b the oldest */
		rank[i].next = next_use(f, "b", cached[i], NOW);
	}
	qsort(rank, 10, sizeof(rank[0]), rank_cmp);
	/* no next use (read already, or not listed): oldest first */
	assert_int_equal(rank[0].at, 91);  /* other-b */
	assert_int_equal(rank[1].at, 92);  /* other-a */
	assert_int_equal(rank[2].at, 99);  /* v1 */
	assert_int_equal(rank[3].at, 100); /* v0 */
	/* then the furthest next use first: v7 .. v2 */
	for (int i = 4; i < 10; i++)
		assert_int_equal(rank[i].next, 9 - i);
}

/* ---- staging windows ---- */

/* Picks while the store gives names; returns how many, their names in out (when not NULL). */
static int pick_all(fixture_t *f, const tgt_hint_window_t *w, int64_t now, tgt_hint_pick_t *out, int cap)
{
	tgt_hint_pick_t p;
	int n = 0;

	while (n < 1000 && tgt_hint_stage_next(&f->t, w, now, &p)) {
		if (out != NULL && n < cap)
			out[n] = p;
		n++;
	}
	return n;
}

static void test_stage_window(void **state)
{
	fixture_t *f = *state;
	tgt_hint_window_t w = {.budget_bytes = 1000, .lead_s = 4, .min_items = 2};
	tgt_hint_pick_t p[4];

	make_names(f, "w", 100);
	assert_int_equal(install(f, "ht", "b", "j", 1, 600, NOW), 0);
	/* before any read and any size: as many as in flight, from the start of the list */
	assert_int_equal(pick_all(f, &w, NOW, p, 4), 2);
	assert_string_equal(p[0].name, "w0");
	assert_string_equal(p[1].name, "w1");
	assert_string_equal(p[0].provider, "ht");
	tgt_hint_stage_done(&f->t, &p[0], 0, 100);
	tgt_hint_stage_done(&f->t, &p[1], 1, 100);
	assert_int_equal(pick_all(f, &w, NOW, NULL, 0), 0); /* no reads yet: the rate allows no more */
	/* 10 reads in one second: 10/s for 4 s is 40 names, but 1000 bytes hold 10 of 100 bytes */
	for (int i = 0; i < 10; i++) {
		char name[16];
		snprintf(name, sizeof(name), "w%d", i);
		read_name(f, "b", name, NOW + 100 * i);
	}
	int more = pick_all(f, &w, NOW + 1000, p, 1);
	assert_string_equal(p[0].name, "w10"); /* staging starts at the cursor, read names are not staged */
	assert_int_equal(more, 10);
	assert_int_equal(cursor_of(f, NOW + 1000, "prefetched"), 1); /* w0 fetched now; w1 was cached */
	/* a larger budget: the rate is the limit (10 names in 1 s read since the first: 4 s ahead) */
	w.budget_bytes = 1 << 20;
	assert_int_equal(pick_all(f, &w, NOW + 1000, NULL, 0), 40 - 10);
}

static void test_stage_turns_and_ais(void **state)
{
	fixture_t *f = *state;
	tgt_hint_window_t w = {.budget_bytes = 1 << 20, .lead_s = 4, .min_items = 2};
	tgt_hint_pick_t p[8];

	make_names(f, "a", 10);
	assert_int_equal(install(f, "ht", "one", "j", 1, 600, NOW), 0);
	assert_int_equal(install(f, "ht", "two", "j", 1, 600, NOW), 0);
	assert_int_equal(install(f, "ais", "local", "j", 1, 600, NOW), 0); /* stored copies: read ahead, not fetched */
	assert_int_equal(pick_all(f, &w, NOW, p, 8), 6);
	/* the hints take turns: every round of three names one from each bucket */
	for (int r = 0; r < 2; r++) {
		assert_string_not_equal(p[3 * r].bucket, p[3 * r + 1].bucket);
		assert_string_not_equal(p[3 * r + 1].bucket, p[3 * r + 2].bucket);
		assert_string_not_equal(p[3 * r].bucket, p[3 * r + 2].bucket);
	}
	/* an expired hint stages nothing */
	assert_int_equal(pick_all(f, &w, NOW + 601000, NULL, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_duplicates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_epochs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_memory_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cursor_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cursor_out_of_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cursor_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_jobs, setup, teardown),
		cmocka_unit_test(test_victim_order),
		cmocka_unit_test_setup_teardown(test_victim_order_under_hint, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stage_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stage_turns_and_ais, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
