/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of the response-head parser of common/http/parse.c (ft_hp_parse_resp_head). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/parse.h"

#define MAX_HEADERS 32
#define MAX_BYTES 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Everything a parsed head says lies inside its head_len bytes and keeps to the documented ranges. */
static void check_done(const char *buf, const ft_hp_resp_head_t *h, const ft_hp_header_t *hdrs)
{
	const char *end = buf + h->head_len;
	size_t i;

	if (h->head_len > MAX_BYTES || h->nheaders > MAX_HEADERS || h->status < 100 || h->status > 599)
		abort();
	if (h->version_minor < 0 || h->version_minor > 9 || memcmp(buf, "HTTP/1.", 7) != 0)
		abort();
	if (h->reason < buf || h->reason + h->reason_len > end || memchr(h->reason, '\n', h->reason_len))
		abort();
	if (h->chunked && h->content_length != -1)
		abort();
	if (h->content_length < -1)
		abort();
	for (i = 0; i < h->nheaders; i++) {
		if (hdrs[i].name_len == 0 || hdrs[i].name < buf || hdrs[i].value + hdrs[i].value_len > end)
			abort();
		if (memchr(hdrs[i].value, '\r', hdrs[i].value_len) || memchr(hdrs[i].value, '\n', hdrs[i].value_len))
			abort();
		if (memchr(hdrs[i].name, ':', hdrs[i].name_len))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ft_hp_header_t hdrs[MAX_HEADERS], again_hdrs[MAX_HEADERS];
	ft_hp_resp_head_t h, again;
	const char *buf;
	size_t cut;

	if (size < 2)
		return 0;
	/* the first two bytes choose where a read would have split the head */
	cut = ((size_t)data[0] << 8 | data[1]);
	buf = (const char *)data + 2;
	size -= 2;
	if (ft_hp_parse_resp_head(buf, size, MAX_BYTES, hdrs, MAX_HEADERS, &h) != FT_HP_DONE)
		return 0;
	check_done(buf, &h, hdrs);
	/* a head that arrives in two reads: the first part is incomplete, never an error */
	cut %= h.head_len;
	if (ft_hp_parse_resp_head(buf, cut, MAX_BYTES, again_hdrs, MAX_HEADERS, &again) != FT_HP_AGAIN)
		abort();
	/* the head alone parses the same as with the bytes after it */
	if (ft_hp_parse_resp_head(buf, h.head_len, MAX_BYTES, again_hdrs, MAX_HEADERS, &again) != FT_HP_DONE)
		abort();
	if (memcmp(&h, &again, sizeof(h)) != 0 || memcmp(hdrs, again_hdrs, h.nheaders * sizeof(hdrs[0])) != 0)
		abort();
	return 0;
}
