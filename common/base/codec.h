/* SPDX-License-Identifier: Apache-2.0 */
/* Byte codecs: hex, base64 (RFC 4648), percent-encoding (RFC 3986) and the HTTP, SigV4 and ISO 8601 date forms. */
#ifndef FT_CODEC_H
#define FT_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/strbuf.h"

/* ---- hex ---- */

/* Writes the lowercase hex of in[0..n) to out: 2n digits and a NUL. */
void ft_hex_encode(const void *in, size_t n, char *out);
/* The value of the hex digit c (either case), or -1. */
int ft_hex_digit(int c);

#define FT_HEX_LOWERCASE 0x1 /* decode: only lowercase digits (a text we wrote ourselves), else either case */
/*
 * Decodes exactly len hex digits into out[cap]. Returns the byte count (len / 2), or -1 for an
 * odd len, a character that is not a digit (see FT_HEX_LOWERCASE) or more than cap bytes.
 */
long ft_hex_decode(const char *hex, size_t len, void *out, size_t cap, unsigned flags);

#define FT_RANDOM_ID_LEN 32
/* A random identifier: the hex of 16 random bytes (OpenSSL's RAND_bytes, else /dev/urandom), NUL-terminated. */
void ft_random_id(char out[FT_RANDOM_ID_LEN + 1]);

/* ---- base64 (RFC 4648) ---- */

#define FT_BASE64_LEN(n) (((n) + 2) / 3 * 4) /* padded base64 of n bytes, without the NUL */

/* The standard alphabet ('+', '/') with '=' padding into out (FT_BASE64_LEN(n) + 1 bytes); returns the length. */
size_t ft_base64_encode(const void *in, size_t n, char *out);
/*
 * Decodes standard base64 with padding. in[0..n): n a multiple of 4, or 0. Returns the byte count,
 * or -1 when in does not decode or the bytes do not fit in cap. Decoding is OpenSSL's
 * EVP_DecodeBlock, with its tolerance: blanks before the text and line ends after it are skipped,
 * and an '=' inside the text counts as zero bits; the padding ('=' in the last two places) is
 * taken off the count.
 */
long ft_base64_decode(const char *in, size_t n, void *out, size_t cap);
/* The URL alphabet ('-', '_'), no padding, into out (FT_BASE64_LEN(n) + 1 bytes); returns the length. */
size_t ft_base64url_encode(const void *in, size_t n, char *out);
/*
 * Decodes unpadded base64url (as JWTs carry it): returns the byte count, or -1 on a character
 * outside the URL alphabet ('=' included) or more than cap bytes. Bits left over after the last
 * whole byte are dropped unchecked.
 */
long ft_base64url_decode(const char *in, size_t n, void *out, size_t cap);

/* ---- percent-encoding (RFC 3986) ---- */

/*
 * Encoding keeps the unreserved characters (A-Z a-z 0-9 - . _ ~) and writes every other byte as
 * %XX, uppercase hex; '/' too unless FT_PCT_KEEP_SLASH. Decoding turns %XX (either case) into its
 * byte; a '%' without two hex digits after it is an error with FT_PCT_STRICT, else a plain '%'.
 */
/* encode: '/' stays (a path; the dots of a "." or ".." segment become %2E); else it is %2F (a segment, a query value) */
#define FT_PCT_KEEP_SLASH 0x1
#define FT_PCT_PLUS_SPACE 0x2 /* decode: '+' is a space (form and query encoding); else a plus */
#define FT_PCT_STRICT 0x4     /* decode: a '%' without two hex digits fails */

/* Encodes s[0..n) into out (room for 3n + 1 bytes), NUL-terminated; returns the length. */
size_t ft_pct_encode(const char *s, size_t n, char *out, unsigned flags);
/* Appends s[0..n) encoded to b. */
void ft_pct_encode_buf(ft_strbuf_t *b, const char *s, size_t n, unsigned flags);
/* s[0..n) encoded, malloc'd (the caller frees); NULL when out of memory. */
char *ft_pct_encode_dup(const char *s, size_t n, unsigned flags);

/*
 * The byte at s[*i] (*i < n) decoded, advancing *i past it (over three characters for %XX).
 * Returns it (0..255), or -1 with FT_PCT_STRICT at a bad escape (*i unchanged).
 */
