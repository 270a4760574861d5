/* SPDX-License-Identifier: Apache-2.0 */
/* Slice transfer for erasure coding: slices and their headers travel as bytes (binary POST and GET bodies). */
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
/* Takes the next n bytes of a 200 reply's body; 0, or non-zero to abort the transfer (err filled). */
typedef int (*ft_ec_sink_fn)(void *arg, const uint8_t *p, size_t n, char *err, size_t errlen);
/*
 * GETs url; the body of a 200 reply goes to sink as it arrives (no copy of the whole). On a
 * completed exchange returns 0 with *status (for another status, err holds the reply's
 * "message"). Returns -1 on a connection error, a stall of idle_ms without a byte, or a sink
 * failure (err filled).
 */
int ft_ec_xfer_get(const char *url, int idle_ms, ft_ec_sink_fn sink, void *arg, long *status, char *err, size_t errlen);

#endif
