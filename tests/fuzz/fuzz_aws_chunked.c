/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of the aws-chunked decoder (proxy/s3/chunked.c) in its three forms, checked against a reference decoder. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "s3/chunked.h"

/*
 * Every input is fed to the decoder in pieces of arbitrary sizes (from a generator seeded by the
 * input), with an output buffer of exactly the piece's size, so any write past it is an ASan
 * report. The result must match a reference decoder written here from the format (whole buffer,
 * one pass, OpenSSL's one-shot HMAC and SHA-256): the same verdict at the same byte, the same
 * payload bytes handed out. In particular the decoder accepts (returns 1) exactly when every chunk
 * is well framed and carries the right chained signature, the final chunk ends the body and
 * nothing follows it.
 *
 * The trailer forms too: after the final chunk, the announced trailer line, (signed form) its
 * signature line chained from the final chunk's signature, and an empty line; nothing else.
 *
 * Input: byte 0 bits 1-2 choose the form (0 and 3 signed, 1 signed with a trailer, 2 unsigned
 * with a trailer); bit 0 the mode. Even: the rest is the body as is (the seeds are valid bodies).
 * Odd: the rest is a payload that the harness signs into a valid body (chunk sizes from bytes
 * 1..4), then mutates as byte 5 says (none, flip a bit, cut, insert, append, uppercase a
 * signature) at a place bytes 6..7 say.
 */

#define DATE "20130524T000000Z"
#define SCOPE "20130524/us-east-1/s3/aws4_request"
#define SEED_SIG "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define EXT ";chunk-signature="
#define MAX_BODY (1u << 20)
#define TRAILER "x-amz-checksum-crc32"
#define TRAILER_SIG "x-amz-trailer-signature"
#define HEADER_MAX 128
#define TRAILER_LINE_MAX 256
#define TRAILER_VALUE_MAX 160

static ft_chunked_mode_t form; /* of the current input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ft_sigv4_auth_t auth;

static void hmac(const void *key, size_t key_len, const char *msg, uint8_t out[32])
{
	unsigned int n = 32;

	if (HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, strlen(msg), out, &n) == NULL)
		abort();
}

static void to_hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* The AWS documentation's example request: its signing key, date, scope and seed signature. */
static void auth_init(void)
{
	uint8_t k[32];

	hmac("AWS4" SECRET, strlen("AWS4" SECRET), "20130524", k);
	hmac(k, 32, "us-east-1", k);
	hmac(k, 32, "s3", k);
	hmac(k, 32, "aws4_request", auth.signing_key);
	memcpy(auth.amz_date, DATE, sizeof(DATE));
	memcpy(auth.scope, SCOPE, sizeof(SCOPE));
	memcpy(auth.seed_signature, SEED_SIG, sizeof(SEED_SIG));
}

/* The signature of a chunk holding data[0..n) after the chunk signed prev (64 hex digits, lowercase). */
static void chunk_sig(const char *prev, const uint8_t *data, size_t n, char out[65])
{
	char sts[512], hash[65];
	uint8_t md[32], mac[32];

	SHA256(data, n, md);
	to_hex(md, 32, hash);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n" DATE "\n" SCOPE "\n%.64s\n" EMPTY_SHA256 "\n%s", prev,
		 hash);
	hmac(auth.signing_key, 32, sts, mac);
	to_hex(mac, 32, out);
}

/* The trailer signature of "TRAILER:value" after the final chunk signed prev. */
static void trailer_sig(const char *prev, const char *value, size_t n, char out[65])
{
	char sts[512], canon[TRAILER_LINE_MAX + 64], hash[65];
	uint8_t md[32], mac[32];
	int len = snprintf(canon, sizeof(canon), TRAILER ":%.*s\n", (int)n, value);

	SHA256((const uint8_t *)canon, (size_t)len, md);
	to_hex(md, 32, hash);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-TRAILER\n" DATE "\n" SCOPE "\n%.64s\n%s", prev, hash);
	hmac(auth.signing_key, 32, sts, mac);
	to_hex(mac, 32, out);
}

/* ---- the reference decoder ---- */

typedef struct {
	int rc;         /* 1 complete, 0 incomplete, -1 framing error, -2 signature mismatch */
	uint8_t *out;   /* the payload bytes handed out before the verdict (malloc'd) */
	size_t out_len; /* their count */
} ref_t;

