/* SPDX-License-Identifier: Apache-2.0 */
/* Internal header of erasure coding (ec_owner.c, ec_send.c, ec_holder.c): limits, slice names, shared helpers. */
#ifndef TGT_PROTECT_EC_H
#define TGT_PROTECT_EC_H

#include "base/fanout.h"
#include "protect/ec_codec.h"
#include "rpc/ctl.h"
#include "target.h"

#define EC_XFER_CHUNK (8u << 20) /* bytes per POST: the control port buffers at most 16 MiB */
#define EC_TIMEOUT_MS 60000      /* a POST; for a GET, the longest stall */
#define EC_PROBE_TIMEOUT_MS 5000
#define EC_PUBLISH_ATTEMPTS 4
#define EC_SWEEP_EVERY_S 60
#define EC_XFER_STALE_S 600     /* a transfer's work file untouched this long was abandoned */
#define EC_MEMFD_MAX (8u << 20) /* the slices of one object are encoded in memory up to this total */
#define EC_REL_MAX (sizeof(TGT_EC_DIR) + TGT_REL_MAX)
/* control URL, path, the name query (object name percent-encoded: up to 3 bytes per byte), the rest */
#define EC_URL_MAX (FT_URL_MAX + 3 * FT_OBJ_NAME_MAX + FT_BUCKET_NAME_MAX + 256)

/* A target that holds (or is to hold) a slice. */
typedef struct {
	char id[FT_ID_MAX];
	char url[FT_URL_MAX]; /* control URL */
	char pub[FT_URL_MAX]; /* public URL: whole slices go there (ec_push.c, ec_recv.c) */
} ec_node_t;

typedef struct {
	char provider[TGT_PROVIDER_MAX];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	const char *obj;
	char rel[EC_REL_MAX];      /* ".ec/<provider>/<bucket>/<obj>" */
	char krel[EC_REL_MAX];     /* its hashed path when its own may be taken (core/keymap.h), or "" */
	const tgt_mountpath_t *mp; /* where it is stored */
} ec_name_t;

/* ---- ec_owner.c ---- */
/* Syncs fd per the sync policy; 0 or -errno. */
int ec_sync(const tgt_t *t, int fd);
/* POST /v1/ec/encode: the "ec-encode" job's action on one object stored here. */
void ec_ctl_encode(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- ec_send.c ---- */
/*
 * Encodes the object open at fd (base: its slice metadata, idx and slice_cksum aside; D+P slices
 * of at most EC_MEMFD_MAX in all) in memory and POSTs slice i to holders[i], all at once on
 * fanout. 0 once every holder stored its slice, or -1 with err (the first failure in slice order).
 */
int ec_send_mem(ft_fanout_t *fanout, const ec_node_t *holders, const ft_ec_meta_t *base, int fd, char *err, size_t cap);

/* ---- ec_push.c ---- */
/*
 * PUTs one whole slice (its framed header hdr, hlen bytes, then payload, slice_size bytes) to the
 * public port at pub_url as "PUT /v1/ec/slice?<names>&xfer=<xfer>", on a kept-alive connection to
 * it (an https holder only through its Unix socket, which speaks plain HTTP). Returns 0 with
 * *status the holder's answer (msg its "message" when not 200), -1 with msg when no answer came
 * (connection refused, reset, timed out), or 1 when an https holder has no Unix socket here (or
 * pub_url is no http(s)://host:port): nothing was sent (the caller uses the control port).
 */
int ec_push_slice(const char *pub_url, const char *names, unsigned long long xfer, const uint8_t *hdr, size_t hlen,
		  const uint8_t *payload, uint64_t slice_size, int timeout_ms, long *status, char *msg, size_t cap);

/* ---- ec_holder.c ---- */
/* The outcome of storing a received slice. */
typedef struct {
	int status; /* 200 stored (or kept: a newer version is here), 0 busy (nowait), else the HTTP error */
	int kept;
	int idx, replica;
	char msg[2 * FT_OBJ_NAME_MAX + 512]; /* why not, when status != 200 */
} ec_store_t;
/*
 * Stores the complete slice in the work file work (open at fd) on n->mp: verified (its header, when
 * already checked) or read back and checked, then renamed into place under the name lock unless a
 * newer version is held. The caller removes work afterwards (gone when it was renamed). With
 * nowait the name lock is only tried: status 0 when it was taken (nothing done).
 */
void ec_slice_store(tgt_t *t, ec_name_t *n, int fd, const char *work, const ft_ec_meta_t *verified, int nowait,
		    ec_store_t *out);
/* Removes abandoned transfers' work files (at most once per EC_SWEEP_EVERY_S). */
void ec_sweep_stale(const tgt_t *t);
/* provider, bucket and obj validated into n; 0, or -1 with err. */
int ec_names_parse(const tgt_t *t, const char *p, const char *b, const char *obj, ec_name_t *n, char *err, size_t cap);
/* provider, bucket, obj of the query, validated. 0, or -1 after answering 400. */
int ec_ctl_names(const tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp, ec_name_t *n);
/* An unsigned query argument; 0, or -1 when absent or malformed. */
int ec_ctl_u64(const ft_ctl_req_t *req, const char *key, uint64_t *out);

#endif
