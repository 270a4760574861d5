/* SPDX-License-Identifier: Apache-2.0 */
/* S3 aws-chunked request bodies: the decoder that checks every chunk's signature, chained from the request's. */
/*
 * DESIGN
 * - The decoder hands payload bytes out as they arrive and checks each chunk's signature when its
 *   trailing CRLF arrives: bytes from a chunk whose signature fails were already handed out, so
 *   callers write to a work file and keep it only once feed returned 1.
 * - A chunk's string to sign chains the previous chunk's signature (the request's for the first):
 *   chunks cannot be dropped, reordered or moved to another request.
 */
#include "s3/chunked.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/codec.h"
#include "base/strbuf.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define CHUNK_HEADER_MAX 128 /* "<16 hex>;chunk-signature=<64 hex>" is 97 bytes */

typedef enum {
	CHUNK_HEADER, /* reading "<hex>;chunk-signature=<sig>\r\n" */
	CHUNK_DATA,   /* passing remaining data bytes through */
	CHUNK_CR,     /* expecting the '\r' after the data */
	CHUNK_LF,     /* expecting the '\n'; then the chunk signature is checked */
	CHUNK_DONE,   /* final chunk verified: nothing more may come */
	CHUNK_FAILED, /* sticky error in rc */
} chunk_state_t;

struct ft_sigv4_chunked {
	chunk_state_t state;
	int rc; /* -1 or -2 once FAILED */
	char header[CHUNK_HEADER_MAX];
	size_t header_len;
	uint64_t remaining; /* data bytes left in this chunk */
	int final;          /* this chunk has size 0 */
	char chunk_sig[65]; /* claimed signature of this chunk */
	char prev_sig[65];  /* previous chunk's (or the seed) signature */
	uint8_t key[32];
	char amz_date[17];
	char scope[128];
	ft_sha256_t hash;     /* sha256 of this chunk's data, from its header to its CRLF; owned */
	ft_sigv4_hmac_t hmac; /* owned */
};

ft_sigv4_chunked_t *ft_sigv4_chunked_new(const ft_sigv4_auth_t *auth)
{
	ft_sigv4_chunked_t *c;

	if (auth == NULL || strnlen(auth->seed_signature, sizeof(auth->seed_signature)) != 64)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	memcpy(c->key, auth->signing_key, sizeof(c->key));
	memcpy(c->prev_sig, auth->seed_signature, sizeof(c->prev_sig));
	memcpy(c->amz_date, auth->amz_date, sizeof(c->amz_date));
	c->amz_date[sizeof(c->amz_date) - 1] = '\0';
	memcpy(c->scope, auth->scope, sizeof(c->scope));
	c->scope[sizeof(c->scope) - 1] = '\0';
	c->state = CHUNK_HEADER;
	return c;
}

void ft_sigv4_chunked_free(ft_sigv4_chunked_t *c)
{
	if (c == NULL)
		return;
	ft_sigv4_hmac_done(&c->hmac);
	if (c->hash.ctx != NULL) {
		char unused[FT_SHA256_HEX];

		ft_sha256_final(&c->hash, unused); /* releases it */
	}
	OPENSSL_cleanse(c, sizeof(*c));
	free(c);
}

/* Parses the header line (without CRLF): "<1-16 hex>;chunk-signature=<64 hex>". Returns 0 or -1. */
static int chunk_parse_header(ft_sigv4_chunked_t *c)
{
	static const char ext[] = ";chunk-signature=";
	size_t hex_len = 0;
	uint64_t size = 0;

	while (hex_len < c->header_len && ft_hex_digit((unsigned char)c->header[hex_len]) >= 0) {
		size = size * 16 + (uint64_t)ft_hex_digit((unsigned char)c->header[hex_len]);
		hex_len++;
	}
	if (hex_len == 0 || hex_len > 16)
		return -1;
	if (c->header_len != hex_len + strlen(ext) + 64 || memcmp(c->header + hex_len, ext, strlen(ext)) != 0)
		return -1;
	if (ft_sigv4_parse_signature(c->header + hex_len + strlen(ext), 64, c->chunk_sig) != 0)
		return -1;
	if (ft_sha256_init(&c->hash) != 0)
		return -1;
	c->remaining = size;
	c->final = size == 0;
	return 0;
}

