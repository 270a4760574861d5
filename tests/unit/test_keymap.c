/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the object-name-to-path mapping: which names are hashed, their paths, the name xattr and its walk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/names.h"
#include "core/keymap.h"

static bool hashed(const char *s)
{
	return tgt_key_hashed(s, strlen(s));
}

static void test_paths_kept(void **state)
{
	(void)state;
	assert_false(hashed("a"));
	assert_false(hashed("a/b/c"));
	assert_false(hashed("..."));
	assert_false(hashed(".hidden/.x"));
	assert_false(hashed("a/..b/c.."));
	assert_false(hashed("x/.ft-keys/y")); /* the reserved name only at the top */
	assert_false(hashed(".ft-keysx"));
	char seg[256];
	memset(seg, 's', 255);
	seg[255] = '\0';
	assert_false(hashed(seg));
}

static void test_names_hashed(void **state)
{
	(void)state;
	assert_true(hashed(""));
	assert_true(hashed("a/"));
	assert_true(hashed("/"));
	assert_true(hashed("/a"));
	assert_true(hashed("a//b"));
	assert_true(hashed("."));
	assert_true(hashed(".."));
	assert_true(hashed("a/./b"));
	assert_true(hashed("a/../b"));
	assert_true(hashed("../../etc/passwd"));
	assert_true(hashed("a/.."));
	assert_true(hashed(".ft-keys"));
	assert_true(hashed(".ft-keys/ab/cd"));
	char seg[260];
	memset(seg, 's', 256);
	seg[256] = '\0';
	assert_true(hashed(seg));
	memset(seg, 's', 258);
	seg[258] = '\0';
	memcpy(seg, "a/", 2); /* "a/" and a 256-byte segment */
	assert_true(hashed(seg));
}

static void test_path(void **state)
{
	char buf[TGT_KEY_REL_MAX + 8], small[8];

	(void)state;
	assert_int_equal(tgt_key_path(buf, sizeof(buf), "a/b", 3), 0);
	assert_string_equal(buf, "a/b");
	assert_int_equal(tgt_key_path(buf, sizeof(buf), "a/", 2), 0);
	assert_string_equal(buf, ".ft-keys/b3/b3dda5b674f9ce730a37dee0a33bb31efeea2335f517774f6ea133d448df2178");
	assert_int_equal(strlen(buf) + 1, TGT_KEY_REL_MAX);
	assert_int_equal(tgt_key_path(buf, sizeof(buf), "..", 2), 0);
	assert_string_equal(buf, ".ft-keys/5e/5ec1f7e700f37c3d0b2981d04855fc34b94aaa15457b05ca571817442d228f81");
	/* the length given counts, not a NUL */
	assert_int_equal(tgt_key_path(buf, sizeof(buf), "a/xyz", 2), 0);
	assert_string_equal(buf, ".ft-keys/b3/b3dda5b674f9ce730a37dee0a33bb31efeea2335f517774f6ea133d448df2178");
	assert_int_equal(tgt_key_path(small, sizeof(small), "abcdefgh", 8), -1);
	assert_int_equal(tgt_key_path(small, sizeof(small), "a/", 2), -1);
}

/* The hashed path of a name that could be a path (its path taken by another object's file or directory). */
static void test_path_hashed(void **state)
{
	char buf[TGT_KEY_REL_MAX], small[TGT_KEY_REL_MAX - 1];

	(void)state;
	assert_int_equal(tgt_key_path_hashed(buf, sizeof(buf), "a/b", 3), 0);
	assert_string_equal(buf, ".ft-keys/c1/c14cddc033f64b9dea80ea675cf280a015e672516090a5626781153dc68fea11");
	/* a name that is no path: the same file as tgt_key_path gives */
	assert_int_equal(tgt_key_path_hashed(buf, sizeof(buf), "a/", 2), 0);
	assert_string_equal(buf, ".ft-keys/b3/b3dda5b674f9ce730a37dee0a33bb31efeea2335f517774f6ea133d448df2178");
	assert_int_equal(tgt_key_path_hashed(small, sizeof(small), "a/b", 3), -1);
	assert_int_equal(tgt_key_path_hashed(buf, sizeof(buf), "a", FT_OBJ_NAME_MAX + 1), -1);
}

typedef struct {
	char names[4][64];
	int n;
} seen_t;

static int collect(void *arg, int dfd, const char *leaf, const char *name, size_t len)
{
	seen_t *s = arg;

	(void)dfd;
	assert_int_equal(strlen(leaf), TGT_KEY_HEX);
	assert_true(s->n < 4 && len < sizeof(s->names[0]));
	memcpy(s->names[s->n++], name, len + 1);
	return 0;
}

/* Makes the hashed file of name under bucket dir bdfd; with xattr_name, that name goes in its xattr. */
static int make_hashed(int bdfd, const char *name, const char *xattr_name)
{
	char rel[TGT_KEY_REL_MAX];

	assert_int_equal(tgt_key_path_hashed(rel, sizeof(rel), name, strlen(name)), 0);
	mkdirat(bdfd, TGT_KEYS_DIR, 0755);
	char dir[sizeof(TGT_KEYS_DIR) + 3];
	snprintf(dir, sizeof(dir), "%.*s", (int)(sizeof(TGT_KEYS_DIR) + 2), rel);
	mkdirat(bdfd, dir, 0755);
	int fd = openat(bdfd, rel, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	int rc = xattr_name ? tgt_key_fset(fd, xattr_name, strlen(xattr_name)) : 0;
	if (rc == 0 && xattr_name)
		assert_true(tgt_key_holds(fd, xattr_name, strlen(xattr_name)));
	close(fd);
	return rc;
}

static void test_walk(void **state)
{
	char dir[] = "/tmp/ft-test-keymap-XXXXXX";
	seen_t s = {0};

	(void)state;
	assert_non_null(mkdtemp(dir));
	int bdfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(bdfd >= 0);
	assert_int_equal(tgt_key_walk(bdfd, collect, &s), 0); /* no .ft-keys yet */
	assert_int_equal(s.n, 0);
	if (make_hashed(bdfd, "a/", "a/") != 0) {
		print_message("not checked here: the filesystem of /tmp refuses user xattrs\n");
		goto out;
	}
	make_hashed(bdfd, "x//y", "x//y");
	make_hashed(bdfd, "p/q", "p/q");   /* a name whose path was taken: an object like the others */
	make_hashed(bdfd, "b/", NULL);     /* no name: not an object */
	make_hashed(bdfd, "c/", "other/"); /* a name that does not hash to its file: refused */
	assert_int_equal(tgt_key_walk(bdfd, collect, &s), 0);
	assert_int_equal(s.n, 3);
	int seen = 0;
	for (int i = 0; i < s.n; i++)
		seen |= strcmp(s.names[i], "a/") == 0     ? 1
			: strcmp(s.names[i], "x//y") == 0 ? 2
			: strcmp(s.names[i], "p/q") == 0  ? 4
							  : 8;
	assert_int_equal(seen, 7);
out:
	close(bdfd);
	char cmd[sizeof(dir) + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths_kept),  cmocka_unit_test(test_names_hashed), cmocka_unit_test(test_path),
		cmocka_unit_test(test_path_hashed), cmocka_unit_test(test_walk),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
