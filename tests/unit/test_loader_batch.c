/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ft-loader's GetBatch: the TAR walker (every split, corrupt, cut), the request body, the answer check. */
#include <locale.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <cmocka.h>

#include "loader.h"
#include "shard/walk.h"
#include "tarwalk.h"

#define MAX_MEMBERS 16

/* A TAR built in memory. */
typedef struct {
	uint8_t *p;
	size_t len, cap;
} tar_t;

static void put(tar_t *t, const void *p, size_t n)
{
	if (t->len + n > t->cap) {
		t->cap = (t->len + n) * 2;
		t->p = realloc(t->p, t->cap);
		assert_non_null(t->p);
	}
	memcpy(t->p + t->len, p, n);
	t->len += n;
}

/* One member as FastTier's batch writes it (target/shard/tar.c): header, size bytes of fill, padding. */
static void ft_member(tar_t *t, const char *name, size_t size, uint8_t fill)
{
	uint8_t hdr[4096], *data = malloc(size + 512);
	ssize_t h = tgt_tar_header(name, size, 1700000000, hdr, sizeof(hdr));

	assert_non_null(data);
	assert_true(h > 0);
	put(t, hdr, (size_t)h);
	memset(data, fill, size + 512);
	memset(data + size, 0, 512);
	put(t, data, size + (512 - size % 512) % 512);
	free(data);
}

static void ft_end(tar_t *t)
{
	static const uint8_t eof[1024];

	put(t, eof, sizeof(eof));
}

/* The same members written by libarchive in format (PAX restricted, GNU tar), padded to its 10 KiB records. */
static void la_tar(tar_t *t, int format, const char *const *names, const size_t *sizes, size_t n)
{
	struct archive *a = archive_write_new();
	size_t used = 0;

	t->cap = 1 << 20;
	t->p = malloc(t->cap);
	assert_non_null(t->p);
	assert_int_equal(archive_write_set_format(a, format), ARCHIVE_OK);
	archive_write_set_bytes_in_last_block(a, 0); /* the last record padded to 10 KiB too, as tar(1) does */
	assert_int_equal(archive_write_open_memory(a, t->p, t->cap, &used), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		char *data = malloc(sizes[i] + 1);
		memset(data, 'a' + (int)i, sizes[i]);
		archive_entry_set_pathname(e, names[i]);
		archive_entry_set_size(e, (la_int64_t)sizes[i]);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		if (archive_write_header(a, e) != ARCHIVE_OK)
			fail_msg("archive_write_header: %s", archive_error_string(a));
		assert_int_equal(archive_write_data(a, data, sizes[i]), (la_ssize_t)sizes[i]);
		archive_entry_free(e);
		free(data);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	t->len = used;
}

/* What the callback saw. */
typedef struct {
	size_t n;
	char names[MAX_MEMBERS][256];
	uint64_t sizes[MAX_MEMBERS], offsets[MAX_MEMBERS];
	size_t refuse_at; /* the member index refused (SIZE_MAX: none) */
} seen_t;

static int collect(void *ctx, const ld_tar_member_t *m, char *err, size_t errlen)
{
	seen_t *s = ctx;

	assert_int_equal(m->index, s->n);
	assert_int_equal(strlen(m->name), m->name_len);
	if (m->index == s->refuse_at) {
		snprintf(err, errlen, "refused %s", m->name);
		return -1;
	}
	assert_true(s->n < MAX_MEMBERS);
	snprintf(s->names[s->n], sizeof(s->names[0]), "%s", m->name);
	s->sizes[s->n] = m->size;
	s->offsets[s->n] = m->offset;
	s->n++;
	return 0;
}

/* Walks t in two pieces split at cut; returns feed's and end's results (0 or -1) in *fed and *ended. */
static void walk_split(const tar_t *t, size_t cut, seen_t *s, ld_tarwalk_t *w, int *fed, int *ended)
{
	ld_tarwalk_init(w);
	*fed = ld_tarwalk_feed(w, t->p, cut, collect, s);
	if (*fed == 0)
		*fed = ld_tarwalk_feed(w, t->p + cut, t->len - cut, collect, s);
	*ended = ld_tarwalk_end(w);
}

static char long_name[200];

static const char *const NAMES[] = {"b/empty", "b/one", "b/zeros", long_name, "b/k\xc3\xa9y with spaces"};
static const size_t SIZES[] = {0, 1, 1024, 513, 20000};
#define N_NAMES (sizeof(NAMES) / sizeof(NAMES[0]))

static void check_seen(const seen_t *s)
{
	assert_int_equal(s->n, N_NAMES);
	for (size_t i = 0; i < N_NAMES; i++) {
		assert_string_equal(s->names[i], NAMES[i]);
		assert_int_equal(s->sizes[i], SIZES[i]);
	}
}

/* FastTier's members: b/zeros is 1024 zero bytes of data, not an end marker; the long name rides in a PAX header. */
static void build_ft(tar_t *t)
{
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < N_NAMES; i++)
		ft_member(t, NAMES[i], SIZES[i], i == 2 ? 0 : (uint8_t)('a' + i));
	ft_end(t);
}