static int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parses the header line b[0..n) (without CR LF); 0 with *size and sig (lowercased), or -1. */
static int ref_header(const uint8_t *b, size_t n, uint64_t *size, char sig[65])
{
	size_t h = 0;

	*size = 0;
	while (h < n && hexval(b[h]) >= 0) {
		*size = *size * 16 + (uint64_t)hexval(b[h]);
		h++;
	}
	if (form == FT_CHUNKED_UNSIGNED_TRAILER)
		return h == 0 || h > 16 || n != h ? -1 : 0;
	if (h == 0 || h > 16 || n != h + strlen(EXT) + 64 || memcmp(b + h, EXT, strlen(EXT)) != 0)
		return -1;
	for (size_t i = 0; i < 64; i++) {
		uint8_t c = b[h + strlen(EXT) + i];

		if (hexval(c) < 0)
			return -1;
		sig[i] = (char)(c >= 'A' && c <= 'F' ? c + 32 : c);
	}
	sig[64] = '\0';
	return 0;
}

/* b[0..n) without spaces and tabs around it: start in *b, length returned. */
static size_t ref_trim(const uint8_t **b, size_t n)
{
	while (n > 0 && (**b == ' ' || **b == '\t')) {
		(*b)++;
		n--;
	}
	while (n > 0 && ((*b)[n - 1] == ' ' || (*b)[n - 1] == '\t'))
		n--;
	return n;
}

static bool ref_name_is(const uint8_t *b, size_t n, const char *name)
{
	if (n != strlen(name))
		return false;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = b[i] >= 'A' && b[i] <= 'Z' ? (uint8_t)(b[i] + 32) : b[i];
		if (c != (uint8_t)name[i])
			return false;
	}
	return true;
}

/* The trailer part from in[i..len), after the final chunk signed prev: the verdict. */
static int ref_trailer(const uint8_t *in, size_t len, size_t i, const char *prev)
{
	char value[TRAILER_VALUE_MAX + 1];
	size_t value_n = 0;
	bool seen = false, signed_ok = false, sig = form == FT_CHUNKED_SIGNED_TRAILER;

	for (;;) {
		const uint8_t *lf = i < len ? memchr(in + i, '\n', len - i) : NULL;
		size_t line = lf ? (size_t)(lf - (in + i)) : len - i;
		const uint8_t *colon, *name, *val;
		size_t name_n, val_n;

		if (line > TRAILER_LINE_MAX)
			return -1;
		if (lf == NULL)
			return 0;
		if (line == 0 || in[i + line - 1] != '\r')
			return -1;
		line--;
		if (line == 0) {
			if (!seen || (sig && !signed_ok))
				return -1;
			return i + 2 == len ? 1 : -1;
		}
		colon = memchr(in + i, ':', line);
		if (colon == NULL || signed_ok)
			return -1;
		name = in + i;
		name_n = ref_trim(&name, (size_t)(colon - name));
		val = colon + 1;
		val_n = ref_trim(&val, (size_t)(in + i + line - val));
		if (!seen) {
			if (!ref_name_is(name, name_n, TRAILER) || val_n == 0 || val_n > TRAILER_VALUE_MAX ||
			    memchr(val, 0, val_n) != NULL)
				return -1;
			memcpy(value, val, val_n);
			value_n = val_n;
			seen = true;
		} else {
			char want[65], got[65];

			if (!sig || !ref_name_is(name, name_n, TRAILER_SIG) || val_n != 64)
				return -1;
			for (size_t k = 0; k < 64; k++) {
				if (hexval(val[k]) < 0)
					return -1;
				got[k] = (char)(val[k] >= 'A' && val[k] <= 'F' ? val[k] + 32 : val[k]);
			}
			trailer_sig(prev, value, value_n, want);
			if (memcmp(want, got, 64) != 0)
				return -2;
			signed_ok = true;
		}
		i += line + 2;
	}
}

/*
 * The decoder's rules, in stream order: a header line of at most 128 bytes with its CR ends at
 * its LF; data bytes are handed out as they come; a chunk's signature is checked at the LF after
 * its data; after the final (size 0) chunk no byte may follow.
 */
