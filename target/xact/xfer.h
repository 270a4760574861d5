/* SPDX-License-Identifier: Apache-2.0 */
/* Object transfers of the copy and download jobs: an object's owner reached over its public port (HEAD, PUT, DELETE). */
#ifndef TGT_XACT_XFER_H
#define TGT_XACT_XFER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/cksum.h"
#include "core/lom.h"

#define TGT_XFER_URL_MAX 4096

/* What an owner says about an object (HEAD, or the answer to a PUT). */
typedef struct {
	int64_t size; /* -1: not said */
	char cksum_type[16];
	char cksum[FT_CKSUM_HEX_MAX];
} tgt_xfer_head_t;

/*
 * "<base>/v1/objects/<bucket>/<name>?provider=<provider>" with the name percent-encoded ('/' kept).
 * 0, or -1 when it does not fit in cap.
 */
int tgt_xfer_obj_url(char *buf, size_t cap, const char *base, const char *provider, const char *bucket,
		     const char *name);
/* HEAD url: 1 found (h filled), 0 not found (404), -1 with err. */
int tgt_xfer_head(const char *url, tgt_xfer_head_t *h, char *err, size_t cap);
/*
 * PUTs size bytes of fd (from offset 0) to url, with lom's Content-Type and x-amz-meta-* (lom may
 * be NULL). With verify, the bytes are lom's object as stored: lom's checksum goes along
 * (Ais-Checksum-Type/-Value), so the owner checks the body against it whatever its bucket's type
 * and stores nothing when they differ (a source damaged on disk or bytes damaged on the way).
 * 0 with *h the owner's checksum of what it stored, -1 with err (the owner stored nothing new).
 */
int tgt_xfer_put(const char *url, int fd, int64_t size, const ft_lom_t *lom, bool verify, tgt_xfer_head_t *h, char *err,
		 size_t cap);
/* DELETE url: 0 removed or not there, -1 with err. */
int tgt_xfer_delete(const char *url, char *err, size_t cap);
/*
 * GETs url (any HTTP server; redirects followed) into fd from offset 0. 0 with *bytes, -1 with
 * err; *status is the HTTP status (0 when no answer), *retry whether trying again may help
 * (connection errors, 408, 429, 5xx). progress (may be NULL) follows the bytes written.
 */
int tgt_xfer_fetch(const char *url, int fd, atomic_llong *progress, int64_t *bytes, long *status, int *retry, char *err,
		   size_t cap);
/* GETs url on a node of the cluster (its token sent when auth is on) into fd, as tgt_xfer_fetch. */
int tgt_xfer_get(const char *url, int fd, int64_t *bytes, long *status, char *err, size_t cap);

#endif
