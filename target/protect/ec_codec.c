/* SPDX-License-Identifier: Apache-2.0 */
/* Erasure coding of objects with isa-l: slice file headers, streaming encode and decode over fds. */
#include "protect/ec_codec.h"
#include "base/codec.h"
#include "base/fdio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/erasure_code.h>
#include <jansson.h>
#include <xxhash.h>

/*
 * DESIGN
 * Encode and decode stream in stripes of EC_CHUNK bytes per slice: stripe k takes bytes
 * [k*C, (k+1)*C) of every data slice (pread from the object at i*S + k*C), so memory stays at
 * (D+P) * EC_CHUNK whatever the object size. The coding matrix is isa-l's Cauchy matrix (identity
 * on top, so data slices are plain object bytes; every D x D submatrix is invertible). Decoding
 * inverts the rows of the first D present slices and computes what is missing (data slices for
 * the object, any slice asked for a rebuild) as one more ec_encode_data call per stripe.
 *
 * OWNERSHIP
 * Callers own every fd. Buffers are allocated per call and freed before returning.
 */

#define EC_MAGIC "FTEC"
#define EC_FRAME 8 /* magic + u32 length */
#define EC_TRAILER 4
#define EC_CHUNK (256u << 10)

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

uint64_t ft_ec_slice_size(uint64_t size, int d)
{
	return d > 0 ? (size + (uint64_t)d - 1) / (uint64_t)d : 0;
}

int ft_ec_geometry_ok(int d, int p)
{
	return d >= 1 && p >= 1 && d + p <= FT_EC_MAX_SLICES;
}

/* ---- header ---- */

static json_t *meta_to_json(const ft_ec_meta_t *m)
{
	uint8_t lom[FT_LOM_MAX];
	char lom_hex[2 * FT_LOM_MAX + 1], obj_hex[2 * FT_OBJ_NAME_MAX + 1];
	size_t obj_len = strnlen(m->obj, sizeof(m->obj));
	int n = ft_lom_encode(&m->lom, lom, sizeof(lom));

	if (n < 0 || obj_len == 0 || obj_len >= sizeof(m->obj))
		return NULL;
	ft_hex_encode(lom, (size_t)n, lom_hex);
	ft_hex_encode(m->obj, obj_len, obj_hex);
	return json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:i, s:b, s:I, s:s, s:s}", "provider", m->provider, "bucket",
			 m->bucket, "obj", obj_hex, "created", (json_int_t)m->bucket_created, "data", m->data, "parity",
			 m->parity, "idx", m->idx, "replica", m->replica, "slice_size", (json_int_t)m->slice_size,
			 "slice_cksum", m->slice_cksum, "lom", lom_hex);
}

int ft_ec_hdr_encode(const ft_ec_meta_t *m, uint8_t *buf, size_t cap)
{
	json_t *j = meta_to_json(m);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t len = text ? strlen(text) : 0;
	int rc = -1;

	json_decref(j);
	if (text == NULL || EC_FRAME + len + EC_TRAILER > cap || EC_FRAME + len + EC_TRAILER > FT_EC_HDR_MAX)
		goto out;
	memcpy(buf, EC_MAGIC, 4);
	put_u32(buf + 4, (uint32_t)len);
	memcpy(buf + EC_FRAME, text, len);
	put_u32(buf + EC_FRAME + len, XXH32(buf, EC_FRAME + len, 0));
	rc = (int)(EC_FRAME + len + EC_TRAILER);
out:
	free(text);
	return rc;
}