int ft_pct_next(const char *s, size_t n, size_t *i, unsigned flags);
/* Decodes s[0..n) into out (room for n + 1 bytes), NUL-terminated; returns the length, -1 (FT_PCT_STRICT). */
long ft_pct_decode(const char *s, size_t n, char *out, unsigned flags);
/* Appends s[0..n) decoded to b; 0, or -1 at a bad escape with FT_PCT_STRICT (b holds what came before it). */
int ft_pct_decode_buf(ft_strbuf_t *b, const char *s, size_t n, unsigned flags);
/*
 * Appends s[0..n) decoded once (never strict; FT_PCT_PLUS_SPACE applies) and encoded again
 * (FT_PCT_KEEP_SLASH applies): one spelling for every encoding of the same bytes, as SigV4
 * canonicalizes S3 paths and queries ("~", "%7e" and "%7E" all give "~"; "%2F" stays "%2F").
 */
void ft_pct_recode_buf(ft_strbuf_t *b, const char *s, size_t n, unsigned flags);

/* ---- dates (UTC; month and day names are English whatever the locale) ---- */

#define FT_U64_DEC_MAX 21 /* 18446744073709551615 and the NUL */
/* Writes v in decimal and a NUL to out; returns the number of digits. */
size_t ft_u64_dec(uint64_t v, char out[FT_U64_DEC_MAX]);

#define FT_DATE_HTTP_MAX 30    /* "Sun, 06 Nov 1994 08:49:37 GMT" and the NUL */
#define FT_DATE_AMZ_MAX 17     /* "19941106T084937Z" and the NUL */
#define FT_DATE_ISO8601_MAX 25 /* "1994-11-06T08:49:37.000Z" and the NUL */

/* t as an IMF-fixdate (RFC 9110's preferred HTTP-date, RFC 1123 form): "Sun, 06 Nov 1994 08:49:37 GMT"; "" past 9999. */
/* UTC fields of t seconds since the epoch, as gmtime_r gives them (tm_yday and tm_isdst left 0). */
void ft_utc_fields(int64_t t, struct tm *tm);
void ft_date_format_http(time_t t, char out[FT_DATE_HTTP_MAX]);
/* t in ISO 8601 basic form, as SigV4's x-amz-date: "19941106T084937Z"; "" outside the years 1000 to 9999. */
void ft_date_format_amz(time_t t, char out[FT_DATE_AMZ_MAX]);
/* ns since the epoch in ISO 8601 extended form with milliseconds, as S3 lists dates: "1994-11-06T08:49:37.250Z". */
void ft_date_format_iso8601(int64_t ns, char *out, size_t cap);

/* Forms the parsers accept (any combination; tried in this order). */
#define FT_DATE_HTTP 0x1          /* IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" */
#define FT_DATE_HTTP_OBSOLETE 0x2 /* RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT" and asctime "Sun Nov  6 08:49:37 1994" */
#define FT_DATE_AMZ 0x4           /* ISO 8601 basic "19941106T084937Z" */

/*
 * Parses the whole of s in one of the forms with strptime(3) and its leniency (day and month
 * names in any case and in full, fields with fewer digits, blanks around them). 0 with *t, or -1
 * when no form fits or the time is not representable.
 */
int ft_date_parse(const char *s, unsigned forms, time_t *t);
/*
 * Parses s in one of the forms (FT_DATE_HTTP, FT_DATE_AMZ) exactly as written above: fixed
 * widths, digits only, names as shown (the weekday is not checked), no blanks; FT_DATE_HTTP also
 * takes "UTC", "+0000" and "-0000" for "GMT" (Python's email.utils.formatdate writes "-0000").
 * Years from 1970. What a signature covers has one spelling. 0 with *t, or -1.
 */
int ft_date_parse_exact(const char *s, unsigned forms, time_t *t);
/*
 * ISO 8601 extended as backends write it: "1994-11-06T08:49:37[.fraction]" then "Z" or "+00:00"
 * (the date and time read by strptime); 0 with *ns (ns since the epoch), or -1, also for a time
 * int64 ns cannot hold (before 1677 or after 2262).
 */
int ft_date_parse_iso8601(const char *s, int64_t *ns);

/*
 * A duration as Go writes and reads it (time.Duration's String, AIStore's JSON): "0", or one or more
 * <decimal number><unit> with unit ns, us (also µs, μs), ms, s, m, h, e.g. "5m", "1h30m", "1.5s",
 * "300ms"; no sign. 0 with *ns, or -1 (malformed, or past int64 nanoseconds).
 */
int ft_duration_parse(const char *s, int64_t *ns);

/* Whether s (NUL-terminated) is valid UTF-8; *non_ascii (may be NULL) says whether it holds a byte above 0x7f. */
bool ft_utf8_valid(const char *s, bool *non_ascii);
/* The same for s[0..len) (a NUL byte there is a valid one-byte character). */
bool ft_utf8_valid_n(const char *s, size_t len, bool *non_ascii);

#endif
