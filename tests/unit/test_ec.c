/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for erasure coding: slice headers, every loss pattern up to P slices, corrupt slices detected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "protect/ec_codec.h"

static int mem_file(const void *data, size_t len)
{
	int fd = memfd_create("ec-test", MFD_CLOEXEC);

	assert_true(fd >= 0);
	if (len > 0)
		assert_int_equal(pwrite(fd, data, len, 0), (ssize_t)len);
	return fd;
}

static uint8_t *file_bytes(int fd, size_t len)
{
	uint8_t *b = malloc(len + 1);

	assert_non_null(b);
	if (len > 0)
		assert_int_equal(pread(fd, b, len, 0), (ssize_t)len);
	return b;
}

static uint8_t *random_bytes(size_t len, unsigned seed)
{
	uint8_t *b = malloc(len + 1);

	assert_non_null(b);
	srand(seed);
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)rand();
	return b;
}

static void sample_meta(ft_ec_meta_t *m, uint64_t size, int d, int p, int idx)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->provider, sizeof(m->provider), "ais");
	snprintf(m->bucket, sizeof(m->bucket), "bck");
	snprintf(m->obj, sizeof(m->obj), "dir/obj \xc3\xa9 %d", idx);
	m->bucket_created = 1234567890123LL;
	m->data = d;
	m->parity = p;
	m->idx = idx;
	m->slice_size = ft_ec_slice_size(size, d);
	snprintf(m->slice_cksum, sizeof(m->slice_cksum), "0123456789abcdef");
	m->lom.size = size;
	m->lom.cksum_type = FT_CKSUM_MD5;
	snprintf(m->lom.cksum, sizeof(m->lom.cksum), "d41d8cd98f00b204e9800998ecf8427e");
	snprintf(m->lom.version, sizeof(m->lom.version), "7");
	snprintf(m->lom.content_type, sizeof(m->lom.content_type), "text/plain");
	snprintf(m->lom.user_meta, sizeof(m->lom.user_meta), "x-amz-meta-a:b\n");
	m->lom.mtime_ns = 42;
}

static void test_geometry(void **state)
{
	(void)state;
	assert_int_equal(ft_ec_slice_size(0, 2), 0);
	assert_int_equal(ft_ec_slice_size(1, 2), 1);
	assert_int_equal(ft_ec_slice_size(10, 2), 5);
	assert_int_equal(ft_ec_slice_size(11, 2), 6);
	assert_int_equal(ft_ec_slice_size(11, 4), 3);
	assert_true(ft_ec_geometry_ok(2, 1));
	assert_true(ft_ec_geometry_ok(16, 16));
	assert_false(ft_ec_geometry_ok(0, 1));
	assert_false(ft_ec_geometry_ok(2, 0));
	assert_false(ft_ec_geometry_ok(20, 13));
}

