/* SPDX-License-Identifier: Apache-2.0 */
/* S3 aws-chunked request bodies: the decoder of the three streaming forms, checking chunk and trailer signatures. */
/*
 * DESIGN
 * - The decoder hands payload bytes out as they arrive and checks each chunk's signature when its
 *   trailing CRLF arrives: bytes from a chunk whose signature fails were already handed out, so
 *   callers write to a work file and keep it only once feed returned 1.
 * - A chunk's string to sign chains the previous chunk's signature (the request's for the first):
 *   chunks cannot be dropped, reordered or moved to another request.
 * - Trailer forms: the final chunk ("0;chunk-signature=..." or "0") is followed at once by the
 *   trailer lines and an empty line. The signed form's trailer signature chains the final chunk's
 *   signature over the SHA-256 of the canonical trailer ("name:value\n", name lowercased), under
 *   the AWS4-HMAC-SHA256-TRAILER algorithm line. Only the announced trailer is accepted, once.
 * - The unsigned form has bare "<hex>" chunk headers and nothing to verify but the framing.
 */
#include "s3/chunked.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "base/codec.h"
#include "base/strbuf.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define CHUNK_HEADER_MAX 128 /* "<16 hex>;chunk-signature=<64 hex>" is 97 bytes */
#define TRAILER_LINE_MAX 256 /* "x-amz-checksum-sha256:<44 base64>" and the signature line are far shorter */
#define TRAILER_SIG_NAME "x-amz-trailer-signature"

typedef enum {
	CHUNK_HEADER,  /* reading "<hex>;chunk-signature=<sig>\r\n" */
	CHUNK_DATA,    /* passing remaining data bytes through */
	CHUNK_CR,      /* expecting the '\r' after the data */
	CHUNK_LF,      /* expecting the '\n'; then the chunk signature is checked */
	CHUNK_TRAILER, /* trailer forms: reading trailer lines up to the empty one */
	CHUNK_DONE,    /* final chunk verified: nothing more may come */
	CHUNK_FAILED,  /* sticky error in rc */
} chunk_state_t;

struct ft_sigv4_chunked {
	chunk_state_t state;
	ft_chunked_mode_t mode;
	int rc;                        /* -1 or -2 once FAILED */
	char header[TRAILER_LINE_MAX]; /* the line being read: chunk header (<= CHUNK_HEADER_MAX) or trailer */
	size_t header_len;
	uint64_t remaining; /* data bytes left in this chunk */
	int final;          /* this chunk has size 0 */
	char chunk_sig[65]; /* claimed signature of this chunk */
	char prev_sig[65];  /* previous chunk's (or the seed) signature */
	uint8_t key[32];
	char amz_date[17];
	char scope[128];
	ft_sha256_t hash;      /* sha256 of this chunk's data, from its header to its CRLF; owned */
	ft_sigv4_hmac_t hmac;  /* owned */
	char trailer_name[64]; /* lowercase; trailer forms */
	char trailer_value[FT_CHUNKED_TRAILER_MAX + 1];
	bool trailer_seen;
	bool trailer_signed; /* x-amz-trailer-signature verified */
};

static bool is_signed(const ft_sigv4_chunked_t *c)
{
	return c->mode != FT_CHUNKED_UNSIGNED_TRAILER;
}

ft_sigv4_chunked_t *ft_sigv4_chunked_new(const ft_sigv4_auth_t *auth)
{
	return ft_sigv4_chunked_new_mode(auth, FT_CHUNKED_SIGNED, NULL);
}

/* Copies the announced trailer name, lowercased; -1 when empty, too long or not a token. */
static int set_trailer_name(ft_sigv4_chunked_t *c, const char *name)
{
	size_t n = name != NULL ? strlen(name) : 0;

	if (n == 0 || n >= sizeof(c->trailer_name))
		return -1;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];

		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'))
			return -1;
		c->trailer_name[i] = ch;
	}
	c->trailer_name[n] = '\0';
	return 0;
}

