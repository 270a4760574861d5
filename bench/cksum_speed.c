/* SPDX-License-Identifier: Apache-2.0 */
/* Hashing speed of each bucket checksum type (GiB/s of one core's CPU time) through ft_cksum_*, as the target streams. */
/*
 * Build and run from the top of the tree, after make all:
 *   cc -O2 -D_GNU_SOURCE -Icommon -o build/cksum_speed bench/cksum_speed.c build/libft.a -lssl -lcrypto -lxxhash -lisal
 *   build/cksum_speed [buffer KiB, default 256] [GiB per pass, default 1] [passes, default 5]
 * Each pass hashes GiB bytes by feeding the buffer over and over in 64 KiB updates, as a target's
 * receive loop hashes what it just read (a buffer within the caches: the default; a buffer of
 * 65536 KiB and more measures hashing from memory instead). The types take turns within a pass
 * so that other load on the machine hits them alike. Prints the median over passes of the CPU
 * time (CLOCK_THREAD_CPUTIME_ID) per GiB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cksum.h"

#define CHUNK (64u << 10)
#define MAX_PASSES 64

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* CPU seconds to hash total bytes, len bytes of buf at a time, with type. */
static double pass(ft_cksum_type_t type, const unsigned char *buf, size_t len, size_t total)
{
	char hex[FT_CKSUM_HEX_MAX];
	ft_cksum_t c;
	double t0 = cpu_now();

	if (ft_cksum_init(&c, type) != 0) {
		fprintf(stderr, "cksum_speed: init %s failed\n", ft_cksum_name(type));
		exit(1);
	}
	for (size_t done = 0; done < total; done += len)
		for (size_t off = 0; off < len; off += CHUNK)
			ft_cksum_update(&c, buf + off, len - off < CHUNK ? len - off : CHUNK);
	ft_cksum_final(&c, hex);
	return cpu_now() - t0;
}

int main(int argc, char **argv)
{
	static const ft_cksum_type_t types[] = {FT_CKSUM_XXHASH, FT_CKSUM_XXH3,   FT_CKSUM_CRC32C,
						FT_CKSUM_MD5,    FT_CKSUM_SHA256, FT_CKSUM_SHA512};
	enum { NT = sizeof(types) / sizeof(types[0]) };
	size_t kib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
	size_t gib = argc > 2 ? strtoul(argv[2], NULL, 10) : 1;
	int passes = argc > 3 ? atoi(argv[3]) : 5;
	double secs[NT][MAX_PASSES];

	if (kib < 64 || gib < 1 || passes < 1 || passes > MAX_PASSES) {
		fprintf(stderr, "usage: cksum_speed [buffer KiB >= 64] [GiB >= 1] [passes 1..%d]\n", MAX_PASSES);
		return 2;
	}
	size_t len = kib << 10, total = gib << 30;
	unsigned char *buf = malloc(len);
	if (buf == NULL)
		return 1;
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	for (int p = 0; p < passes; p++)
		for (int i = 0; i < NT; i++) { /* each pass starts with the next type */
			int k = (i + p) % NT;
			secs[k][p] = pass(types[k], buf, len, total);
		}
	printf("%-8s %10s %10s   (buffer %zu KiB, %zu GiB a pass, median of %d)\n", "type", "GiB/s", "s/GiB", kib, gib,
	       passes);
	for (int k = 0; k < NT; k++) {
		qsort(secs[k], (size_t)passes, sizeof(secs[k][0]), cmp_double);
		double med = secs[k][passes / 2] / (double)gib;
		printf("%-8s %10.2f %10.4f\n", ft_cksum_name(types[k]), 1 / med, med);
	}
	free(buf);
	return 0;
}
