/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the shard code: TAR header writing and walking, corrupt and cut archives, the index, names, formats, matching. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shard/shard.h"

typedef struct {
	const uint8_t *data;
	size_t len;
} mem_t;

static int mem_read(void *arg, void *buf, size_t len, uint64_t off)
{
	const mem_t *m = arg;

	if (off > m->len || len > m->len - off)
		return -1;
	memcpy(buf, m->data + off, len);
	return 0;
}

/* A TAR of the given names, each holding its own name as data, with the end-of-archive blocks. */
static size_t build_tar(const char *const *names, int n, uint8_t *out, size_t cap)
{
	size_t pos = 0;

	for (int i = 0; i < n; i++) {
		size_t len = strlen(names[i]);
		ssize_t h = tgt_tar_header(names[i], len, 1700000000, out + pos, cap - pos);
		assert_true(h > 0 && h % 512 == 0);
		pos += (size_t)h;
		memcpy(out + pos, names[i], len);
		pos += (len + 511) / 512 * 512;
	}
	memset(out + pos, 0, 1024);
	return pos + 1024;
}

typedef struct {
	char names[8][TGT_SHARD_NAME_MAX + 1];
	uint64_t sizes[8];
	int64_t offs[8];
	int n;
} seen_t;

static int record(void *arg, const tgt_walk_member_t *m)
{
	seen_t *s = arg;

	if (!m->regular || s->n == 8)
		return 0;
	snprintf(s->names[s->n], sizeof(s->names[0]), "%s", m->name);
	s->sizes[s->n] = m->size;
	s->offs[s->n] = m->data_off;
	s->n++;
	return 0;
}

static char long_name[3000];

static void test_tar_round_trip(void **state)
{
	static uint8_t buf[64 * 1024];
	const char *names[3] = {"a.txt", long_name, "dir/b.bin"};
	(void)state;

	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[10] = '/';
	size_t len = build_tar(names, 3, buf, sizeof(buf));
	mem_t m = {buf, len};
	seen_t s = {0};
	uint64_t end = 0;
	char err[200];
	assert_int_equal(tgt_tar_walk(mem_read, &m, len, record, &s, &end, err, sizeof(err)), 0);
	assert_int_equal(s.n, 3);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(s.names[i], names[i]);
		assert_int_equal(s.sizes[i], strlen(names[i]));
		assert_memory_equal(buf + s.offs[i], names[i], strlen(names[i]));
	}
	assert_int_equal(end, len - 1024);
}

static void test_tar_bad_checksum_and_cut(void **state)
{
	static uint8_t buf[16 * 1024];
	const char *names[2] = {"one", "two"};
	char err[200];
	(void)state;

	size_t len = build_tar(names, 2, buf, sizeof(buf));
	mem_t m = {buf, len};
	/* every cut before the end-of-archive marker is "truncated" */
	for (size_t cut = 1; cut < len - 1024; cut += 97) {
		m.len = cut;
		err[0] = '\0';
		assert_int_equal(tgt_tar_walk(mem_read, &m, cut, NULL, NULL, NULL, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "truncated"));
	}
	m.len = len;
	buf[512 + 512] ^= 1; /* the second header's name */
	assert_int_equal(tgt_tar_walk(mem_read, &m, len, NULL, NULL, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "checksum"));
}

