/* SPDX-License-Identifier: Apache-2.0 */
/* S3 request bodies: plain, aws-chunked (signed or unsigned, with trailers), checked against their SHA-256, MD5 and x-amz-checksum-* before the last byte is handed out. */
#include "s3/s3.h"

#include <errno.h>
#include <string.h>

#include "base/cksum.h"
#include "base/codec.h"
#include "base/xsum.h"
#include "s3/chunked.h"

/*
 * DESIGN
 * The declared payload length is known before any byte is read (Content-Length, or
 * x-amz-decoded-content-length for aws-chunked). Bytes are handed out as they arrive, except
 * the read that would complete the payload: before returning it the reader consumes the rest
 * of the body (for aws-chunked: up to the verified final chunk) and checks the SHA-256 and MD5
 * it was promised. A relay that sends exactly the declared length to a target therefore never
 * lets the target see a complete body that failed a check; the target discards a cut body.
 * An x-amz-checksum-* (header, or the trailer of an aws-chunked body) is one more such check,
 * computed over the decoded payload.
 */

struct px_s3_body {
	int64_t total; /* declared payload bytes, -1 = until the end of the body */
	int64_t delivered;
	bool streaming; /* aws-chunked */
	ft_chunked_mode_t mode;
	const char *trailer; /* x-amz-trailer (trailer forms), in the request's memory */
	ft_sigv4_chunked_t *chunked;
	uint8_t *raw; /* PX_S3_BODY_BUF each, malloc'd on first read */
	uint8_t *pay;
	size_t pay_len, pay_pos;
	bool final_chunk; /* aws-chunked: final chunk verified */
	bool want_sha;
	char sha_hex[FT_SHA256_HEX];
	ft_sha256_t sha;
	bool sha_live;
	bool want_md5;
	char md5_hex[FT_CKSUM_HEX_MAX];
	ft_cksum_t md5;
	bool md5_live;
	ft_xsum_alg_t ck_alg;  /* x-amz-checksum-* to check, NONE for none */
	const char *ck_header; /* its value from the header; NULL: from the trailer */
	ft_xsum_t ck;
	bool ck_live;
	bool finished; /* verified end reached */
	px_s3_err_t err;
};

/* ---- request bodies ---- */

static bool is_hex64(const char *s)
{
	if (strlen(s) != 64)
		return false;
	for (int i = 0; i < 64; i++)
		if (ft_hex_digit((unsigned char)s[i]) < 0)
			return false;
	return true;
}

static void body_release(void *arg)
{
	px_s3_body_t *b = arg;

	if (b->chunked != NULL)
		ft_sigv4_chunked_free(b->chunked);
	if (b->sha_live) {
		char hex[FT_SHA256_HEX];
		ft_sha256_final(&b->sha, hex); /* releases the state */
	}
	if (b->md5_live)
		ft_cksum_abort(&b->md5);
	if (b->ck_live)
		ft_xsum_abort(&b->ck);
	b->ck_live = false;
	free(b->raw);
	free(b->pay);
	b->chunked = NULL;
	b->raw = b->pay = NULL;
	b->sha_live = b->md5_live = false;
}

/* Decodes a Content-MD5 (base64 of 16 bytes) into hex; -1 when malformed. */
static int content_md5_hex(const char *b64, char hex[FT_CKSUM_HEX_MAX])
{
	unsigned char raw[18]; /* and room for the 2 bytes the padding stands for: decoded in place */
	size_t n = strlen(b64);

	if (n != 24 || b64[22] != '=' || b64[23] != '=' || ft_base64_decode(b64, n, raw, sizeof(raw)) != 16)
		return -1;
	ft_hex_encode(raw, 16, hex);
	return 0;
}

/* The aws-chunked form x-amz-content-sha256 names; false when it names none. */
static bool streaming_mode(const char *sha, ft_chunked_mode_t *mode)
{
	if (sha == NULL)
		return false;
	if (strcmp(sha, FT_SIGV4_STREAMING) == 0)
		*mode = FT_CHUNKED_SIGNED;
	else if (strcmp(sha, FT_SIGV4_STREAMING_TRAILER) == 0)
		*mode = FT_CHUNKED_SIGNED_TRAILER;
	else if (strcmp(sha, FT_SIGV4_STREAMING_UNSIGNED_TRAILER) == 0)
		*mode = FT_CHUNKED_UNSIGNED_TRAILER;
	else
		return false;
	return true;
}