static void test_header_round_trip(void **state)
{
	uint8_t buf[FT_EC_HDR_MAX];
	ft_ec_meta_t m, out;
	size_t hlen = 0;
	int n;

	(void)state;
	sample_meta(&m, 1001, 3, 2, 4);
	n = ft_ec_hdr_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(ft_ec_hdr_decode(&out, buf, (size_t)n, &hlen), 0);
	assert_int_equal(hlen, (size_t)n);
	assert_string_equal(out.provider, "ais");
	assert_string_equal(out.bucket, "bck");
	assert_string_equal(out.obj, m.obj);
	assert_int_equal(out.bucket_created, m.bucket_created);
	assert_int_equal(out.data, 3);
	assert_int_equal(out.parity, 2);
	assert_int_equal(out.idx, 4);
	assert_int_equal(out.replica, 0);
	assert_int_equal(out.slice_size, 334);
	assert_string_equal(out.slice_cksum, m.slice_cksum);
	assert_int_equal(out.lom.size, 1001);
	assert_int_equal(out.lom.cksum_type, FT_CKSUM_MD5);
	assert_string_equal(out.lom.cksum, m.lom.cksum);
	assert_string_equal(out.lom.version, "7");
	assert_string_equal(out.lom.content_type, "text/plain");
	assert_string_equal(out.lom.user_meta, "x-amz-meta-a:b\n");
	assert_int_equal(out.lom.mtime_ns, 42);
	/* trailing payload bytes do not matter */
	memset(buf + n, 0xee, 100);
	assert_int_equal(ft_ec_hdr_decode(&out, buf, (size_t)n + 100, &hlen), 0);
	assert_int_equal(hlen, (size_t)n);

	/* a replica: the payload is the whole object */
	m.replica = 1;
	m.data = 0;
	m.parity = 2;
	m.idx = 1;
	m.slice_size = 1001;
	n = ft_ec_hdr_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(ft_ec_hdr_decode(&out, buf, (size_t)n, &hlen), 0);
	assert_int_equal(out.replica, 1);
	assert_int_equal(out.slice_size, 1001);
	/* inconsistent sizes are refused by the encoder's counterpart */
	m.slice_size = 1000;
	n = ft_ec_hdr_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(ft_ec_hdr_decode(&out, buf, (size_t)n, &hlen), -1);
	/* too small a buffer */
	sample_meta(&m, 10, 2, 1, 0);
	assert_int_equal(ft_ec_hdr_encode(&m, buf, 20), -1);
}

static void test_header_damage(void **state)
{
	uint8_t buf[FT_EC_HDR_MAX], bad[FT_EC_HDR_MAX];
	ft_ec_meta_t m, out;
	size_t hlen;
	int n;

	(void)state;
	sample_meta(&m, 77, 2, 1, 2);
	n = ft_ec_hdr_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			memcpy(bad, buf, (size_t)n);
			bad[i] ^= (uint8_t)(1u << bit);
			int rc = ft_ec_hdr_decode(&out, bad, (size_t)n, &hlen);
			/* a flip in the length may ask for more bytes; never a success */
			assert_true(rc == -1 || rc == 1);
		}
	}
	for (int len = 0; len < n; len++)
		assert_int_equal(ft_ec_hdr_decode(&out, buf, (size_t)len, &hlen), 1);
}

/* Encodes data into n memfds; returns the payloads (kept for comparison) in orig[i]. */
static void encode_all(const uint8_t *data, size_t size, int d, int p, int *fds, uint8_t **orig,
		       char (*ck)[FT_CKSUM_HEX_MAX])
{
	ft_ec_io_t out[FT_EC_MAX_SLICES];
	char err[256] = "";
	int src = mem_file(data, size);
	uint64_t s = ft_ec_slice_size(size, d);

	for (int i = 0; i < d + p; i++) {
		fds[i] = mem_file(NULL, 0);
		out[i].fd = fds[i];
		out[i].off = 0;
	}
	assert_int_equal(ft_ec_encode(src, size, d, p, out, ck, err, sizeof(err)), 0);
	for (int i = 0; i < d + p; i++) {
		char hex[FT_CKSUM_HEX_MAX];
		assert_int_equal(lseek(fds[i], 0, SEEK_END), (off_t)s);
		orig[i] = file_bytes(fds[i], s);
		assert_int_equal(ft_ec_range_cksum(fds[i], 0, s, hex), 0);
		assert_string_equal(hex, ck[i]);
	}
	/* data slices are the object's bytes, zero padded */
	for (int i = 0; i < d; i++) {
		for (uint64_t k = 0; k < s; k++) {
			uint64_t at = (uint64_t)i * s + k;
			assert_int_equal(orig[i][k], at < size ? data[at] : 0);
		}
	}
	/* the in-memory encoder (the PUT path) gives the same slices and checksums */
	uint8_t *mem[FT_EC_MAX_SLICES];
	char mck[FT_EC_MAX_SLICES][FT_CKSUM_HEX_MAX];
	for (int i = 0; i < d + p; i++) {
		mem[i] = malloc(s + 1);
		assert_non_null(mem[i]);
		memset(mem[i], 0xA5, s + 1); /* padding must be written, not left */
	}
	assert_int_equal(ft_ec_encode_mem(src, size, d, p, mem, mck, err, sizeof(err)), 0);
	for (int i = 0; i < d + p; i++) {
		assert_memory_equal(mem[i], orig[i], s);
		assert_string_equal(mck[i], ck[i]);
		free(mem[i]);
	}
	close(src);
}