static void test_tar_size_past_end(void **state)
{
	static uint8_t buf[4096];
	char err[200];
	(void)state;

	memset(buf, 0, sizeof(buf));
	ssize_t h = tgt_tar_header("big", 1 << 20, 0, buf, sizeof(buf)); /* claims 1 MiB in a 4 KiB file */
	assert_int_equal(h, 512);
	mem_t m = {buf, sizeof(buf)};
	assert_int_equal(tgt_tar_walk(mem_read, &m, sizeof(buf), NULL, NULL, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cut"));
}

static void test_zip_garbage(void **state)
{
	static uint8_t buf[1024];
	char err[200];
	(void)state;

	memset(buf, 'z', sizeof(buf));
	mem_t m = {buf, sizeof(buf)};
	assert_int_equal(tgt_zip_walk(mem_read, &m, sizeof(buf), NULL, NULL, err, sizeof(err)), -1);
	/* an end record pointing outside the file */
	memset(buf, 0, sizeof(buf));
	uint8_t *e = buf + sizeof(buf) - 22;
	e[0] = 0x50, e[1] = 0x4b, e[2] = 5, e[3] = 6;
	e[10] = 1, e[12] = 46, e[16] = 0xff, e[17] = 0xff;
	assert_int_equal(tgt_zip_walk(mem_read, &m, sizeof(buf), NULL, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "outside"));
}

static void test_index_from_file(void **state)
{
	static uint8_t buf[16 * 1024];
	const char *names[4] = {"b", "a", "b", "c"}; /* "b" twice: the second one wins */
	char path[] = "/tmp/test_shard_XXXXXX", err[200];
	tgt_shard_index_t *ix = NULL;
	(void)state;

	size_t len = build_tar(names, 4, buf, sizeof(buf));
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	assert_int_equal(tgt_shard_index_build(fd, len, TGT_SHARD_TAR, 1 << 20, &ix, err, sizeof(err)), 0);
	assert_int_equal(ix->n, 3);
	/* archive order: a, b (its second occurrence), c */
	assert_string_equal(ix->m[0].name, "a");
	assert_string_equal(ix->m[1].name, "b");
	assert_int_equal(ix->m[1].nth, 1);
	assert_string_equal(ix->m[2].name, "c");
	const tgt_shard_member_t *b = tgt_shard_index_find(ix, "b");
	assert_non_null(b);
	assert_true(b->off > 3 * 512);
	assert_null(tgt_shard_index_find(ix, "d"));
	assert_int_equal(ix->tar_end, len - 1024);
	tgt_shard_index_free(ix);
	/* the same bytes as a corrupt TAR: an error, no index */
	buf[0] ^= 0x20;
	assert_int_equal(pwrite(fd, buf, 512, 0), 512);
	assert_int_equal(tgt_shard_index_build(fd, len, TGT_SHARD_TAR, 1 << 20, &ix, err, sizeof(err)), -EBADMSG);
	assert_null(ix);
	close(fd);
}

static void test_member_names(void **state)
{
	const char *why;
	(void)state;

	assert_int_equal(tgt_shard_member_check("a/b.jpg", &why), 0);
	assert_int_equal(tgt_shard_member_check("..a/b..", &why), 0);
	assert_int_equal(tgt_shard_member_check("../a", &why), -1);
	assert_int_equal(tgt_shard_member_check("a/../b", &why), -1);
	assert_int_equal(tgt_shard_member_check("a/..", &why), -1);
	assert_int_equal(tgt_shard_member_check("/etc/passwd", &why), -1);
	assert_int_equal(tgt_shard_member_check("a//b", &why), -1);
	assert_int_equal(tgt_shard_member_check("./a", &why), -1);
	assert_int_equal(tgt_shard_member_check("a/", &why), -1);
	assert_int_equal(tgt_shard_member_check("", &why), -1);
	assert_int_equal(tgt_shard_wdskey_len("train/0001.jpg"), strlen("train/0001"));
	assert_int_equal(tgt_shard_wdskey_len("a.b/0001.seg.png"), strlen("a.b/0001"));
	assert_int_equal(tgt_shard_wdskey_len("noext"), 5);
}

static void test_formats(void **state)
{
	(void)state;
	assert_int_equal(tgt_shard_fmt_of_name("x.tar"), TGT_SHARD_TAR);
	assert_int_equal(tgt_shard_fmt_of_name("a/x.TGZ"), TGT_SHARD_TGZ);
	assert_int_equal(tgt_shard_fmt_of_name("x.tar.gz"), TGT_SHARD_TGZ);
	assert_int_equal(tgt_shard_fmt_of_name("x.tar.lz4"), TGT_SHARD_TLZ4);
	assert_int_equal(tgt_shard_fmt_of_name("x.zip"), TGT_SHARD_ZIP);
	assert_int_equal(tgt_shard_fmt_of_name(".tar"), TGT_SHARD_NONE);
	assert_int_equal(tgt_shard_fmt_of_name("a/.tar"), TGT_SHARD_NONE);
	assert_int_equal(tgt_shard_fmt_of_name("x.gz"), TGT_SHARD_NONE);
	assert_int_equal(tgt_shard_fmt_parse("application/x-tar"), TGT_SHARD_TAR);
	assert_int_equal(tgt_shard_fmt_parse("tgz"), TGT_SHARD_TGZ);
	assert_int_equal(tgt_shard_fmt_parse(".tar.lz4"), TGT_SHARD_TLZ4);
	assert_int_equal(tgt_shard_fmt_parse("application/zip"), TGT_SHARD_ZIP);
	assert_int_equal(tgt_shard_fmt_parse("rar"), TGT_SHARD_NONE);
}

static void test_match_modes(void **state)
{
	tgt_shard_match_t m;
	char err[200];
	(void)state;

	assert_int_equal(tgt_shard_match_init(&m, NULL, "^s/00[0-1]\\.jpg$", err, sizeof(err)), 0);
	assert_true(tgt_shard_match(&m, "s/001.jpg"));
	assert_false(tgt_shard_match(&m, "s/002.jpg"));
	tgt_shard_match_fini(&m);
	assert_int_equal(tgt_shard_match_init(&m, "wdskey", "s/001", err, sizeof(err)), 0);
	assert_true(tgt_shard_match(&m, "s/001.jpg"));
	assert_true(tgt_shard_match(&m, "s/001.seg.png"));
	assert_false(tgt_shard_match(&m, "s/0010.jpg"));
	tgt_shard_match_fini(&m);
	assert_int_equal(tgt_shard_match_init(&m, "suffix", ".cls", err, sizeof(err)), 0);
	assert_true(tgt_shard_match(&m, "a.cls"));
	assert_false(tgt_shard_match(&m, "a.clsx"));
	tgt_shard_match_fini(&m);
	assert_int_equal(tgt_shard_match_init(&m, "glob", "x", err, sizeof(err)), -1);
	assert_int_equal(tgt_shard_match_init(&m, "regexp", "(", err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tar_round_trip),    cmocka_unit_test(test_tar_bad_checksum_and_cut),
		cmocka_unit_test(test_tar_size_past_end), cmocka_unit_test(test_zip_garbage),
		cmocka_unit_test(test_index_from_file),   cmocka_unit_test(test_member_names),
		cmocka_unit_test(test_formats),           cmocka_unit_test(test_match_modes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