/* aws-chunked: the decoded length and the trailer announced. PX_S3_OK or the error, *msg set. */
static px_s3_err_t streaming_prepare(px_s3_req_t *q, px_s3_body_t *b, const char **msg)
{
	ft_req_t *r = q->r;
	const char *dl = ft_req_header(r, "x-amz-decoded-content-length");
	char *end = NULL;
	long long v;

	if (b->mode != FT_CHUNKED_UNSIGNED_TRAILER && (q->anonymous || q->auth.seed_signature[0] == '\0')) {
		*msg = "Signed aws-chunked bodies need a SigV4 Authorization header";
		return PX_S3_INVALID_REQUEST; /* chunk signatures chain from a SigV4 request signature */
	}
	if (dl == NULL)
		return PX_S3_MISSING_CONTENT_LENGTH;
	errno = 0;
	v = strtoll(dl, &end, 10);
	if (errno != 0 || end == dl || *end != '\0' || v < 0) {
		*msg = "x-amz-decoded-content-length is not a decimal length";
		return PX_S3_INVALID_ARGUMENT;
	}
	b->total = v;
	b->streaming = true;
	if (b->mode != FT_CHUNKED_SIGNED) {
		b->trailer = ft_req_header(r, "x-amz-trailer");
		if (b->trailer == NULL || b->trailer[0] == '\0' || strchr(b->trailer, ',') != NULL) {
			*msg = "A STREAMING-...-TRAILER body needs x-amz-trailer naming exactly one trailer";
			return PX_S3_INVALID_REQUEST;
		}
	}
	return PX_S3_OK;
}

/* Room for "Value for x-amz-checksum-crc64nvme header is invalid." and its likes. */
#define CK_MSG_MAX 96

/*
 * x-amz-sdk-checksum-algorithm, as S3 takes it: one of the algorithms (else InvalidRequest), with its
 * x-amz-checksum-* header or trailer (none: InvalidRequest; another algorithm's: BadDigest). On a
 * CompleteMultipartUpload only the name is checked: its checksum header is the object's.
 */
static px_s3_err_t sdk_algorithm_check(px_s3_req_t *q, const px_s3_body_t *b, int count, bool complete,
				       const char **msg)
{
	const char *sdk = ft_req_header(q->r, "x-amz-sdk-checksum-algorithm");
	ft_xsum_alg_t a = ft_xsum_from_label(sdk);
	char *m;

	if (sdk == NULL)
		return PX_S3_OK;
	if (a == FT_XSUM_NONE) {
		*msg = "Value for x-amz-sdk-checksum-algorithm header is invalid.";
		return PX_S3_INVALID_REQUEST;
	}
	if (complete || a == b->ck_alg)
		return PX_S3_OK;
	m = ft_req_alloc(q->r, CK_MSG_MAX);
	if (count == 0) {
		snprintf(m, CK_MSG_MAX, "x-amz-sdk-checksum-algorithm %s needs a %s header or trailer",
			 ft_xsum_label(a), ft_xsum_header(a));
		*msg = m;
		return PX_S3_INVALID_REQUEST;
	}
	snprintf(m, CK_MSG_MAX, "x-amz-sdk-checksum-algorithm %s does not match the %s sent", ft_xsum_label(a),
		 ft_xsum_header(b->ck_alg));
	*msg = m;
	return PX_S3_CHECKSUM_MISMATCH;
}

/*
 * The x-amz-checksum-* to check: at most one header, or the trailer an aws-chunked body announced.
 * PX_S3_OK or the error, *msg set (in the request's memory).
 */
