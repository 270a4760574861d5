/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of common/base/fdio: whole-buffer writes and file copies land byte for byte, at the right offsets. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fdio.h"

#define BIG ((size_t)(512 << 10) + 4097) /* several 64 KiB pieces and a ragged end */

static uint8_t *pattern(size_t n, unsigned seed)
{
	uint8_t *p = malloc(n);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131u + seed) ^ (i >> 9));
	return p;
}

static int tmpfile_fd(void)
{
	char path[] = "/tmp/ft-fdio-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	return fd;
}

static void test_write_all_big(void **state)
{
	uint8_t *src = pattern(BIG, 7), *back = malloc(BIG);
	int fd = tmpfile_fd();

	(void)state;
	assert_int_equal(ft_write_all(fd, "hdr", 3), 0);
	assert_int_equal(ft_write_all(fd, src, BIG), 0);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), (off_t)(BIG + 3)); /* the file offset moved by all of it */
	assert_int_equal(ft_pread_all(fd, back, BIG, 3), 0);
	assert_memory_equal(back, src, BIG);
	close(fd);
	free(back);
	free(src);
}

static void test_pwrite_all_big_at_offset(void **state)
{
	uint8_t *src = pattern(BIG, 3), *back = malloc(BIG);
	int fd = tmpfile_fd();

	(void)state;
	assert_int_equal(ft_pwrite_all(fd, src, BIG, 1000), 0);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0); /* pwrite leaves the offset alone */
	assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)(BIG + 1000));
	assert_int_equal(ft_pread_all(fd, back, BIG, 1000), 0);
	assert_memory_equal(back, src, BIG);
	assert_int_equal(ft_pread_all(fd, back, 2, (off_t)(BIG + 999)), -EIO); /* past the end */
	close(fd);
	free(back);
	free(src);
}

/* len bytes of pattern seed at off in fd, read back equal. */
static void assert_pattern_at(int fd, off_t off, size_t len, unsigned seed, size_t from)
{
	uint8_t *want = pattern(from + len, seed), *back = malloc(len);

	assert_int_equal(ft_pread_all(fd, back, len, off), 0);
	assert_memory_equal(back, want + from, len);
	free(back);
	free(want);
}

/* Three pieces (one empty, one past a write(2) piece) land at the offset in order; the vector is walked past them. */
static void test_pwritev_all_and_iov_advance(void **state)
{
	uint8_t *p = pattern(BIG, 9);
	struct iovec v[4] = {{p, 10}, {p + 10, 0}, {p + 10, BIG - 20}, {p + BIG - 10, 10}}, *iov;
	int cnt, fd = tmpfile_fd();

	(void)state;
	assert_int_equal(ft_pwritev_all(fd, v, 4, 512), 0);
	assert_pattern_at(fd, 512, BIG, 9, 0);
	struct iovec w[3] = {{p, 10}, {p + 10, 20}, {p + 30, 5}};
	iov = w;
	cnt = 3;
	ft_iov_advance(&iov, &cnt, 15); /* past the first piece, into the second */
	assert_int_equal(cnt, 2);
	assert_ptr_equal(iov->iov_base, p + 15);
	assert_int_equal(iov->iov_len, 15);
	ft_iov_advance(&iov, &cnt, 20); /* to the end exactly */
	assert_int_equal(cnt, 0);
	close(fd);
	free(p);
}

/*
 * ft_copy_range from src (big bytes of pattern 5) to a new file: a range at given offsets, a range
 * at the file offset (which moves past it), and a source that ends first (-EIO).
 */
static void copy_checks(int src, size_t big)
{
	int dst = tmpfile_fd();

	assert_int_equal(ft_copy_range(src, 100, dst, 7000, big - 100), 0);
	assert_int_equal(lseek(dst, 0, SEEK_CUR), 0); /* explicit offsets leave the file offset alone */
	assert_pattern_at(dst, 7000, big - 100, 5, 100);
	assert_int_equal(lseek(dst, 3, SEEK_SET), 3);
	assert_int_equal(ft_copy_range(src, 0, dst, -1, 5000), 0);
	assert_int_equal(lseek(dst, 0, SEEK_CUR), 5003);
	assert_pattern_at(dst, 3, 5000, 5, 0);
	assert_int_equal(ft_copy_range(src, (off_t)big - 10, dst, 0, 20), -EIO);
	close(dst);
}

static void test_copy_range_same_filesystem(void **state)
{
	size_t big = (size_t)(2 << 20) + 333;
	uint8_t *p = pattern(big, 5);
	int src = tmpfile_fd();

	(void)state;
	assert_int_equal(ft_write_all(src, p, big), 0);
	copy_checks(src, big);
	close(src);
	free(p);
}

/* From a memfd (tmpfs) into /tmp: copy_file_range refuses across filesystem types, the copy goes through memory. */
static void test_copy_range_across_filesystems(void **state)
{
	size_t big = (size_t)(2 << 20) + 333; /* past the fallback's 1 MiB buffer */
	uint8_t *p = pattern(big, 5);
	int src = memfd_create("ft-fdio", MFD_CLOEXEC);

	(void)state;
	assert_true(src >= 0);
	assert_int_equal(ft_write_all(src, p, big), 0);
	copy_checks(src, big);
	close(src);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_all_big),
		cmocka_unit_test(test_pwrite_all_big_at_offset),
		cmocka_unit_test(test_copy_range_same_filesystem),
		cmocka_unit_test(test_pwritev_all_and_iov_advance),
		cmocka_unit_test(test_copy_range_across_filesystems),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