static void every_split(const tar_t *t)
{
	ld_tarwalk_t *w = malloc(sizeof(*w));

	for (size_t cut = 0; cut <= t->len; cut++) {
		seen_t s = {.refuse_at = SIZE_MAX};
		int fed, ended;
		walk_split(t, cut, &s, w, &fed, &ended);
		assert_int_equal(fed, 0);
		assert_int_equal(ended, 0);
		check_seen(&s);
		assert_int_equal(w->offset, t->len);
		assert_int_equal(w->members, N_NAMES);
	}
	/* and a byte at a time */
	seen_t s = {.refuse_at = SIZE_MAX};
	ld_tarwalk_init(w);
	for (size_t i = 0; i < t->len; i++)
		assert_int_equal(ld_tarwalk_feed(w, t->p + i, 1, collect, &s), 0);
	assert_int_equal(ld_tarwalk_end(w), 0);
	check_seen(&s);
	free(w);
}

static void test_ft_tar_every_split(void **state)
{
	tar_t t;

	(void)state;
	build_ft(&t);
	every_split(&t);
	free(t.p);
}

static void test_libarchive_tars_every_split(void **state)
{
	static const int formats[] = {ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FORMAT_TAR_GNUTAR,
				      ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE};

	(void)state;
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		tar_t t;
		la_tar(&t, formats[f], NAMES, SIZES, N_NAMES);
		assert_true(t.len % 10240 == 0); /* zeros after the end marker, up to the record size */
		every_split(&t);
		free(t.p);
	}
}

/* FastTier's TAR (build_ft) in t, walked whole once: what that walk saw in all; returns a walker to reuse. */
static ld_tarwalk_t *walked_ft(tar_t *t, seen_t *all)
{
	ld_tarwalk_t *w = malloc(sizeof(*w));
	int fed, ended;

	assert_non_null(w);
	build_ft(t);
	*all = (seen_t){.refuse_at = SIZE_MAX};
	walk_split(t, t->len, all, w, &fed, &ended);
	assert_int_equal(fed, 0);
	assert_int_equal(ended, 0);
	return w;
}

/* Cut anywhere: complete only at a member's start (its first header) or after the last member. */
static void test_truncated_anywhere(void **state)
{
	tar_t t;
	seen_t all;
	ld_tarwalk_t *w = walked_ft(&t, &all);
	int fed, ended;

	(void)state;
	uint64_t data_end = t.len - 1024;
	for (size_t cut = 0; cut < t.len; cut++) {
		tar_t part = {.p = t.p, .len = cut, .cap = cut};
		seen_t s = {.refuse_at = SIZE_MAX};
		bool boundary = cut == data_end || cut == data_end + 512; /* a cut end marker is a cut too */
		for (size_t i = 0; i < all.n; i++)
			boundary = boundary || cut == all.offsets[i];
		walk_split(&part, cut / 2, &s, w, &fed, &ended);
		assert_int_equal(fed, 0);
		if (boundary) {
			assert_int_equal(ended, 0);
		} else {
			assert_int_equal(ended, -1);
			assert_non_null(strstr(w->err, "truncated"));
		}
	}
	free(w);
	free(t.p);
}

