/* SPDX-License-Identifier: Apache-2.0 */
/* Erasure coding of objects (isa-l Reed-Solomon over a Cauchy matrix): slice files, encode, decode. */
#ifndef FT_EC_H
#define FT_EC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/cksum.h"
#include "base/names.h"
#include "core/lom.h"

/*
 * DESIGN
 * An object of size bytes is cut into D data slices of S = ceil(size / D) bytes each (slice i holds
 * bytes [i*S, (i+1)*S) of the object, the last one padded with zeros) and P parity slices of S
 * bytes computed from them; any D of the D+P slices give the object back. A replica is the whole
 * object as one "slice" (replica = 1, S = size).
 *
 * A slice file is self-describing:
 *   "FTEC" | u32 LE header length H | H bytes of JSON (ft_ec_meta_t) | u32 LE xxhash32 of all before | payload
 * The payload is S bytes; the header carries the payload's xxhash64 (slice_cksum) and the object's
 * metadata (LOM: size, checksum, version, ...), so a holder can check a slice by itself and a
 * restorer can rebuild the object and its metadata from any D slices.
 */

#define FT_EC_MAX_SLICES 32    /* D + P */
#define FT_EC_HDR_MAX (16384u) /* largest encoded header, framing included */

typedef struct {
	char provider[16];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	char obj[FT_OBJ_NAME_MAX + 1];
	int64_t bucket_created;             /* the bucket incarnation the slice belongs to */
	int data, parity;                   /* D, P (replicas: 0 and the number of replicas) */
	int idx;                            /* slice index 0..D+P-1; replica number for replicas */
	int replica;                        /* 1: the payload is the whole object */
	uint64_t slice_size;                /* payload bytes */
	char slice_cksum[FT_CKSUM_HEX_MAX]; /* xxhash64 of the payload */
	ft_lom_t lom;                       /* the object's metadata */
} ft_ec_meta_t;

/* Where a slice payload lives: fd and the offset its first byte is at (after the header). */
typedef struct {
	int fd; /* -1: absent (lost) */
	off_t off;
} ft_ec_io_t;

/* S for an object of size bytes in d data slices: ceil(size / d). */
uint64_t ft_ec_slice_size(uint64_t size, int d);
/* Whether d data and p parity slices are supported: 1 <= d, 1 <= p, d + p <= FT_EC_MAX_SLICES. */
int ft_ec_geometry_ok(int d, int p);

/* Encodes m as a framed header into buf; returns its length, or -1 if it does not fit or m is invalid. */
int ft_ec_hdr_encode(const ft_ec_meta_t *m, uint8_t *buf, size_t cap);
/*
 * Decodes a framed header from the start of buf. Returns 0 with *hdr_len (the payload offset),
 * 1 when buf is too short to tell (read more), -1 when it is corrupt.
 */
int ft_ec_hdr_decode(ft_ec_meta_t *m, const uint8_t *buf, size_t len, size_t *hdr_len);
/*
 * Reads and checks a whole slice file: header, payload length (the file is exactly header plus
 * slice_size bytes) and payload checksum. Returns 0 with m and *hdr_len filled, -EBADMSG for a
 * corrupt or truncated slice, another -errno for an I/O error.
 */
int ft_ec_slice_verify(int fd, ft_ec_meta_t *m, size_t *hdr_len);
/*
 * ft_ec_slice_verify for a slice in memory (len bytes at buf: framed header, then payload).
 * Returns 0 with m and *hdr_len filled, -EBADMSG when corrupt or of the wrong length, -ENOMEM.
 */
int ft_ec_slice_verify_mem(const uint8_t *buf, size_t len, ft_ec_meta_t *m, size_t *hdr_len);
/* xxhash64 hex of len bytes of fd at off; 0, -EIO when the file is shorter, -errno. */
int ft_ec_range_cksum(int fd, off_t off, uint64_t len, char hex[FT_CKSUM_HEX_MAX]);

/*
 * Encodes size bytes of src_fd (from offset 0) into d + p slice payloads written at out[i] (each
 * ft_ec_slice_size(size, d) bytes); cksum[i] gets the xxhash64 hex of payload i.
 * Returns 0, or -1 with err filled (nothing is cleaned up: the caller owns the fds).
 */
int ft_ec_encode(int src_fd, uint64_t size, int d, int p, const ft_ec_io_t *out, char (*cksum)[FT_CKSUM_HEX_MAX],
		 char *err, size_t cap);
/*
 * ft_ec_encode into memory: data slice i is read from src_fd into slices[i] (zeros past the
 * object's end), parity slice j computed into slices[d + j]; each buffer holds
 * ft_ec_slice_size(size, d) bytes (the caller's). cksum[i] gets the xxhash64 hex of slice i.
 * Returns 0, or -1 with err filled.
 */
int ft_ec_encode_mem(int src_fd, uint64_t size, int d, int p, uint8_t *const *slices, char (*cksum)[FT_CKSUM_HEX_MAX],
		     char *err, size_t cap);
/*
 * Rebuilds from the present payloads in[0..d+p) (fd < 0: absent; at least d present, each one
 * already verified): the object's size bytes into out_fd at offset 0 (out_fd < 0: not wanted), and
 * every slice i with rebuild != NULL and rebuild[i].fd >= 0 (its xxhash64 into rebuild_cksum[i]).
 * Returns 0, or -1 with err filled.
 */
int ft_ec_decode(uint64_t size, int d, int p, const ft_ec_io_t *in, int out_fd, const ft_ec_io_t *rebuild,
		 char (*rebuild_cksum)[FT_CKSUM_HEX_MAX], char *err, size_t cap);
/* Checksum of type over size bytes of fd from offset 0 (the object after a decode); 0 or -errno. */
int ft_ec_file_cksum(int fd, uint64_t size, ft_cksum_type_t type, char hex[FT_CKSUM_HEX_MAX]);

#endif