/* Copies a JSON string member into out[cap]; -1 when missing or too long. */
static int get_str(const json_t *j, const char *key, char *out, size_t cap)
{
	const char *s = json_string_value(json_object_get(j, key));

	if (s == NULL || strlen(s) >= cap)
		return -1;
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

static int get_int(const json_t *j, const char *key, json_int_t lo, json_int_t hi, json_int_t *out)
{
	const json_t *v = json_object_get(j, key);

	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

static int meta_from_json(ft_ec_meta_t *m, const json_t *j)
{
	char hex[2 * FT_LOM_MAX + 1];
	uint8_t lom[FT_LOM_MAX];
	json_int_t created, d, p, idx, size;
	const json_t *rep = json_object_get(j, "replica");
	long n;

	memset(m, 0, sizeof(*m));
	if (get_str(j, "provider", m->provider, sizeof(m->provider)) != 0 ||
	    get_str(j, "bucket", m->bucket, sizeof(m->bucket)) != 0 ||
	    get_str(j, "slice_cksum", m->slice_cksum, sizeof(m->slice_cksum)) != 0 || !json_is_boolean(rep))
		return -1;
	if (get_int(j, "created", INT64_MIN, INT64_MAX, &created) != 0 ||
	    get_int(j, "data", 0, FT_EC_MAX_SLICES, &d) != 0 || get_int(j, "parity", 0, FT_EC_MAX_SLICES, &p) != 0 ||
	    get_int(j, "idx", 0, FT_EC_MAX_SLICES - 1, &idx) != 0 || get_int(j, "slice_size", 0, INT64_MAX, &size) != 0)
		return -1;
	m->bucket_created = created;
	m->data = (int)d;
	m->parity = (int)p;
	m->idx = (int)idx;
	m->replica = json_is_true(rep);
	m->slice_size = (uint64_t)size;
	if (!m->replica && (!ft_ec_geometry_ok(m->data, m->parity) || m->idx >= m->data + m->parity))
		return -1;
	if (get_str(j, "obj", hex, sizeof(hex)) != 0)
		return -1;
	n = ft_hex_decode(hex, strlen(hex), m->obj, sizeof(m->obj) - 1, FT_HEX_LOWERCASE);
	if (n <= 0 || memchr(m->obj, '\0', (size_t)n) != NULL)
		return -1;
	m->obj[n] = '\0';
	if (get_str(j, "lom", hex, sizeof(hex)) != 0)
		return -1;
	n = ft_hex_decode(hex, strlen(hex), lom, sizeof(lom), FT_HEX_LOWERCASE);
	if (n < 0 || ft_lom_decode(&m->lom, lom, (size_t)n) != 0)
		return -1;
	if (m->replica ? m->slice_size != m->lom.size : m->slice_size != ft_ec_slice_size(m->lom.size, m->data))
		return -1;
	return 0;
}

int ft_ec_hdr_decode(ft_ec_meta_t *m, const uint8_t *buf, size_t len, size_t *hdr_len)
{
	uint32_t jlen;
	json_t *j;
	int rc;

	if (len < EC_FRAME)
		return 1;
	if (memcmp(buf, EC_MAGIC, 4) != 0)
		return -1;
	jlen = get_u32(buf + 4);
	if (EC_FRAME + (size_t)jlen + EC_TRAILER > FT_EC_HDR_MAX)
		return -1;
	if (len < EC_FRAME + (size_t)jlen + EC_TRAILER)
		return 1;
	if (XXH32(buf, EC_FRAME + jlen, 0) != get_u32(buf + EC_FRAME + jlen))
		return -1;
	j = json_loadb((const char *)buf + EC_FRAME, jlen, 0, NULL);
	rc = j != NULL && json_is_object(j) && meta_from_json(m, j) == 0 ? 0 : -1;
	json_decref(j);
	if (rc == 0)
		*hdr_len = EC_FRAME + jlen + EC_TRAILER;
	return rc;
}

/* ---- checksums of file ranges ---- */

static int range_digest(int fd, off_t off, uint64_t len, ft_cksum_type_t type, char hex[FT_CKSUM_HEX_MAX])
{
	ft_cksum_t ck;
	char *buf = malloc(EC_CHUNK);
	int rc = 0;

	hex[0] = '\0';
	if (buf == NULL || ft_cksum_init(&ck, type) != 0) {
		free(buf);
		return -ENOMEM;
	}
	while (len > 0 && rc == 0) {
		size_t n = len < EC_CHUNK ? (size_t)len : EC_CHUNK;
		rc = ft_pread_all(fd, buf, n, off);
		if (rc == 0)
			ft_cksum_update(&ck, buf, n);
		off += (off_t)n;
		len -= n;
	}
	if (rc == 0)
		ft_cksum_final(&ck, hex);
	else
		ft_cksum_abort(&ck);
	free(buf);
	return rc;
}

int ft_ec_range_cksum(int fd, off_t off, uint64_t len, char hex[FT_CKSUM_HEX_MAX])
{
	return range_digest(fd, off, len, FT_CKSUM_XXHASH, hex);
}

int ft_ec_file_cksum(int fd, uint64_t size, ft_cksum_type_t type, char hex[FT_CKSUM_HEX_MAX])
{
	return range_digest(fd, 0, size, type, hex);
}

int ft_ec_slice_verify(int fd, ft_ec_meta_t *m, size_t *hdr_len)
{
	uint8_t *hdr = malloc(FT_EC_HDR_MAX);
	char hex[FT_CKSUM_HEX_MAX];
	struct stat st;
	ssize_t n;
	int rc = -EBADMSG;

	if (hdr == NULL)
		return -ENOMEM;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		goto out;
	}
	do
		n = pread(fd, hdr, FT_EC_HDR_MAX, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		rc = -errno;
		goto out;
	}
	if (ft_ec_hdr_decode(m, hdr, (size_t)n, hdr_len) != 0)
		goto out;
	if ((uint64_t)st.st_size != *hdr_len + m->slice_size)
		goto out;
	rc = ft_ec_range_cksum(fd, (off_t)*hdr_len, m->slice_size, hex);
	if (rc == -EIO || (rc == 0 && strcmp(hex, m->slice_cksum) != 0))
		rc = -EBADMSG;
out:
	free(hdr);
	return rc;
}

int ft_ec_slice_verify_mem(const uint8_t *buf, size_t len, ft_ec_meta_t *m, size_t *hdr_len)
{
	char hex[FT_CKSUM_HEX_MAX];
	ft_cksum_t ck;

	if (ft_ec_hdr_decode(m, buf, len, hdr_len) != 0 || (uint64_t)len != *hdr_len + m->slice_size)
		return -EBADMSG;
	if (ft_cksum_init(&ck, FT_CKSUM_XXHASH) != 0)
		return -ENOMEM;
	ft_cksum_update(&ck, buf + *hdr_len, (size_t)m->slice_size);
	ft_cksum_final(&ck, hex);
	return strcmp(hex, m->slice_cksum) == 0 ? 0 : -EBADMSG;
}

/* ---- coding ---- */

typedef struct {
	int live;     /* running checksums: ck[0..live) */
	uint8_t *mem; /* nbuf * EC_CHUNK bytes: the stripe buffers */
	uint8_t *buf[FT_EC_MAX_SLICES * 2];
	ft_cksum_t ck[FT_EC_MAX_SLICES];
	uint8_t matrix[FT_EC_MAX_SLICES * FT_EC_MAX_SLICES];
	uint8_t tables[32 * FT_EC_MAX_SLICES * FT_EC_MAX_SLICES];
} ec_work_t;

/* Frees w (NULL is fine), aborting the checksums still running. */
static void work_free(ec_work_t *w)
{
	if (w == NULL)
		return;
	for (int i = 0; i < w->live; i++)
		ft_cksum_abort(&w->ck[i]);
	free(w->mem);
	free(w);
}

/*
 * A work area with nbuf stripe buffers and ncksum xxhash checksums started (ck[0..ncksum)).
 * NULL when out of memory. The caller frees it with work_free.
 */
static ec_work_t *work_new(int nbuf, int ncksum)
{
	ec_work_t *w = calloc(1, sizeof(*w));

	if (w == NULL || (w->mem = malloc((size_t)nbuf * EC_CHUNK)) == NULL)
		goto fail;
	for (int i = 0; i < nbuf; i++)
		w->buf[i] = w->mem + (size_t)i * EC_CHUNK;
	for (; w->live < ncksum; w->live++) {
		if (ft_cksum_init(&w->ck[w->live], FT_CKSUM_XXHASH) != 0)
			goto fail;
	}
	return w;
fail:
	work_free(w);
	return NULL;
}

/* Bytes of the stripe at off in a slice of s bytes. */
static size_t stripe_len(uint64_t s, uint64_t off)
{
	return s - off < EC_CHUNK ? (size_t)(s - off) : EC_CHUNK;
}

/* Reads the stripe of data slice i at off: object bytes, zeros past the end. */
static int read_data_stripe(int src_fd, uint64_t size, uint64_t s, int i, uint64_t off, size_t len, uint8_t *buf)
{
	uint64_t start = (uint64_t)i * s + off;
	size_t have = start >= size ? 0 : (size - start < len ? (size_t)(size - start) : len);

	if (have < len)
		memset(buf + have, 0, len - have);
	return have > 0 ? ft_pread_all(src_fd, buf, have, (off_t)start) : 0;
}

int ft_ec_encode(int src_fd, uint64_t size, int d, int p, const ft_ec_io_t *out, char (*cksum)[FT_CKSUM_HEX_MAX],
		 char *err, size_t cap)
{
	uint64_t s = ft_ec_slice_size(size, d);
	int n = d + p, rc = -1;
	ec_work_t *w = NULL;

	if (!ft_ec_geometry_ok(d, p) || (w = work_new(n, n)) == NULL) {
		snprintf(err, cap, ft_ec_geometry_ok(d, p) ? "out of memory" : "unsupported EC geometry %d+%d", d, p);
		goto out;
	}
	gf_gen_cauchy1_matrix(w->matrix, n, d);
	ec_init_tables(d, p, w->matrix + d * d, w->tables);
	for (uint64_t off = 0; off < s; off += EC_CHUNK) {
		size_t len = stripe_len(s, off);
		for (int i = 0; i < d; i++) {
			int e = read_data_stripe(src_fd, size, s, i, off, len, w->buf[i]);
			if (e != 0) {
				snprintf(err, cap, "read object at %" PRIu64 ": %s", (uint64_t)i * s + off,
					 e == -EIO ? "file shorter than its size" : strerror(-e));
				goto out;
			}
		}
		ec_encode_data((int)len, d, p, w->tables, w->buf, w->buf + d);
		for (int i = 0; i < n; i++) {
			int e = ft_pwrite_all(out[i].fd, w->buf[i], len, out[i].off + (off_t)off);
			if (e != 0) {
				snprintf(err, cap, "write slice %d: %s", i, strerror(-e));
				goto out;
			}
			ft_cksum_update(&w->ck[i], w->buf[i], len);
		}
	}
	for (int i = 0; i < n; i++)
		ft_cksum_final(&w->ck[i], cksum[i]);
	rc = 0;
out:
	work_free(w);
	return rc;
}

int ft_ec_encode_mem(int src_fd, uint64_t size, int d, int p, uint8_t *const *slices, char (*cksum)[FT_CKSUM_HEX_MAX],
		     char *err, size_t cap)
{
	uint64_t s = ft_ec_slice_size(size, d);
	int n = d + p, rc = -1;
	ec_work_t *w = NULL;

	if (!ft_ec_geometry_ok(d, p) || (w = calloc(1, sizeof(*w))) == NULL) {
		snprintf(err, cap, ft_ec_geometry_ok(d, p) ? "out of memory" : "unsupported EC geometry %d+%d", d, p);
		goto out;
	}
	for (int i = 0; i < d; i++) {
		int e = read_data_stripe(src_fd, size, s, i, 0, (size_t)s, slices[i]);
		if (e != 0) {
			snprintf(err, cap, "read object at %" PRIu64 ": %s", (uint64_t)i * s,
				 e == -EIO ? "file shorter than its size" : strerror(-e));
			goto out;
		}
	}
	gf_gen_cauchy1_matrix(w->matrix, n, d);
	ec_init_tables(d, p, w->matrix + d * d, w->tables);
	/* isa-l takes an int length: stripes of EC_CHUNK keep any s in range */
	for (uint64_t off = 0; off < s; off += EC_CHUNK) {
		uint8_t *in[FT_EC_MAX_SLICES], *out[FT_EC_MAX_SLICES];
		for (int i = 0; i < d; i++)
			in[i] = slices[i] + off;
		for (int j = 0; j < p; j++)
			out[j] = slices[d + j] + off;
		ec_encode_data((int)stripe_len(s, off), d, p, w->tables, in, out);
	}
	for (; w->live < n; w->live++) {
		if (ft_cksum_init(&w->ck[w->live], FT_CKSUM_XXHASH) != 0) {
			snprintf(err, cap, "out of memory");
			goto out;
		}
	}
	for (int i = 0; i < n; i++) {
		ft_cksum_update(&w->ck[i], slices[i], (size_t)s);
		ft_cksum_final(&w->ck[i], cksum[i]);
	}
	w->live = 0;
	rc = 0;
out:
	work_free(w);
	return rc;
}

/*
 * Builds the decode rows: for each wanted slice want[k], the row over the survivors surv[0..d)
 * that yields it. Returns 0, -1 when the survivors' matrix is singular (cannot happen with Cauchy).
 */
static int decode_rows(ec_work_t *w, int d, const int *surv, const int *want, int nwant, uint8_t *rows)
{
	uint8_t b[FT_EC_MAX_SLICES * FT_EC_MAX_SLICES], inv[FT_EC_MAX_SLICES * FT_EC_MAX_SLICES];

	for (int k = 0; k < d; k++)
		memcpy(b + k * d, w->matrix + surv[k] * d, (size_t)d);
	if (gf_invert_matrix(b, inv, d) != 0)
		return -1;
	for (int m = 0; m < nwant; m++) {
		const uint8_t *a = w->matrix + want[m] * d; /* the slice as a combination of data slices */
		for (int k = 0; k < d; k++) {
			uint8_t v = 0;
			for (int j = 0; j < d; j++)
				v ^= gf_mul(a[j], inv[j * d + k]);
			rows[m * d + k] = v;
		}
	}
	return 0;
}

/* Writes the object's part of data slice j's stripe at off. */
static int write_object_stripe(int out_fd, uint64_t size, uint64_t s, int j, uint64_t off, size_t len,
			       const uint8_t *buf)
{
	uint64_t start = (uint64_t)j * s + off;

	if (start >= size)
		return 0;
	return ft_pwrite_all(out_fd, buf, size - start < len ? (size_t)(size - start) : len, (off_t)start);
}

int ft_ec_decode(uint64_t size, int d, int p, const ft_ec_io_t *in, int out_fd, const ft_ec_io_t *rebuild,
		 char (*rebuild_cksum)[FT_CKSUM_HEX_MAX], char *err, size_t cap)
{
	uint64_t s = ft_ec_slice_size(size, d);
	int n = d + p, surv[FT_EC_MAX_SLICES], want[FT_EC_MAX_SLICES], slot[FT_EC_MAX_SLICES], pos[FT_EC_MAX_SLICES];
	int nsurv = 0, nwant = 0, rc = -1;
	uint8_t rows[FT_EC_MAX_SLICES * FT_EC_MAX_SLICES];
	ec_work_t *w = NULL;

	if (!ft_ec_geometry_ok(d, p)) {
		snprintf(err, cap, "unsupported EC geometry %d+%d", d, p);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		slot[i] = pos[i] = -1;
		if (in[i].fd >= 0 && nsurv < d) {
			pos[i] = nsurv;
			surv[nsurv++] = i;
		}
	}
	if (nsurv < d) {
		snprintf(err, cap, "%d of %d slices present, %d needed", nsurv, n, d);
		goto out;
	}
	/* Wanted: missing data slices (for the object) and slices asked for a rebuild. */
	for (int i = 0; i < n; i++) {
		int readable = pos[i] >= 0 && i < d; /* data survivors are read as they are */
		int asked = rebuild != NULL && rebuild[i].fd >= 0;
		if ((i < d && !readable && out_fd >= 0) || (asked && !readable)) {
			slot[i] = nwant;
			want[nwant++] = i;
		}
	}
	w = work_new(d + (nwant > 0 ? nwant : 1), n);
	if (w == NULL) {
		snprintf(err, cap, "out of memory");
		goto out;
	}
	gf_gen_cauchy1_matrix(w->matrix, n, d);
	if (nwant > 0) {
		if (decode_rows(w, d, surv, want, nwant, rows) != 0) {
			snprintf(err, cap, "singular decode matrix");
			goto out;
		}
		ec_init_tables(d, nwant, rows, w->tables);
	}
	for (uint64_t off = 0; off < s; off += EC_CHUNK) {
		size_t len = stripe_len(s, off);
		for (int k = 0; k < d; k++) {
			int e = ft_pread_all(in[surv[k]].fd, w->buf[k], len, in[surv[k]].off + (off_t)off);
			if (e != 0) {
				snprintf(err, cap, "read slice %d: %s", surv[k],
					 e == -EIO ? "shorter than its size" : strerror(-e));
				goto out;
			}
		}
		if (nwant > 0)
			ec_encode_data((int)len, d, nwant, w->tables, w->buf, w->buf + d);
		for (int i = 0; i < n; i++) {
			/* computed slices are in buf[d + slot], data survivors in buf[pos] */
			const uint8_t *b = slot[i] >= 0 ? w->buf[d + slot[i]] : pos[i] >= 0 ? w->buf[pos[i]] : NULL;
			int e = 0;
			if (i < d && out_fd >= 0)
				e = write_object_stripe(out_fd, size, s, i, off, len, b);
			if (e == 0 && rebuild != NULL && rebuild[i].fd >= 0) {
				e = ft_pwrite_all(rebuild[i].fd, b, len, rebuild[i].off + (off_t)off);
				ft_cksum_update(&w->ck[i], b, len);
			}
			if (e != 0) {
				snprintf(err, cap, "write %s %d: %s", i < d && out_fd >= 0 ? "object part" : "slice", i,
					 strerror(-e));
				goto out;
			}
		}
	}
	for (int i = 0; i < n; i++) {
		if (rebuild != NULL && rebuild[i].fd >= 0)
			ft_cksum_final(&w->ck[i], rebuild_cksum[i]);
	}
	rc = 0;
out:
	work_free(w);
	return rc;
}
