/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness for http/parse.c (head parser, framing, chunked decoder) and percent-decoding (base/codec.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "http/parse.h"

#define MAX_HEADERS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_head(const char *buf, size_t len)
{
	ft_hp_header_t hdrs[MAX_HEADERS];
	ft_hp_head_t h;
	ft_hp_info_t info;
	size_t i, tl;
	const char *t;

	/* the lenient target read answers every head, parsed or not: it must stay inside buf */
	if (ft_hp_peek_target(buf, len, &t, &tl) && (t < buf || tl == 0 || t + tl > buf + len))
		abort();
	if (ft_hp_parse_head(buf, len, 8192, hdrs, MAX_HEADERS, &h) != FT_HP_DONE)
		return;
	if (h.head_len > len || h.head_len > 8192 || h.nheaders > MAX_HEADERS || h.method_len == 0 || h.target_len == 0)
		abort();
	if (h.method < buf || h.target + h.target_len > buf + h.head_len)
		abort();
	for (i = 0; i < h.nheaders; i++) {
		if (hdrs[i].name_len == 0 || hdrs[i].name < buf || hdrs[i].value + hdrs[i].value_len > buf + h.head_len)
			abort();
		if (memchr(hdrs[i].value, '\r', hdrs[i].value_len) || memchr(hdrs[i].value, '\n', hdrs[i].value_len))
			abort();
	}
	if (ft_hp_analyze(&h, hdrs, &info) == 0 && info.chunked != (info.content_length == -1))
		abort();
}

/* Decodes in pieces of `step` bytes; returns the result, the output and the bytes consumed. */
static int chunked_run(const char *in, size_t len, size_t step, char *out, size_t *outlen, size_t *used_total)
{
	ft_hp_chunked_t c;
	size_t off = 0, end, used, dl;
	const char *d;
	int rc = FT_HP_CHUNK_OK;

	ft_hp_chunked_init(&c);
	*outlen = 0;
	while (off < len) {
		end = off + step < len ? off + step : len;
		while (off < end) {
			rc = ft_hp_chunked_decode(&c, in + off, end - off, &used, &d, &dl);
			if (used > end - off || (dl > 0 && (d < in + off || d + dl > in + off + used)))
				abort();
			if (used == 0 && rc == FT_HP_CHUNK_OK)
				abort(); /* no progress */
			if (dl > 0)
				memcpy(out + *outlen, d, dl);
			*outlen += dl;
			off += used;
			if (rc != FT_HP_CHUNK_OK)
				goto out;
		}
	}
out:
	*used_total = off;
	return rc;
}

static void check_chunked(const char *buf, size_t len, size_t step)
{
	char *a = malloc(len + 1), *b = malloc(len + 1);
	size_t alen, blen, aused, bused;
	int ra, rb;

	ra = chunked_run(buf, len, len ? len : 1, a, &alen, &aused);
	rb = chunked_run(buf, len, step, b, &blen, &bused);
	/* the result must not depend on how the input was split */
	if (ra != rb || alen != blen || aused != bused || memcmp(a, b, alen) != 0)
		abort();
	if (alen > len)
		abort();
	free(a);
	free(b);
}

static void check_pct(const char *buf, size_t len)
{
	char *out = malloc(len + 1);
	long n = ft_pct_decode(buf, len, out, FT_PCT_PLUS_SPACE);

	if (n < 0 || (size_t)n > len || out[n] != 0)
		abort();
	n = ft_pct_decode(buf, len, out, FT_PCT_STRICT);
	if (n >= 0 && ((size_t)n > len || out[n] != 0))
		abort();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf;
	size_t step;

	if (size < 1)
		return 0;
	step = (size_t)(data[0] % 23) + 1;
	buf = (const char *)data + 1;
	size--;
	check_head(buf, size);
	check_chunked(buf, size, step);
	check_pct(buf, size);
	return 0;
}