static void ref_decode(const uint8_t *in, size_t len, ref_t *r)
{
	char prev[65], sig[65];
	size_t i = 0;

	memcpy(prev, SEED_SIG, sizeof(prev));
	r->out = malloc(len + 1);
	r->out_len = 0;
	if (r->out == NULL)
		abort();
	for (;;) {
		const uint8_t *lf;
		size_t line, avail;
		uint64_t size;
		char want[65];
		size_t start;

		if (i == len) {
			r->rc = 0;
			return;
		}
		/* header */
		avail = len - i;
		lf = memchr(in + i, '\n', avail);
		line = lf ? (size_t)(lf - (in + i)) : avail;
		if (line > HEADER_MAX) {
			r->rc = -1; /* oversize: refused at its 129th byte */
			return;
		}
		if (lf == NULL) {
			r->rc = 0;
			return;
		}
		if (line == 0 || in[i + line - 1] != '\r' || ref_header(in + i, line - 1, &size, sig) != 0) {
			r->rc = -1;
			return;
		}
		i += line + 1;
		if (size == 0 && form != FT_CHUNKED_SIGNED) {
			/* the trailer follows the final chunk's header; its signature first (signed form) */
			if (form == FT_CHUNKED_SIGNED_TRAILER) {
				char want[65];

				chunk_sig(prev, NULL, 0, want);
				if (memcmp(want, sig, 64) != 0) {
					r->rc = -2;
					return;
				}
				memcpy(prev, sig, sizeof(prev));
			}
			r->rc = ref_trailer(in, len, i, prev);
			return;
		}
		/* data */
		start = r->out_len;
		avail = len - i;
		if ((uint64_t)avail < size) {
			memcpy(r->out + r->out_len, in + i, avail);
			r->out_len += avail;
			r->rc = 0;
			return;
		}
		memcpy(r->out + r->out_len, in + i, (size_t)size);
		r->out_len += (size_t)size;
		i += (size_t)size;
		/* CR LF, then the signature */
		if (i == len) {
			r->rc = 0;
			return;
		}
		if (in[i++] != '\r') {
			r->rc = -1;
			return;
		}
		if (i == len) {
			r->rc = 0;
			return;
		}
		if (in[i++] != '\n') {
			r->rc = -1;
			return;
		}
		if (form != FT_CHUNKED_UNSIGNED_TRAILER) {
			chunk_sig(prev, r->out + start, (size_t)size, want);
			if (memcmp(want, sig, 64) != 0) {
				r->rc = -2;
				return;
			}
		}
		memcpy(prev, sig, sizeof(prev));
		if (size == 0) {
			r->rc = i == len ? 1 : -1;
			return;
		}
	}
}

/* ---- feeding the decoder ---- */

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A piece size: mostly small, sometimes large, sometimes 0. */
static size_t piece_size(uint64_t *s)
{
	uint64_t v = rng_next(s);

	switch (v % 8) {
	case 0:
		return 0;
	case 1:
	case 2:
		return 1;
	case 3:
		return (size_t)(v >> 8) % 200 + 1;
	default:
		return (size_t)(v >> 8) % 9 + 1;
	}
}

/* Feeds body in pieces; returns the last result, the payload in *out (malloc'd), its length in *out_len. */
static int feed(const uint8_t *body, size_t len, uint64_t seed, uint8_t **out, size_t *out_len)
{
	ft_sigv4_chunked_t *c = ft_sigv4_chunked_new_mode(&auth, form, TRAILER);
	uint8_t *all = malloc(len + 1);
	size_t off = 0, total = 0;
	int rc = 0, done = 0;

	if (c == NULL || all == NULL)
		abort();
	seed |= 1;
	while (off < len || !done) {
		size_t n = piece_size(&seed), produced = 12345;
		uint8_t *piece, *dst;

		if (n > len - off)
			n = len - off;
		/* the piece and the output in buffers of exactly their size: a byte past either is an ASan report */
		piece = malloc(n ? n : 1);
		dst = malloc(n ? n : 1);
		if (piece == NULL || dst == NULL)
			abort();
		memcpy(piece, body + off, n);
		rc = ft_sigv4_chunked_feed(c, n ? piece : NULL, n, n ? dst : NULL, n, &produced);
		if (produced > n || rc < -2 || rc > 1)
			abort();
		memcpy(all + total, dst, produced);
		total += produced;
		free(piece);
		free(dst);
		off += n;
		if (rc < 0) {
			/* errors are sticky */
			size_t again = 99;
			uint8_t b = 'x', o;

			if (ft_sigv4_chunked_feed(c, &b, 1, &o, 1, &again) != rc || again != 0)
				abort();
			break;
		}
		done = off == len;
	}
	ft_sigv4_chunked_free(c);
	*out = all;
	*out_len = total;
	return rc;
}

/* ---- building signed bodies ---- */