/* Checks the finished chunk's signature; it becomes the previous one. Returns 0, -1 or -2. */
static int chunk_verify(ft_sigv4_chunked_t *c)
{
	uint8_t mac[32];
	char data_hash[FT_SHA256_HEX], sig[65];
	ft_strbuf_t sts = {0};
	int rc = -1;

	ft_sha256_final(&c->hash, data_hash);
	if (data_hash[0] == '\0')
		goto out;
	ft_strbuf_adds(&sts, FT_SIGV4_ALGORITHM "-PAYLOAD\n");
	ft_strbuf_adds(&sts, c->amz_date);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, c->scope);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, c->prev_sig);
	ft_strbuf_adds(&sts, "\n" EMPTY_SHA256 "\n");
	ft_strbuf_adds(&sts, data_hash);
	if (sts.failed || ft_sigv4_hmac(&c->hmac, c->key, 32, sts.p, sts.len, mac) != 0)
		goto out;
	ft_hex_encode(mac, 32, sig);
	rc = CRYPTO_memcmp(sig, c->chunk_sig, 64) == 0 ? 0 : -2;
	if (rc == 0)
		memcpy(c->prev_sig, c->chunk_sig, sizeof(c->prev_sig));
out:
	ft_strbuf_free(&sts);
	return rc;
}

/* Consumes bytes of one state from in[*i..len); returns 0 or an error (-1, -2). */
static int chunk_step(ft_sigv4_chunked_t *c, const uint8_t *in, size_t len, size_t *i, uint8_t *out, size_t cap,
		      size_t *produced)
{
	uint8_t b;

	switch (c->state) {
	case CHUNK_HEADER:
		b = in[(*i)++];
		if (b != '\n') {
			if (c->header_len == sizeof(c->header))
				return -1; /* oversize chunk header */
			c->header[c->header_len++] = (char)b;
			return 0;
		}
		if (c->header_len == 0 || c->header[c->header_len - 1] != '\r')
			return -1;
		c->header_len--;
		if (chunk_parse_header(c) != 0)
			return -1;
		c->header_len = 0;
		c->state = c->final ? CHUNK_CR : CHUNK_DATA;
		return 0;
	case CHUNK_DATA: {
		size_t n = len - *i;

		if ((uint64_t)n > c->remaining)
			n = (size_t)c->remaining;
		if (*produced + n > cap)
			return -1; /* the caller broke cap >= len */
		memcpy(out + *produced, in + *i, n);
		ft_sha256_update(&c->hash, in + *i, n);
		*produced += n;
		*i += n;
		c->remaining -= n;
		if (c->remaining == 0)
			c->state = CHUNK_CR;
		return 0;
	}
	case CHUNK_CR:
		if (in[(*i)++] != '\r')
			return -1;
		c->state = CHUNK_LF;
		return 0;
	case CHUNK_LF: {
		int rc;

		if (in[(*i)++] != '\n')
			return -1;
		rc = chunk_verify(c);
		if (rc != 0)
			return rc;
		c->state = c->final ? CHUNK_DONE : CHUNK_HEADER;
		return 0;
	}
	case CHUNK_DONE:
	case CHUNK_FAILED:
		break;
	}
	return -1; /* bytes after the final chunk */
}

int ft_sigv4_chunked_feed(ft_sigv4_chunked_t *c, const void *buf, size_t len, void *out, size_t cap, size_t *out_len)
{
	const uint8_t *in = buf;
	size_t i = 0, produced = 0;

	if (out_len != NULL)
		*out_len = 0;
	if (c == NULL || out_len == NULL || (len > 0 && (buf == NULL || out == NULL)))
		return -1;
	if (c->state == CHUNK_FAILED)
		return c->rc;
	while (i < len) {
		int rc = chunk_step(c, in, len, &i, out, cap, &produced);

		if (rc != 0) {
			c->state = CHUNK_FAILED;
			c->rc = rc;
			*out_len = produced;
			return rc;
		}
	}
	*out_len = produced;
	return c->state == CHUNK_DONE ? 1 : 0;
}