ft_sigv4_chunked_t *ft_sigv4_chunked_new_mode(const ft_sigv4_auth_t *auth, ft_chunked_mode_t mode, const char *trailer)
{
	ft_sigv4_chunked_t *c;
	bool sig = mode != FT_CHUNKED_UNSIGNED_TRAILER;

	if (mode != FT_CHUNKED_SIGNED && mode != FT_CHUNKED_SIGNED_TRAILER && mode != FT_CHUNKED_UNSIGNED_TRAILER)
		return NULL;
	if (sig && (auth == NULL || strnlen(auth->seed_signature, sizeof(auth->seed_signature)) != 64))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->mode = mode;
	c->state = CHUNK_HEADER;
	if (mode != FT_CHUNKED_SIGNED && set_trailer_name(c, trailer) != 0) {
		free(c);
		return NULL;
	}
	if (!sig)
		return c;
	memcpy(c->key, auth->signing_key, sizeof(c->key));
	memcpy(c->prev_sig, auth->seed_signature, sizeof(c->prev_sig));
	memcpy(c->amz_date, auth->amz_date, sizeof(c->amz_date));
	c->amz_date[sizeof(c->amz_date) - 1] = '\0';
	memcpy(c->scope, auth->scope, sizeof(c->scope));
	c->scope[sizeof(c->scope) - 1] = '\0';
	return c;
}

const char *ft_sigv4_chunked_trailer(const ft_sigv4_chunked_t *c)
{
	if (c == NULL || c->mode == FT_CHUNKED_SIGNED || c->state != CHUNK_DONE)
		return NULL;
	return c->trailer_value;
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

/*
 * Parses the header line (without CRLF): "<1-16 hex>;chunk-signature=<64 hex>", or "<1-16 hex>"
 * in the unsigned form. Returns 0 or -1.
 */
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
	c->remaining = size;
	c->final = size == 0;
	if (!is_signed(c))
		return c->header_len == hex_len ? 0 : -1;
	if (c->header_len != hex_len + strlen(ext) + 64 || memcmp(c->header + hex_len, ext, strlen(ext)) != 0)
		return -1;
	if (ft_sigv4_parse_signature(c->header + hex_len + strlen(ext), 64, c->chunk_sig) != 0)
		return -1;
	if (ft_sha256_init(&c->hash) != 0)
		return -1;
	return 0;
}

/*
 * Signs "<algorithm>\n<date>\n<scope>\n<previous signature>\n<middle><hash>" and compares it with
 * claimed; a match becomes the previous signature. Returns 0, -1 or -2.
 */
static int sig_check(ft_sigv4_chunked_t *c, const char *algorithm, const char *middle, const char *hash,
		     const char *claimed)
{
	uint8_t mac[32];
	char sig[65];
	ft_strbuf_t sts = {0};
	int rc = -1;

	ft_strbuf_adds(&sts, algorithm);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, c->amz_date);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, c->scope);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, c->prev_sig);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, middle);
	ft_strbuf_adds(&sts, hash);
	if (sts.failed || ft_sigv4_hmac(&c->hmac, c->key, 32, sts.p, sts.len, mac) != 0)
		goto out;
	ft_hex_encode(mac, 32, sig);
	rc = CRYPTO_memcmp(sig, claimed, 64) == 0 ? 0 : -2;
	if (rc == 0)
		memcpy(c->prev_sig, claimed, sizeof(c->prev_sig));
out:
	ft_strbuf_free(&sts);
	return rc;
}

/* Checks the finished chunk's signature; it becomes the previous one. Returns 0, -1 or -2. */
static int chunk_verify(ft_sigv4_chunked_t *c)
{
	char data_hash[FT_SHA256_HEX];

	ft_sha256_final(&c->hash, data_hash);
	if (data_hash[0] == '\0')
		return -1;
	return sig_check(c, FT_SIGV4_ALGORITHM "-PAYLOAD", EMPTY_SHA256 "\n", data_hash, c->chunk_sig);
}

/* Checks the trailer signature sig over the trailer seen (signed trailer form). Returns 0, -1 or -2. */
static int trailer_verify(ft_sigv4_chunked_t *c, const char *sig)
{
	char hash[FT_SHA256_HEX];
	ft_strbuf_t canon = {0};
	ft_sha256_t h;

	ft_strbuf_adds(&canon, c->trailer_name);
	ft_strbuf_addc(&canon, ':');
	ft_strbuf_adds(&canon, c->trailer_value);
	ft_strbuf_addc(&canon, '\n');
	if (canon.failed || ft_sha256_init(&h) != 0) {
		ft_strbuf_free(&canon);
		return -1;
	}
	ft_sha256_update(&h, canon.p, canon.len);
	ft_sha256_final(&h, hash);
	ft_strbuf_free(&canon);
	if (hash[0] == '\0')
		return -1;
	return sig_check(c, FT_SIGV4_ALGORITHM "-TRAILER", "", hash, sig);
}

