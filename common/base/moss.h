/* SPDX-License-Identifier: Apache-2.0 */
/* AIStore's GetBatch request (a MossReq at /v1/ml/moss) read as FastTier's batch request (POST /v1/batch). */
#ifndef FT_MOSS_H
#define FT_MOSS_H

#include <stddef.h>

#include <jansson.h>

#define FT_MOSS_PATH "/v1/ml/moss"

/*
 * The body of GET /v1/ml/moss[/<bucket>]?provider=P, AIStore's MossReq: {"in": [{"objname",
 * "bucket", "provider", "archpath", "start", "length", "opaque", "uname"}...], "mime", "coer",
 * "onob", "strm", "coloc"}, as the batch request the targets assemble: {"in": [{"bucket",
 * "provider", "objname", "archpath", "start", "length", "opaque"}...], "continue_on_error",
 * "only_objname", "buffered"}. An item without "bucket"/"provider" takes the URL's (bucket may be
 * "" when the URL has none; provider NULL or "" means "ais"; AIStore's "s3" is "aws"); a "length"
 * of -1 means to the end. "buffered" is true unless "strm" is (AIStore's default answer is the
 * buffered one: multipart, metadata then TAR); "opaque" (base64 text) is kept for its metadata,
 * and "coloc" is a hint.
 * Returns the new document (the caller owns it), or NULL with *status and why: 400 for a body that
 * is not a MossReq, 501 for what is not built (an output other than TAR; "uname").
 */
json_t *ft_moss_to_batch(const char *body, size_t len, const char *bucket, const char *provider, int *status, char *why,
			 size_t cap);

#endif
