/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of common/base/fdio: whole-buffer writes larger than one write(2) piece land byte for byte, at the right offsets. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_all_big),
		cmocka_unit_test(test_pwrite_all_big_at_offset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