/* s[0..n) without leading and trailing spaces and tabs: start in *s, length returned. */
static size_t trim(const char **s, size_t n)
{
	while (n > 0 && (**s == ' ' || **s == '\t')) {
		(*s)++;
		n--;
	}
	while (n > 0 && ((*s)[n - 1] == ' ' || (*s)[n - 1] == '\t'))
		n--;
	return n;
}

/* One trailer line (without CRLF, not empty): the announced trailer, then (signed) its signature. 0, -1, -2. */
static int trailer_line(ft_sigv4_chunked_t *c)
{
	const char *colon = memchr(c->header, ':', c->header_len);
	const char *name = c->header, *value;
	size_t name_len, value_len;
	char sig[65];

	if (colon == NULL || c->trailer_signed)
		return -1; /* no line may follow the trailer signature */
	value = colon + 1;
	name_len = trim(&name, (size_t)(colon - c->header));
	value_len = trim(&value, c->header_len - (size_t)(value - c->header));
	if (!c->trailer_seen) {
		if (name_len != strlen(c->trailer_name) || strncasecmp(name, c->trailer_name, name_len) != 0 ||
		    value_len == 0 || value_len > FT_CHUNKED_TRAILER_MAX || memchr(value, '\0', value_len) != NULL)
			return -1;
		memcpy(c->trailer_value, value, value_len);
		c->trailer_value[value_len] = '\0';
		c->trailer_seen = true;
		return 0;
	}
	if (!is_signed(c) || name_len != strlen(TRAILER_SIG_NAME) || strncasecmp(name, TRAILER_SIG_NAME, name_len) != 0)
		return -1;
	if (ft_sigv4_parse_signature(value, value_len, sig) != 0)
		return -1;
	int rc = trailer_verify(c, sig);
	if (rc == 0)
		c->trailer_signed = true;
	return rc;
}

/* The empty line that ends the trailer: everything expected must have come. 0 or -1. */
static int trailer_end(ft_sigv4_chunked_t *c)
{
	if (!c->trailer_seen || (is_signed(c) && !c->trailer_signed))
		return -1;
	c->state = CHUNK_DONE;
	return 0;
}

/* Reads a line into c->header up to its LF (limit bytes at most); 1 when a whole line (CR dropped) is there, 0 or -1. */
static int line_step(ft_sigv4_chunked_t *c, uint8_t b, size_t limit)
{
	if (b != '\n') {
		if (c->header_len >= limit)
			return -1; /* oversize line */
		c->header[c->header_len++] = (char)b;
		return 0;
	}
	if (c->header_len == 0 || c->header[c->header_len - 1] != '\r')
		return -1;
	c->header_len--;
	return 1;
}

/* After a chunk header was parsed: where the decoder goes next. 0 or an error. */
static int chunk_started(ft_sigv4_chunked_t *c)
{
	if (!c->final) {
		c->state = CHUNK_DATA;
		return 0;
	}
	if (c->mode == FT_CHUNKED_SIGNED) {
		c->state = CHUNK_CR;
		return 0;
	}
	c->state = CHUNK_TRAILER; /* the trailer follows the final chunk's header at once */
	return c->mode == FT_CHUNKED_SIGNED_TRAILER ? chunk_verify(c) : 0;
}

/* Consumes bytes of one state from in[*i..len); returns 0 or an error (-1, -2). */
static int chunk_step(ft_sigv4_chunked_t *c, const uint8_t *in, size_t len, size_t *i, uint8_t *out, size_t cap,
		      size_t *produced)
{
	switch (c->state) {
	case CHUNK_HEADER: {
		int rc = line_step(c, in[(*i)++], CHUNK_HEADER_MAX);

		if (rc <= 0)
			return rc;
		if (chunk_parse_header(c) != 0)
			return -1;
		c->header_len = 0;
		return chunk_started(c);
	}
	case CHUNK_TRAILER: {
		int rc = line_step(c, in[(*i)++], TRAILER_LINE_MAX);

		if (rc <= 0)
			return rc;
		rc = c->header_len == 0 ? trailer_end(c) : trailer_line(c);
		c->header_len = 0;
		return rc;
	}
	case CHUNK_DATA: {
		size_t n = len - *i;

		if ((uint64_t)n > c->remaining)
			n = (size_t)c->remaining;
		if (*produced + n > cap)
			return -1; /* the caller broke cap >= len */
		memcpy(out + *produced, in + *i, n);
		if (is_signed(c))
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
		rc = is_signed(c) ? chunk_verify(c) : 0;
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
