/* Slice transfer helpers for erasure coding: binary POSTs through the node client, base64 codecs. */
#include "protect/ec_xfer.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "rpc/client.h"

/*
 * DESIGN
 * Slices are bytes, not JSON: they go through ft_client_send, on common/client.c's per-thread
 * keep-alive handle, so the slices of one PUT, sent one after another from one worker thread,
 * reuse connections. Replies are the control port's JSON.
 */

int ft_ec_xfer_post(const char *url, const void *body, size_t len, int timeout_ms, long *status, json_t **resp,
		    char *err, size_t errlen)
{
	static const char *const headers[] = {"Content-Type: application/octet-stream", NULL};

	return ft_client_send("POST", url, headers, body, len, timeout_ms, status, resp, err, errlen);
}

char *ft_ec_xfer_escape(const char *s)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *o = out;

	if (out == NULL)
		return NULL;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c)) {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = digits[c >> 4];
			*o++ = digits[c & 15];
		}
	}
	*o = '\0';
	return out;
}

char *ft_ec_b64_encode(const void *buf, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);

	if (out != NULL)
		EVP_EncodeBlock((unsigned char *)out, buf, (int)len);
	return out;
}

long ft_ec_b64_decode(const char *text, size_t text_len, uint8_t *out, size_t cap)
{
	size_t pad = 0;
	int n;

	if (text_len % 4 != 0 || text_len / 4 * 3 > cap)
		return -1;
	if (text_len == 0)
		return 0;
	pad = (text[text_len - 1] == '=') + (text[text_len - 2] == '=');
	n = EVP_DecodeBlock(out, (const unsigned char *)text, (int)text_len);
	if (n < 0 || (size_t)n < pad)
		return -1;
	return (long)((size_t)n - pad);
}