/* Every set of at most p lost slices: the object comes back exactly, and so do the lost slices. */
static void check_all_losses(size_t size, int d, int p, unsigned seed)
{
	uint8_t *data = random_bytes(size, seed), *orig[FT_EC_MAX_SLICES];
	char ck[FT_EC_MAX_SLICES][FT_CKSUM_HEX_MAX], rck[FT_EC_MAX_SLICES][FT_CKSUM_HEX_MAX];
	int fds[FT_EC_MAX_SLICES], n = d + p, tried = 0;
	uint64_t s = ft_ec_slice_size(size, d);

	encode_all(data, size, d, p, fds, orig, ck);
	for (unsigned mask = 0; mask < (1u << n); mask++) {
		ft_ec_io_t in[FT_EC_MAX_SLICES], rebuild[FT_EC_MAX_SLICES];
		char err[256] = "";
		int lost = __builtin_popcount(mask);
		if (lost > p)
			continue;
		for (int i = 0; i < n; i++) {
			int gone = (mask >> i) & 1;
			in[i].fd = gone ? -1 : fds[i];
			in[i].off = 0;
			rebuild[i].fd = gone ? mem_file(NULL, 0) : -1;
			rebuild[i].off = 0;
		}
		int out = mem_file(NULL, 0);
		assert_int_equal(ft_ec_decode(size, d, p, in, out, rebuild, rck, err, sizeof(err)), 0);
		uint8_t *got = file_bytes(out, size);
		assert_int_equal(lseek(out, 0, SEEK_END), (off_t)size);
		assert_memory_equal(got, data, size);
		free(got);
		close(out);
		for (int i = 0; i < n; i++) {
			if (rebuild[i].fd < 0)
				continue;
			uint8_t *sl = file_bytes(rebuild[i].fd, s);
			assert_memory_equal(sl, orig[i], s);
			assert_string_equal(rck[i], ck[i]);
			free(sl);
			close(rebuild[i].fd);
		}
		tried++;
	}
	assert_true(tried > p);
	for (int i = 0; i < n; i++) {
		free(orig[i]);
		close(fds[i]);
	}
	free(data);
}

static void test_every_loss(void **state)
{
	static const int geo[][2] = {{1, 1}, {2, 1}, {2, 2}, {3, 2}, {4, 2}, {6, 3}};
	static const size_t sizes[] = {1, 2, 5, 4096, 100003, (256u << 10) * 3 + 17};

	(void)state;
	for (size_t g = 0; g < sizeof(geo) / sizeof(geo[0]); g++)
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
			check_all_losses(sizes[k], geo[g][0], geo[g][1], (unsigned)(g * 31 + k));
}

static void test_empty_object(void **state)
{
	(void)state;
	check_all_losses(0, 2, 1, 1);
}

static void test_too_many_lost(void **state)
{
	uint8_t *data = random_bytes(5000, 9), *orig[FT_EC_MAX_SLICES];
	char ck[FT_EC_MAX_SLICES][FT_CKSUM_HEX_MAX], err[256] = "";
	ft_ec_io_t in[FT_EC_MAX_SLICES];
	int fds[FT_EC_MAX_SLICES];

	(void)state;
	encode_all(data, 5000, 3, 2, fds, orig, ck);
	for (int i = 0; i < 5; i++) {
		in[i].fd = i == 0 || i == 2 || i == 4 ? -1 : fds[i];
		in[i].off = 0;
	}
	int out = mem_file(NULL, 0);
	assert_int_equal(ft_ec_decode(5000, 3, 2, in, out, NULL, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "2 of 5 slices present, 3 needed"));
	close(out);
	for (int i = 0; i < 5; i++) {
		free(orig[i]);
		close(fds[i]);
	}
	free(data);
}