static void set_checksum(uint8_t *h)
{
	unsigned sum = 0;

	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

static void test_corrupt_header(void **state)
{
	tar_t t;
	seen_t all;
	ld_tarwalk_t *w = walked_ft(&t, &all);
	int fed, ended;

	(void)state;
	uint8_t *second = t.p + all.offsets[1];

	/* a flipped bit in the second member's name: bad checksum, at every split, for good */
	second[3] ^= 0x01;
	for (size_t cut = 0; cut <= t.len; cut += 97) {
		seen_t s = {.refuse_at = SIZE_MAX};
		walk_split(&t, cut, &s, w, &fed, &ended);
		assert_int_equal(fed, -1);
		assert_int_equal(ended, -1);
		assert_int_equal(s.n, 1);
		assert_non_null(strstr(w->err, "bad header checksum at offset 512"));
		assert_int_equal(ld_tarwalk_feed(w, t.p, 1, collect, &s), -1);
	}
	second[3] ^= 0x01;

	/* a size field that is not a number (the checksum made right) */
	uint8_t saved[512];
	memcpy(saved, second, 512);
	memcpy(second + 124, "0000000001x\0", 12);
	set_checksum(second);
	seen_t s = {.refuse_at = SIZE_MAX};
	walk_split(&t, t.len, &s, w, &fed, &ended);
	assert_int_equal(fed, -1);
	assert_non_null(strstr(w->err, "bad size field"));

	/* base-256 size (GNU, for 8 GiB and more): read, and the data then missing */
	memset(second + 124, 0, 12);
	second[124] = 0x80;
	second[131] = 0x02; /* 2 << 32 = 8 GiB */
	second[135] = 0x01;
	set_checksum(second);
	tar_t head = {.p = t.p, .len = all.offsets[1] + 512};
	s = (seen_t){.refuse_at = SIZE_MAX};
	walk_split(&head, 100, &s, w, &fed, &ended);
	assert_int_equal(fed, 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.sizes[1], (2ull << 32) + 1);
	assert_int_equal(ended, -1);
	assert_non_null(strstr(w->err, "truncated"));
	memcpy(second, saved, 512);

	/* a lone zero block where a header belongs, then a member */
	tar_t z = {0};
	uint8_t zero[512] = {0};
	put(&z, zero, sizeof(zero));
	put(&z, t.p, t.len);
	s = (seen_t){.refuse_at = SIZE_MAX};
	walk_split(&z, 0, &s, w, &fed, &ended);
	assert_int_equal(fed, -1);
	assert_non_null(strstr(w->err, "lone zero block"));
	free(z.p);

	/* something else than zeros after the end marker */
	put(&t, "\0\0x", 3);
	walk_split(&t, 0, &s, w, &fed, &ended);
	assert_int_equal(fed, -1);
	assert_non_null(strstr(w->err, "after the end-of-archive"));
	free(w);
	free(t.p);
}

static void test_refused_member(void **state)
{
	tar_t t;
	ld_tarwalk_t *w = malloc(sizeof(*w));
	seen_t s = {.refuse_at = 2};
	int fed, ended;

	(void)state;
	build_ft(&t);
	walk_split(&t, 700, &s, w, &fed, &ended);
	assert_int_equal(fed, -1);
	assert_int_equal(ended, -1);
	assert_int_equal(s.n, 2);
	assert_string_equal(w->err, "refused b/zeros");
	free(w);
	free(t.p);
}

/* ---- the request and its answer (batch.c) ---- */

/* Object names that need JSON escaping, UTF-8, a long one. */
static char long_obj[301];
static const char *const OBJS[] = {"plain",       "q\"uote",           "back\\slash", "tab\there",
				   "ctl\x01\x1f", "\xc3\xa9/\xc3\xbc", long_obj};
#define N_OBJS (sizeof(OBJS) / sizeof(OBJS[0]))
#define BATCH 3

static int setup_objs(void **state)
{
	(void)state;
	memset(long_obj, 'L', 300);
	for (size_t i = 0; i < N_OBJS; i++)
		assert_int_equal(ld_objs_add_named(OBJS[i], strlen(OBJS[i]), 0, -1), 0);
	return 0;
}

static int teardown_objs(void **state)
{
	(void)state;
	ld_objs_free();
	return 0;
}

static void batch_opts(ld_opts_t *o, int epochs)
{
	memset(o, 0, sizeof(*o));
	strcpy(o->bucket, "bk");
	strcpy(o->provider, "ais");
	strcpy(o->loaderid, "0");
	o->loadernum = 1;
	o->epochs = epochs;
	o->uniquegets = epochs > 0;
	o->get_batchsize = BATCH;
	o->seed = 7;
}

/* The index in OBJS of the objname of item i of the parsed body, checking the item's other fields. */
static size_t item_index(json_t *doc, size_t i)
{
	json_t *e = json_array_get(json_object_get(doc, "in"), i);

	assert_string_equal(json_string_value(json_object_get(e, "bucket")), "bk");
	assert_string_equal(json_string_value(json_object_get(e, "provider")), "ais");
	assert_int_equal(json_object_size(e), 3);
	const char *name = json_string_value(json_object_get(e, "objname"));
	assert_non_null(name);
	for (size_t k = 0; k < N_OBJS; k++)
		if (strcmp(name, OBJS[k]) == 0)
			return k;
	fail_msg("objname \"%s\" was not listed", name);
	return 0;
}

/* Two epochs of 7 objects in batches of 3: 3, 3, 1 per epoch (no batch spans two), each object once an epoch. */
static void test_body_and_epochs(void **state)
{
	ld_opts_t o;
	ld_job_t j;
	ld_batch_t *b;
	uint64_t rng = 1;
	int host = -1, want[] = {3, 3, 1, 3, 3, 1, 0};
	size_t seen[N_OBJS] = {0};
	char err[256];

	(void)state;
	batch_opts(&o, 2);
	assert_int_equal(ld_job_init(&j, &o, LD_JOB_RUN, 1), 0);
	assert_non_null(b = ld_batch_new(&o));
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		int n = ld_batch_next(b, &j, 0, &rng, &host, err, sizeof(err));
		assert_int_equal(n, want[k]);
		if (n == 0)
			break;
		size_t len;
		const char *body = ld_batch_body(b, &len);
		assert_memory_equal(body, "{\"in\":[{\"bucket\":\"bk\",\"provider\":\"ais\",\"objname\":\"", 49);
		json_error_t je;
		json_t *doc = json_loadb(body, len, 0, &je);
		if (doc == NULL)
			fail_msg("body is not JSON (%s): %.*s", je.text, (int)len, body);
		assert_string_equal(json_string_value(json_object_get(doc, "format")), ".tar");
		assert_int_equal(json_object_size(doc), 2);
		assert_int_equal(json_array_size(json_object_get(doc, "in")), (size_t)n);
		for (int i = 0; i < n; i++)
			seen[item_index(doc, (size_t)i)]++;
		json_decref(doc);
		if (k == 2 || k == 5) /* an epoch's end: every object read once more */
			for (size_t i = 0; i < N_OBJS; i++)
				assert_int_equal(seen[i], k == 2 ? 1 : 2);
	}
	assert_string_equal(j.stop_reason, "epochs done");
	ld_batch_free(b);
	ld_job_destroy(&j);
}

