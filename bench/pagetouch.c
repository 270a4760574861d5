/* SPDX-License-Identifier: Apache-2.0 */
/* What a fresh page costs on this machine, and checksumming a just-written file range through a mapping vs read back. */
/*
 * Build and run from the top of the tree, after make all:
 *   cc -O2 -D_GNU_SOURCE -Icommon -o build/pagetouch bench/pagetouch.c build/libft.a -lssl -lcrypto -lxxhash -lisal
 *   build/pagetouch [directory for the test file, default build]
 * 1. Anonymous memory: seconds per GiB of the first memset of a new mapping, of the next two on the same
 *    pages, and of the first on a new mapping again (on a VM whose balloon reports free pages to the host,
 *    pages the guest freed cost a fault in the host at their next first use).
 * 2. A file written in 1 MiB pwrites (new page-cache pages, as a cold GET's work file), each range
 *    checksummed (XXH64, as ft_cksum does) right after its write: through a read-only mapping of the
 *    file, or read back with pread into a 256 KiB buffer. Each way twice, alternating.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/cksum.h"

#define GIB (1024.0 * 1024 * 1024)
#define FILE_SIZE (512UL << 20)
#define WRITE_CHUNK (1UL << 20)
#define READ_CHUNK (256UL << 10)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void anon_touch(void)
{
	size_t n = 1UL << 30;
	for (int map = 0; map < 2; map++) {
		unsigned char *a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (a == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		for (int pass = 0; pass < (map == 0 ? 3 : 1); pass++) {
			double t = now();
			memset(a, pass + 1, n);
			printf("anonymous 1 GiB, mapping %d, memset %d: %.3f s/GiB\n", map + 1, pass + 1,
			       (now() - t) * GIB / (double)n);
		}
		munmap(a, n);
	}
}

/* One file written and checksummed range by range; mapped = through a mapping, else read back. */
static void file_pass(const char *dir, int mapped)
{
	char path[4096];
	unsigned char *wbuf = malloc(WRITE_CHUNK), *rbuf = malloc(READ_CHUNK);
	snprintf(path, sizeof(path), "%s/pagetouch.%d.tmp", dir, (int)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || wbuf == NULL || rbuf == NULL || posix_fallocate(fd, 0, FILE_SIZE) != 0) {
		perror(path);
		exit(1);
	}
	memset(wbuf, 7, WRITE_CHUNK);
	unsigned char *map = mapped ? mmap(NULL, FILE_SIZE, PROT_READ, MAP_SHARED, fd, 0) : NULL;
	if (map == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	ft_cksum_t ck;
	ft_cksum_init(&ck, FT_CKSUM_XXHASH);
	double tw = 0, th = 0;
	for (size_t pos = 0; pos < FILE_SIZE; pos += WRITE_CHUNK) {
		double t = now();
		if (pwrite(fd, wbuf, WRITE_CHUNK, (off_t)pos) != (ssize_t)WRITE_CHUNK) {
			perror("pwrite");
			exit(1);
		}
		tw += now() - t;
		t = now();
		if (mapped)
			ft_cksum_update(&ck, map + pos, WRITE_CHUNK);
		for (size_t off = 0; !mapped && off < WRITE_CHUNK; off += READ_CHUNK) {
			if (pread(fd, rbuf, READ_CHUNK, (off_t)(pos + off)) != (ssize_t)READ_CHUNK) {
				perror("pread");
				exit(1);
			}
			ft_cksum_update(&ck, rbuf, READ_CHUNK);
		}
		th += now() - t;
	}
	char hex[FT_CKSUM_HEX_MAX];
	ft_cksum_final(&ck, hex);
	printf("file %3lu MiB, checksum %-9s: write %.3f s/GiB, checksum %.3f s/GiB (%s)\n", FILE_SIZE >> 20,
	       mapped ? "mapped" : "read back", tw * GIB / FILE_SIZE, th * GIB / FILE_SIZE, hex);
	if (map != NULL)
		munmap(map, FILE_SIZE);
	close(fd);
	unlink(path);
	free(wbuf);
	free(rbuf);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "build";
	anon_touch();
	for (int i = 0; i < 4; i++)
		file_pass(dir, i % 2 == 0);
	return 0;
}