/* A slice file: header then payload, as holders store them. */
static int slice_file(const ft_ec_meta_t *m, const uint8_t *payload)
{
	uint8_t hdr[FT_EC_HDR_MAX];
	int n = ft_ec_hdr_encode(m, hdr, sizeof(hdr));
	int fd = mem_file(hdr, (size_t)n);

	assert_true(n > 0);
	if (m->slice_size > 0)
		assert_int_equal(pwrite(fd, payload, m->slice_size, n), (ssize_t)m->slice_size);
	return fd;
}

/*
 * Corrupt slices (a flipped payload byte, a flipped header byte, a truncated or extended file) fail
 * verification; treated as lost, the object still decodes exactly from the good ones.
 */
static void test_corrupt_slices_detected(void **state)
{
	const size_t size = 300001;
	const int d = 2, p = 2, n = 4;
	uint8_t *data = random_bytes(size, 5), *orig[FT_EC_MAX_SLICES];
	char ck[FT_EC_MAX_SLICES][FT_CKSUM_HEX_MAX], err[256] = "";
	int raw[FT_EC_MAX_SLICES], files[FT_EC_MAX_SLICES];
	ft_ec_io_t in[FT_EC_MAX_SLICES];
	ft_ec_meta_t m, got;
	size_t hlen = 0;

	(void)state;
	encode_all(data, size, d, p, raw, orig, ck);
	for (int i = 0; i < n; i++) {
		sample_meta(&m, size, d, p, i);
		memcpy(m.slice_cksum, ck[i], sizeof(m.slice_cksum));
		files[i] = slice_file(&m, orig[i]);
		assert_int_equal(ft_ec_slice_verify(files[i], &got, &hlen), 0);
		assert_int_equal(got.idx, i);
	}
	uint8_t b;
	/* slice 0: one payload byte flipped */
	assert_int_equal(pread(files[0], &b, 1, (off_t)hlen + 12345), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(files[0], &b, 1, (off_t)hlen + 12345), 1);
	assert_int_equal(ft_ec_slice_verify(files[0], &got, &hlen), -EBADMSG);
	/* slice 3: truncated by one byte, then restored and extended by one */
	off_t end = lseek(files[3], 0, SEEK_END);
	assert_int_equal(ftruncate(files[3], end - 1), 0);
	assert_int_equal(ft_ec_slice_verify(files[3], &got, &hlen), -EBADMSG);
	assert_int_equal(ftruncate(files[3], end + 1), 0);
	assert_int_equal(ft_ec_slice_verify(files[3], &got, &hlen), -EBADMSG);
	/* a header byte of slice 2 flipped on a copy */
	sample_meta(&m, size, d, p, 2);
	memcpy(m.slice_cksum, ck[2], sizeof(m.slice_cksum));
	int hdr_bad = slice_file(&m, orig[2]);
	assert_int_equal(pread(hdr_bad, &b, 1, 20), 1);
	b ^= 1;
	assert_int_equal(pwrite(hdr_bad, &b, 1, 20), 1);
	assert_int_equal(ft_ec_slice_verify(hdr_bad, &got, &hlen), -EBADMSG);
	close(hdr_bad);

	/* what a restorer does: verify each, drop the bad ones, decode from the rest */
	int good = 0;
	for (int i = 0; i < n; i++) {
		in[i].fd = ft_ec_slice_verify(files[i], &got, &hlen) == 0 ? files[i] : -1;
		in[i].off = (off_t)hlen;
		good += in[i].fd >= 0;
	}
	assert_int_equal(good, 2);
	int out = mem_file(NULL, 0);
	assert_int_equal(ft_ec_decode(size, d, p, in, out, NULL, NULL, err, sizeof(err)), 0);
	uint8_t *back = file_bytes(out, size);
	assert_memory_equal(back, data, size);
	char hex[FT_CKSUM_HEX_MAX], want[FT_CKSUM_HEX_MAX];
	int src = mem_file(data, size);
	assert_int_equal(ft_ec_file_cksum(out, size, FT_CKSUM_MD5, hex), 0);
	assert_int_equal(ft_ec_file_cksum(src, size, FT_CKSUM_MD5, want), 0);
	assert_string_equal(hex, want);
	assert_int_equal(strlen(hex), 32);
	close(src);
	free(back);
	close(out);
	for (int i = 0; i < n; i++) {
		close(files[i]);
		close(raw[i]);
		free(orig[i]);
	}
	free(data);
}