typedef struct {
	uint8_t *p;
	size_t len, cap;
} buf_t;

static void put(buf_t *b, const void *s, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (b->p == NULL)
			abort();
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

/* payload[0..n) in chunks of the sizes in sizes[] (cycled; 0 means "the rest"), signed, then the final chunk. */
static void build(const uint8_t *payload, size_t n, const uint8_t sizes[4], buf_t *b)
{
	char prev[65], sig[65], head[128];
	size_t off = 0;
	int k = 0;

	memcpy(prev, SEED_SIG, sizeof(prev));
	for (;;) {
		size_t c = sizes[k++ % 4] * 7u;

		if (c == 0 || c > n - off)
			c = n - off;
		chunk_sig(prev, payload + off, c, sig);
		if (form == FT_CHUNKED_UNSIGNED_TRAILER)
			put(b, head, (size_t)snprintf(head, sizeof(head), "%zx\r\n", c));
		else
			put(b, head, (size_t)snprintf(head, sizeof(head), "%zx" EXT "%s\r\n", c, sig));
		memcpy(prev, sig, sizeof(prev));
		if (c == 0)
			break;
		put(b, payload + off, c);
		put(b, "\r\n", 2);
		off += c;
	}
	if (form == FT_CHUNKED_SIGNED) {
		put(b, "\r\n", 2);
		return;
	}
	/* a trailer value from the payload's length: any non-empty value will do */
	char value[32];
	int vn = snprintf(value, sizeof(value), "%08zx==", n);

	put(b, head, (size_t)snprintf(head, sizeof(head), TRAILER ":%s\r\n", value));
	if (form == FT_CHUNKED_SIGNED_TRAILER) {
		trailer_sig(prev, value, (size_t)vn, sig);
		put(b, head, (size_t)snprintf(head, sizeof(head), TRAILER_SIG ":%s\r\n", sig));
	}
	put(b, "\r\n", 2);
}

static void mutate(buf_t *b, uint8_t op, size_t where, uint8_t value)
{
	size_t at = b->len ? where % b->len : 0;

	switch (op % 8) {
	case 1:
		if (b->len)
			b->p[at] ^= (uint8_t)(1u << (value % 8));
		break;
	case 2:
		b->len = at;
		break;
	case 3:
		put(b, &value, 1); /* one byte more; then the tail moves up */
		memmove(b->p + at + 1, b->p + at, b->len - 1 - at);
		b->p[at] = value;
		break;
	case 4:
		put(b, &value, 1);
		break;
	case 5: /* uppercase the hex of one signature: still valid */
		for (size_t i = at; i + strlen(EXT) + 64 <= b->len; i++) {
			if (memcmp(b->p + i, EXT, strlen(EXT)) == 0) {
				for (size_t j = 0; j < 64; j++) {
					uint8_t *c = b->p + i + strlen(EXT) + j;
					if (*c >= 'a' && *c <= 'f')
						*c = (uint8_t)(*c - 32);
				}
				break;
			}
		}
		break;
	default:
		break;
	}
}

static void check(const uint8_t *body, size_t len, uint64_t seed)
{
	ref_t ref;
	uint8_t *got;
	size_t got_len;
	int rc = feed(body, len, seed, &got, &got_len);

	ref_decode(body, len, &ref);
	if (rc != ref.rc || got_len != ref.out_len || memcmp(got, ref.out, got_len) != 0)
		abort();
	free(got);
	free(ref.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	uint64_t seed = 0x9e3779b97f4a7c15ULL;

	if (!ready) {
		auth_init();
		ready = true;
	}
	if (size == 0 || size > MAX_BODY)
		return 0;
	switch ((data[0] >> 1) & 3) {
	case 1:
		form = FT_CHUNKED_SIGNED_TRAILER;
		break;
	case 2:
		form = FT_CHUNKED_UNSIGNED_TRAILER;
		break;
	default:
		form = FT_CHUNKED_SIGNED;
		break;
	}
	for (size_t i = 0; i < size && i < 16; i++)
		seed = seed * 31 + data[i];
	if ((data[0] & 1) == 0) {
		check(data + 1, size - 1, seed);
		return 0;
	}
	if (size < 8)
		return 0;
	{
		buf_t b = {0};

		build(data + 8, size - 8, data + 1, &b);
		mutate(&b, data[5], (size_t)data[6] << 8 | data[7], data[7]);
		check(b.p, b.len, seed);
		free(b.p);
	}
	return 0;
}
