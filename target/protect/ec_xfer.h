/* Slice transfer helpers for erasure coding: binary POST bodies over libcurl, base64 for JSON replies. */
#ifndef FT_EC_XFER_H
#define FT_EC_XFER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/*
 * POSTs len bytes of body (borrowed) to url as application/octet-stream. On a completed exchange
 * returns 0 with *status and *resp (parsed JSON reply or NULL; caller owns it). Returns -1 on a
 * connection error or timeout (err filled). timeout_ms <= 0: none.
 */
int ft_ec_xfer_post(const char *url, const void *body, size_t len, int timeout_ms, long *status, json_t **resp,
		    char *err, size_t errlen);
/* Percent-encodes s for a query value (malloc'd, caller frees; NULL on allocation failure). */
char *ft_ec_xfer_escape(const char *s);
/* base64 of len bytes (malloc'd, NUL-terminated; NULL on allocation failure). */
char *ft_ec_b64_encode(const void *buf, size_t len);
/* Decodes base64 text into out[cap]; returns the byte count, or -1 for bad text or too small a buffer. */
long ft_ec_b64_decode(const char *text, size_t text_len, uint8_t *out, size_t cap);

#endif