static px_s3_err_t checksum_prepare(px_s3_req_t *q, px_s3_body_t *b, const char **msg)
{
	static const ft_xsum_alg_t all[] = {FT_XSUM_CRC32, FT_XSUM_CRC32C, FT_XSUM_CRC64NVME, FT_XSUM_SHA1,
					    FT_XSUM_SHA256};
	char *m = ft_req_alloc(q->r, CK_MSG_MAX);
	int count = 0;

	/* CompleteMultipartUpload's x-amz-checksum-* is the object's checksum, not its body's */
	bool complete = ft_req_method(q->r) == FT_HTTP_POST && ft_req_query(q->r, "uploadId") != NULL;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]) && !complete; i++) {
		const char *v = ft_req_header(q->r, ft_xsum_header(all[i]));
		if (v == NULL)
			continue;
		count++;
		b->ck_alg = all[i];
		b->ck_header = v;
	}
	if (b->trailer != NULL) {
		ft_xsum_alg_t t = ft_xsum_from_name(b->trailer);
		if (t == FT_XSUM_NONE) {
			*msg = "x-amz-trailer must name an x-amz-checksum-* trailer";
			return PX_S3_INVALID_REQUEST;
		}
		count++;
		b->ck_alg = t;
		b->ck_header = NULL;
	}
	if (count > 1) {
		*msg = "Expecting a single x-amz-checksum- header or trailer";
		return PX_S3_INVALID_REQUEST;
	}
	if (b->ck_header != NULL && !ft_xsum_value_ok(b->ck_alg, b->ck_header)) {
		snprintf(m, CK_MSG_MAX, "Value for %s header is invalid.", ft_xsum_header(b->ck_alg));
		*msg = m;
		return PX_S3_INVALID_REQUEST;
	}
	return sdk_algorithm_check(q, b, count, complete, msg);
}

/*
 * Loop thread: sets up the body reader of q from the request's headers. Returns PX_S3_OK, or the
 * error to send (bad framing or digest headers) with *msg set to a message or NULL.
 */
px_s3_err_t px_s3_body_prepare(px_s3_req_t *q, const char **msg)
{
	ft_req_t *r = q->r;
	px_s3_body_t *b = ft_req_alloc(r, sizeof(*b));
	const char *sha = q->content_sha256;
	const char *md5 = ft_req_header(r, "Content-MD5");
	int64_t cl = ft_req_content_length(r);

	*msg = NULL;
	memset(b, 0, sizeof(*b));
	q->body = b;
	b->total = cl;
	if (streaming_mode(sha, &b->mode)) {
		px_s3_err_t e = streaming_prepare(q, b, msg);
		if (e != PX_S3_OK)
			return e;
	} else if (sha != NULL && is_hex64(sha)) {
		b->want_sha = true;
		for (int i = 0; i < 64; i++)
			b->sha_hex[i] = (char)(sha[i] >= 'A' && sha[i] <= 'F' ? sha[i] - 'A' + 'a' : sha[i]);
		b->sha_hex[64] = '\0';
	}
	if (md5 != NULL) {
		if (content_md5_hex(md5, b->md5_hex) != 0)
			return PX_S3_INVALID_DIGEST;
		b->want_md5 = true;
	}
	px_s3_err_t e = checksum_prepare(q, b, msg);
	if (e != PX_S3_OK)
		return e;
	ft_req_on_done(r, body_release, b);
	return PX_S3_OK;
}

ft_xsum_alg_t px_s3_body_xsum(const px_s3_req_t *q)
{
	return q->body != NULL ? q->body->ck_alg : FT_XSUM_NONE;
}

int64_t px_s3_body_length(const px_s3_req_t *q)
{
	return q->body != NULL ? q->body->total : ft_req_content_length(q->r);
}

static px_s3_err_t raw_error(ssize_t n)
{
	if (n == -ETIMEDOUT)
		return PX_S3_REQUEST_TIMEOUT;
	return PX_S3_INCOMPLETE_BODY;
}