static void test_short_source_is_an_error(void **state)
{
	uint8_t data[100] = {0};
	char ck[FT_EC_MAX_SLICES][FT_CKSUM_HEX_MAX], err[256] = "";
	ft_ec_io_t out[3];
	int src = mem_file(data, sizeof(data));

	(void)state;
	for (int i = 0; i < 3; i++) {
		out[i].fd = mem_file(NULL, 0);
		out[i].off = 0;
	}
	assert_int_equal(ft_ec_encode(src, 1000, 2, 1, out, ck, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "shorter"));
	assert_int_equal(ft_ec_encode(src, 100, 0, 1, out, ck, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unsupported"));
	uint8_t b0[500], b1[500], b2[500], *mem[3] = {b0, b1, b2};
	err[0] = '\0';
	assert_int_equal(ft_ec_encode_mem(src, 1000, 2, 1, mem, ck, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "shorter"));
	assert_int_equal(ft_ec_encode_mem(src, 100, 0, 1, mem, ck, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unsupported"));
	for (int i = 0; i < 3; i++)
		close(out[i].fd);
	close(src);
}

/* A slice in memory (header, payload): good as built; a changed payload byte, one byte less or more: corrupt. */
static void test_slice_verify_mem(void **state)
{
	const size_t size = 10001;
	uint8_t *data = random_bytes(size, 7), *buf = malloc(FT_EC_HDR_MAX + size + 1);
	ft_ec_meta_t *m = malloc(sizeof(*m)), *got = malloc(sizeof(*got));
	size_t hlen = 0;
	int fd = mem_file(data, size);

	(void)state;
	assert_non_null(buf);
	assert_non_null(m);
	assert_non_null(got);
	sample_meta(m, size, 1, 1, 0);
	m->slice_size = size;
	assert_int_equal(ft_ec_range_cksum(fd, 0, size, m->slice_cksum), 0);
	int h = ft_ec_hdr_encode(m, buf, FT_EC_HDR_MAX);
	assert_true(h > 0);
	memcpy(buf + h, data, size);
	assert_int_equal(ft_ec_slice_verify_mem(buf, (size_t)h + size, got, &hlen), 0);
	assert_int_equal(hlen, (size_t)h);
	assert_int_equal(got->slice_size, size);
	assert_string_equal(got->slice_cksum, m->slice_cksum);
	assert_int_equal(ft_ec_slice_verify_mem(buf, (size_t)h + size - 1, got, &hlen), -EBADMSG);
	buf[(size_t)h + size] = 0;
	assert_int_equal(ft_ec_slice_verify_mem(buf, (size_t)h + size + 1, got, &hlen), -EBADMSG);
	buf[h + 5] ^= 0x40;
	assert_int_equal(ft_ec_slice_verify_mem(buf, (size_t)h + size, got, &hlen), -EBADMSG);
	buf[h + 5] ^= 0x40;
	buf[3] ^= 1; /* the header's magic */
	assert_int_equal(ft_ec_slice_verify_mem(buf, (size_t)h + size, got, &hlen), -EBADMSG);
	close(fd);
	free(got);
	free(m);
	free(buf);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_header_round_trip),
		cmocka_unit_test(test_header_damage),
		cmocka_unit_test(test_every_loss),
		cmocka_unit_test(test_empty_object),
		cmocka_unit_test(test_too_many_lost),
		cmocka_unit_test(test_corrupt_slices_detected),
		cmocka_unit_test(test_short_source_is_an_error),
		cmocka_unit_test(test_slice_verify_mem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
