/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.x request- and response-head parsers, framing analysis and chunked-body decoder: pure, allocation-free. */
#ifndef FT_HTTP_PARSE_H
#define FT_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * DESIGN
 * Everything here works on caller-owned buffers, allocates nothing and keeps no global state, so it
 * can be unit-tested and fuzzed on its own. The parser is a security boundary: it is strict about
 * syntax (RFC 9112) and reports which status the server must answer with.
 * Line ends: CRLF, or a bare LF (RFC 9112 2.2 allows recognising it); a CR not followed by LF is bad.
 */

/* Results of ft_hp_parse_head() and ft_hp_parse_resp_head(). */
typedef enum {
	FT_HP_DONE = 0,      /* a complete head was parsed */
	FT_HP_AGAIN = 1,     /* incomplete: more bytes needed */
	FT_HP_BAD = 2,       /* malformed: 400 */
	FT_HP_TOO_LARGE = 3, /* head longer than max_bytes or more than max_headers: 431 */
	FT_HP_VERSION = 4,   /* well-formed but not HTTP/1.x: 505 */
} ft_hp_result_t;

/* One header; pointers into the parsed buffer, not NUL-terminated; value has no surrounding whitespace. */
typedef struct {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
} ft_hp_header_t;

typedef struct {
	const char *method;
	size_t method_len;
	const char *target;
	size_t target_len;
	int version_minor; /* x of HTTP/1.x */
	size_t nheaders;   /* entries filled in the caller's array */
	size_t head_len;   /* bytes of the head, including leading empty lines and the final empty line */
} ft_hp_head_t;

/*
 * Parses a request head from buf[0..len). Leading empty lines are skipped (they count toward
 * max_bytes). hdrs has room for max_headers entries. On FT_HP_DONE *out is complete and points into
 * buf; on any other result *out is unspecified. Linear in len; re-parse from the start when more
 * bytes arrive.
 */
ft_hp_result_t ft_hp_parse_head(const char *buf, size_t len, size_t max_bytes, ft_hp_header_t *hdrs, size_t max_headers,
				ft_hp_head_t *out);

/*
 * The request target of the head in buf[0..len), read leniently: a method token, one space, and target
 * bytes ended by a space, whatever follows (a bad version, a cut line, bad headers). Lets a malformed,
 * too large or late head be answered in the format of the API its path belongs to. true with *target
 * (into buf, not NUL-terminated) and *target_len; false when no target can be told.
 */
bool ft_hp_peek_target(const char *buf, size_t len, const char **target, size_t *target_len);

/* What the head says about the body and the connection. */
typedef struct {
	int64_t content_length; /* -1 = chunked, otherwise the declared length (0 when absent) */
	bool chunked;
	bool keep_alive;      /* HTTP/1.1 unless "close"; HTTP/1.0 only with "keep-alive" */
	bool expect_continue; /* Expect: 100-continue */
} ft_hp_info_t;

/*
 * Checks framing and connection headers of a parsed head. Returns 0, or the status to answer:
 * 400 (Content-Length with Transfer-Encoding, differing or malformed Content-Length, chunked not
 * last or repeated, empty Transfer-Encoding, HTTP/1.1 without exactly one Host), 501 (a transfer
 * coding other than chunked).
 */
int ft_hp_analyze(const ft_hp_head_t *h, const ft_hp_header_t *hdrs, ft_hp_info_t *out);

/* ---- response heads, for the clients of other HTTP/1.x servers ---- */

/* A parsed response head; reason points into the parsed buffer (not NUL-terminated). */
typedef struct {
	int version_minor; /* x of HTTP/1.x */
	int status;        /* 100..599 */
	const char *reason;
	size_t reason_len;      /* 0 when the reason phrase is empty or absent */
	size_t nheaders;        /* entries filled in the caller's array */
	size_t head_len;        /* bytes of the head, including the final empty line: the body starts there */
	int64_t content_length; /* the declared length; -1 without one (chunked, or delimited by the close) */
	bool chunked;           /* Transfer-Encoding: chunked */
	bool keep_alive;        /* HTTP/1.1 unless "close"; HTTP/1.0 only with "keep-alive" */
} ft_hp_resp_head_t;

/*
 * Parses a response head from buf[0..len): the status line "HTTP/1.x SP 3DIGIT [SP reason]", the
 * headers into hdrs (room for max_headers), then the framing and connection headers. Lines and
 * headers follow the rules of ft_hp_parse_head (no CR inside a line, no obsolete line folding, the
 * same limits), but no empty line may come before the status line. FT_HP_BAD also for a status
 * outside 100..599, a Content-Length that is empty, not decimal, overflowing or differing from
 * another one, Content-Length together with Transfer-Encoding, or a Transfer-Encoding other than
 * exactly "chunked"; FT_HP_VERSION for another major version than 1. Bytes that cannot start a
 * status line are FT_HP_BAD at once. On FT_HP_DONE *out is complete and points into buf; on any
 * other result *out is unspecified. Whether a body follows is the caller's to decide (a response to
 * HEAD, 1xx, 204 and 304 have none). Linear in len; re-parse from the start when more bytes arrive.
 */
ft_hp_result_t ft_hp_parse_resp_head(const char *buf, size_t len, size_t max_bytes, ft_hp_header_t *hdrs,
				     size_t max_headers, ft_hp_resp_head_t *out);

/* Case-insensitive comparison of n bytes of a with the NUL-terminated b (true when equal and b has n bytes). */
bool ft_hp_token_eq(const char *a, size_t n, const char *b);

/* Whether a byte may appear in a token (RFC 9110 tchar), indexed by the byte. */
extern const bool ft_hp_tchar[256];

/* ---- chunked transfer coding ---- */

typedef struct {
	uint8_t state;
	uint8_t ndigits;
	uint64_t size;     /* chunk size being parsed / bytes of data left in the current chunk */
	uint32_t line_len; /* bytes of the current size line or trailer line */
	uint32_t trailer_len;
} ft_hp_chunked_t;

typedef enum {
	FT_HP_CHUNK_OK = 0,   /* progress made; call again if input remains */
	FT_HP_CHUNK_DONE = 1, /* last chunk and trailers read; *consumed ends the body */
	FT_HP_CHUNK_BAD = 2,  /* bad framing */
} ft_hp_chunk_result_t;

/* Longest chunk-size line (digits and extensions) and total trailer section accepted. */
#define FT_HP_CHUNK_LINE_MAX 4096
#define FT_HP_TRAILER_MAX 16384

void ft_hp_chunked_init(ft_hp_chunked_t *c);
/*
 * Decodes from in[0..len). Stops after at most one span of data, which it reports as *data and *data_len
 * (pointing into in; *data_len is 0 when none); *consumed is how many input bytes were used,
 * including that span. Chunk extensions and trailers are skipped. Works with any split of the input
 * across calls. After DONE or BAD the state must be re-initialised before reuse.
 */
ft_hp_chunk_result_t ft_hp_chunked_decode(ft_hp_chunked_t *c, const char *in, size_t len, size_t *consumed,
					  const char **data, size_t *data_len);

#endif
