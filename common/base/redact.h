/* SPDX-License-Identifier: Apache-2.0 */
/* What a log line or an error message may show of a URL: never its credentials (signed queries, user:password@). */
#ifndef FT_REDACT_H
#define FT_REDACT_H

#include <stddef.h>

#define FT_REDACTED "***"     /* what a hidden value is written as */
#define FT_REDACT_URL_MAX 512 /* a good size for a buffer of ft_redact_url */

/*
 * Writes url into out[cap] (cap > 0, NUL-terminated, cut when longer) as messages may show it:
 * scheme, host and path as they are; a "user:password@" before the host dropped; every query
 * value written as FT_REDACTED (a presigned S3, Azure SAS or GCS URL carries its signature,
 * credential and token there, a cluster URL its ft_sig), except those of the cluster's own
 * harmless keys (provider, mpu, part); a query item without '=' as FT_REDACTED; no fragment.
 * Returns out, so that it can stand as a printf argument.
 */
const char *ft_redact_url(const char *url, char *out, size_t cap);

#endif