/* Allocates buffers and hash states on first use; PX_S3_OK or INTERNAL. */
static px_s3_err_t body_start(px_s3_req_t *q, px_s3_body_t *b)
{
	if (b->raw != NULL)
		return PX_S3_OK;
	b->raw = malloc(PX_S3_BODY_BUF);
	b->pay = b->streaming ? malloc(PX_S3_BODY_BUF) : NULL;
	if (b->raw == NULL || (b->streaming && b->pay == NULL))
		return PX_S3_INTERNAL;
	if (b->streaming) {
		b->chunked = ft_sigv4_chunked_new_mode(&q->auth, b->mode, b->trailer);
		if (b->chunked == NULL)
			return PX_S3_INTERNAL;
	}
	if (b->want_sha) {
		if (ft_sha256_init(&b->sha) != 0)
			return PX_S3_INTERNAL;
		b->sha_live = true;
	}
	if (b->want_md5) {
		if (ft_cksum_init(&b->md5, FT_CKSUM_MD5) != 0)
			return PX_S3_INTERNAL;
		b->md5_live = true;
	}
	if (b->ck_alg != FT_XSUM_NONE) {
		if (ft_xsum_init(&b->ck, b->ck_alg) != 0)
			return PX_S3_INTERNAL;
		b->ck_live = true;
	}
	return PX_S3_OK;
}

/* The x-amz-checksum-* check at the verified end of the body. */
static px_s3_err_t checksum_finish(px_s3_body_t *b)
{
	char got[FT_XSUM_B64_MAX];
	const char *want = b->ck_header;

	if (!b->ck_live)
		return PX_S3_OK;
	b->ck_live = false;
	if (ft_xsum_final(&b->ck, got) != 0)
		return PX_S3_INTERNAL;
	if (want == NULL) {
		want = ft_sigv4_chunked_trailer(b->chunked);
		if (want == NULL || !ft_xsum_value_ok(b->ck_alg, want))
			return PX_S3_INVALID_CHECKSUM;
	}
	return strcmp(got, want) == 0 ? PX_S3_OK : PX_S3_CHECKSUM_MISMATCH;
}

/*
 * aws-chunked: reads raw bytes and decodes them until payload is pending or the final chunk was
 * verified. PX_S3_OK or the error.
 */
static px_s3_err_t chunked_fill(px_s3_req_t *q, px_s3_body_t *b)
{
	while (b->pay_pos == b->pay_len && !b->final_chunk) {
		ssize_t n = ft_req_body_read(q->r, b->raw, PX_S3_BODY_BUF);
		size_t out = 0;
		if (n < 0)
			return raw_error(n);
		if (n == 0)
			return PX_S3_INCOMPLETE_BODY; /* the body ended before the final chunk */
		int rc = ft_sigv4_chunked_feed(b->chunked, b->raw, (size_t)n, b->pay, PX_S3_BODY_BUF, &out);
		if (rc == -2)
			return PX_S3_SIGNATURE_MISMATCH;
		if (rc < 0)
			return PX_S3_INCOMPLETE_BODY;
		b->pay_pos = 0;
		b->pay_len = out;
		if (rc == 1)
			b->final_chunk = true;
	}
	return PX_S3_OK;
}

/* Next payload bytes into buf (at most cap); *n = 0 at the end of the body. */
static px_s3_err_t payload_next(px_s3_req_t *q, px_s3_body_t *b, uint8_t *buf, size_t cap, size_t *n)
{
	*n = 0;
	if (!b->streaming) {
		ssize_t got = ft_req_body_read(q->r, buf, cap);
		if (got < 0)
			return raw_error(got);
		*n = (size_t)got;
		return PX_S3_OK;
	}
	px_s3_err_t e = chunked_fill(q, b);
	if (e != PX_S3_OK)
		return e;
	size_t take = b->pay_len - b->pay_pos;
	if (take > cap)
		take = cap;
	memcpy(buf, b->pay + b->pay_pos, take);
	b->pay_pos += take;
	*n = take;
	return PX_S3_OK;
}