/* Without epochs every batch is full: random picks. */
static void test_random_batches_are_full(void **state)
{
	ld_opts_t o;
	ld_job_t j;
	ld_batch_t *b;
	uint64_t rng = 1;
	int host;
	char err[256];

	(void)state;
	batch_opts(&o, 0);
	assert_int_equal(ld_job_init(&j, &o, LD_JOB_RUN, 1), 0);
	assert_non_null(b = ld_batch_new(&o));
	for (int k = 0; k < 20; k++)
		assert_int_equal(ld_batch_next(b, &j, 0, &rng, &host, err, sizeof(err)), BATCH);
	ld_job_stop(&j, "test");
	assert_int_equal(ld_batch_next(b, &j, 0, &rng, &host, err, sizeof(err)), 0);
	ld_batch_free(b);
	ld_job_destroy(&j);
}

/* The TAR FastTier would answer for the batch's items in order (order = a permutation of them), count of them. */
static void answer_for(json_t *doc, const size_t *order, size_t count, tar_t *t)
{
	char name[512];

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "bk/%s", OBJS[item_index(doc, order[i])]);
		ft_member(t, name, 100 + i, 'z');
	}
	ft_end(t);
}

static void test_answer_check(void **state)
{
	ld_opts_t o;
	ld_job_t j;
	ld_batch_t *b;
	uint64_t rng = 1;
	int host;
	char err[256];
	size_t len, in_order[] = {0, 1, 2}, swapped[] = {0, 2, 1};
	tar_t t;

	(void)state;
	batch_opts(&o, 1);
	assert_int_equal(ld_job_init(&j, &o, LD_JOB_RUN, 1), 0);
	assert_non_null(b = ld_batch_new(&o));
	assert_int_equal(ld_batch_next(b, &j, 0, &rng, &host, err, sizeof(err)), BATCH);
	const char *body = ld_batch_body(b, &len);
	json_t *doc = json_loadb(body, len, 0, NULL);
	assert_non_null(doc);

	/* the answer asked for, in two pieces */
	answer_for(doc, in_order, 3, &t);
	ld_batch_answer_reset(b);
	ld_batch_answer_feed(b, 200, (const char *)t.p, 700);
	ld_batch_answer_feed(b, 200, (const char *)t.p + 700, t.len - 700);
	assert_null(ld_batch_answer_error(b));
	assert_null(ld_batch_answer_end(b));
	assert_int_equal(ld_batch_members(b), 3);
	free(t.p);

	/* two members swapped: known bad at the first one out of place */
	answer_for(doc, swapped, 3, &t);
	ld_batch_answer_reset(b);
	ld_batch_answer_feed(b, 200, (const char *)t.p, t.len);
	assert_non_null(ld_batch_answer_error(b));
	assert_non_null(strstr(ld_batch_answer_error(b), "member 1 is"));
	assert_non_null(ld_batch_answer_end(b));
	free(t.p);

	/* one member short, one too many */
	answer_for(doc, in_order, 2, &t);
	ld_batch_answer_reset(b);
	ld_batch_answer_feed(b, 200, (const char *)t.p, t.len);
	assert_null(ld_batch_answer_error(b));
	assert_string_equal(ld_batch_answer_end(b), "the TAR answer holds 2 members for 3 items asked");
	free(t.p);
	size_t four[] = {0, 1, 2, 0};
	answer_for(doc, four, 4, &t);
	ld_batch_answer_reset(b);
	ld_batch_answer_feed(b, 200, (const char *)t.p, t.len);
	assert_non_null(strstr(ld_batch_answer_error(b), "more members than the 3 items asked"));
	free(t.p);

	/* cut short */
	answer_for(doc, in_order, 3, &t);
	ld_batch_answer_reset(b);
	ld_batch_answer_feed(b, 200, (const char *)t.p, 1000);
	assert_non_null(strstr(ld_batch_answer_end(b), "truncated"));
	free(t.p);

	/* an error answer: its text kept for the message; a redirect's body is not */
	ld_batch_answer_reset(b);
	ld_batch_answer_feed(b, 307, "moved", 5);
	assert_string_equal(ld_batch_answer_text(b), "");
	static const char e1[] = "{\"status\":404,", e2[] = "\"message\":\"gone\"}\n";
	ld_batch_answer_feed(b, 404, e1, strlen(e1));
	ld_batch_answer_feed(b, 404, e2, strlen(e2));
	assert_string_equal(ld_batch_answer_text(b), "{\"status\":404,\"message\":\"gone\"}");
	assert_non_null(strstr(ld_batch_label(b), "[3 items from \""));

	json_decref(doc);
	ld_batch_free(b);
	ld_job_destroy(&j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ft_tar_every_split),
		cmocka_unit_test(test_libarchive_tars_every_split),
		cmocka_unit_test(test_truncated_anywhere),
		cmocka_unit_test(test_corrupt_header),
		cmocka_unit_test(test_refused_member),
		cmocka_unit_test_setup_teardown(test_body_and_epochs, setup_objs, teardown_objs),
		cmocka_unit_test_setup_teardown(test_random_batches_are_full, setup_objs, teardown_objs),
		cmocka_unit_test_setup_teardown(test_answer_check, setup_objs, teardown_objs),
	};

	setlocale(LC_CTYPE, "C.UTF-8"); /* libarchive writes the UTF-8 name as it is */
	memset(long_name, 'n', 150);
	memcpy(long_name, "b/", 2);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