/* The whole payload was read: the body must end here, and every digest must match. */
static px_s3_err_t body_finish(px_s3_req_t *q, px_s3_body_t *b)
{
	uint8_t extra[16];
	size_t n = 0;

	if (b->streaming) {
		px_s3_err_t e = payload_next(q, b, extra, sizeof(extra), &n);
		if (e != PX_S3_OK)
			return e;
		if (n > 0 || !b->final_chunk)
			return PX_S3_INCOMPLETE_BODY; /* more payload than x-amz-decoded-content-length */
		/* Nothing may follow the final chunk. */
		ssize_t got = ft_req_body_read(q->r, extra, sizeof(extra));
		if (got != 0)
			return got < 0 ? raw_error(got) : PX_S3_INCOMPLETE_BODY;
	} else if (b->total >= 0) {
		ssize_t got = ft_req_body_read(q->r, extra, sizeof(extra));
		if (got != 0)
			return got < 0 ? raw_error(got) : PX_S3_INCOMPLETE_BODY;
	}
	if (b->sha_live) {
		char hex[FT_SHA256_HEX];
		ft_sha256_final(&b->sha, hex);
		b->sha_live = false;
		if (strcmp(hex, b->sha_hex) != 0)
			return PX_S3_SHA256_MISMATCH;
	}
	if (b->md5_live) {
		char hex[FT_CKSUM_HEX_MAX];
		ft_cksum_final(&b->md5, hex);
		b->md5_live = false;
		if (strcmp(hex, b->md5_hex) != 0)
			return PX_S3_BAD_DIGEST;
	}
	px_s3_err_t e = checksum_finish(b);
	if (e != PX_S3_OK)
		return e;
	b->finished = true;
	return PX_S3_OK;
}

ssize_t px_s3_body_read(px_s3_req_t *q, void *buf, size_t cap)
{
	px_s3_body_t *b = q->body;
	px_s3_err_t e;
	size_t n = 0;

	if (b == NULL)
		return -(ssize_t)PX_S3_INTERNAL;
	if (b->err != PX_S3_OK)
		return -(ssize_t)b->err;
	if (b->finished)
		return 0;
	e = body_start(q, b);
	if (e != PX_S3_OK)
		goto fail;
	if (b->total >= 0 && b->delivered == b->total) {
		e = body_finish(q, b);
		if (e != PX_S3_OK)
			goto fail;
		return 0;
	}
	if (b->total >= 0 && (uint64_t)(b->total - b->delivered) < cap)
		cap = (size_t)(b->total - b->delivered);
	e = payload_next(q, b, buf, cap, &n);
	if (e != PX_S3_OK)
		goto fail;
	if (n == 0) {
		if (b->total >= 0) {
			e = PX_S3_INCOMPLETE_BODY;
			goto fail;
		}
		e = body_finish(q, b); /* length unknown: the end of the body is the end */
		if (e != PX_S3_OK)
			goto fail;
		return 0;
	}
	if (b->sha_live)
		ft_sha256_update(&b->sha, buf, n);
	if (b->md5_live)
		ft_cksum_update(&b->md5, buf, n);
	if (b->ck_live)
		ft_xsum_update(&b->ck, buf, n);
	b->delivered += (int64_t)n;
	if (b->total >= 0 && b->delivered == b->total) {
		e = body_finish(q, b); /* before the last bytes leave */
		if (e != PX_S3_OK)
			goto fail;
	}
	return (ssize_t)n;
fail:
	b->err = e;
	return -(ssize_t)e;
}

px_s3_err_t px_s3_body_all(px_s3_req_t *q, size_t max, char **body, size_t *len)
{
	int64_t total = px_s3_body_length(q);
	ft_strbuf_t b = {0};
	px_s3_err_t e = PX_S3_OK;

	*body = NULL;
	*len = 0;
	if (total >= 0 && (uint64_t)total > max)
		return PX_S3_ENTITY_TOO_LARGE;
	for (;;) {
		/* Grows only when full: a declared length sizes the buffer at once, else it doubles. */
		if (b.len + 1 >= b.cap && ft_strbuf_reserve(&b, b.len == 0 && total > 0 ? (size_t)total : b.cap) != 0) {
			e = PX_S3_INTERNAL;
			goto fail;
		}
		ssize_t got = px_s3_body_read(q, b.p + b.len, b.cap - 1 - b.len);
		if (got < 0) {
			e = (px_s3_err_t)-got;
			goto fail;
		}
		if (got == 0)
			break;
		b.len += (size_t)got;
		if (b.len > max) {
			e = PX_S3_ENTITY_TOO_LARGE;
			goto fail;
		}
	}
	b.p[b.len] = '\0';
	*len = b.len;
	*body = ft_strbuf_take(&b);
	return PX_S3_OK;
fail:
	ft_strbuf_free(&b);
	return e;
}

bool px_s3_payload_hash_known(const char *sha)
{
	ft_chunked_mode_t mode;

	return streaming_mode(sha, &mode) || is_hex64(sha);
}
