/* SPDX-License-Identifier: Apache-2.0 */
/* Internals the S3 object modules share (get.c, copy.c, object.c, target_head.c): a target's answer as the relay reads it. */
#ifndef PX_S3_OBJECT_H
#define PX_S3_OBJECT_H

#include <curl/curl.h>

#include "s3/s3.h"

#define PX_S3_PUT_MAX (5ull << 30)  /* S3's limit for one PutObject or CopyObject; larger objects use multipart */
#define PX_S3_ERRBODY_MAX 1024      /* bytes of a target's error body kept */
#define PX_S3_META_MAX 4096         /* the target's stored Content-Type and x-amz-meta-* lines */
#define PX_S3_CHUNK_MAX (64 * 1024) /* curl never hands over more at once with this buffer size */
#define PX_S3_UMETA_PREFIX_LEN 11   /* "x-amz-meta-" */
#define PX_S3_CK_PREFIX_LEN 15      /* "x-amz-checksum-" */

/* What the target answered so far (the current response; a redirect's headers are replaced). */
typedef struct {
	long status;
	int64_t length;
	char etag[PX_S3_ETAG_MAX];
	char last_modified[64];
	char content_range[128];
	char content_type[256];
	char meta[PX_S3_META_MAX]; /* "x-amz-meta-<name>: <value>\n" lines as the target sent them */
	size_t meta_len;
	bool meta_cut;     /* more than PX_S3_META_MAX: never the case for what a target stores */
	bool headers_done; /* the final response's header block ended */
	char errbody[PX_S3_ERRBODY_MAX + 1];
	size_t errlen;
} px_s3_target_head_t;

/* A target's response head as curl hands it over, a line at a time, up to its empty line. */
typedef struct {
	char buf[PX_S3_TARGET_HEAD_MAX];
	size_t len;
	bool overflow;
} px_s3_head_lines_t;

/* Replaces t with what GET, HEAD and the copy's source use of a target's parsed response head. */
void px_s3_target_head_fill(px_s3_target_head_t *t, const ft_hp_resp_head_t *h, const ft_hp_header_t *hdrs);
/*
 * Header-callback work shared by GET and the copy's source: gathers the lines of a head in l and,
 * at its empty line, parses it into t (a head that does not parse leaves t with status 0). Returns
 * true at the end of a final head; lines after it (trailers) are ignored.
 */
bool px_s3_target_head_line(px_s3_target_head_t *t, px_s3_head_lines_t *l, const char *buf, size_t n);
/* Appends "Name: value" to a curl header list when the request has the header (under from). */
struct curl_slist *px_s3_forward_header(struct curl_slist *l, ft_req_t *r, const char *from, const char *to);
/* Appends n bytes of an error body to dst (PX_S3_ERRBODY_MAX + 1 bytes, *len used), cut to fit, NUL-terminated. */
void px_s3_keep_errbody(char *dst, size_t *len, const char *buf, size_t n);
/* The "message" and "code" of a target's JSON error body, into reply. */
void px_s3_error_reply(const char *body, size_t len, px_s3_target_reply_t *reply);
/* px_s3_meta_lines, answering its error (object.c): 0, or -1 after responding. */
int px_s3_meta_lines_or_error(px_s3_req_t *q, const char ***lines);

/*
 * Relay loop thread (get.c): answers q from the target's whole answer in buf: a head of head_len
 * bytes, then its body up to len (a 200/206 object body, an error body, or none).
 */
void px_s3_get_answer(px_s3_req_t *q, const char *buf, size_t head_len, size_t len);
/*
 * Relay loop thread (get.c): answers q with the target's 200/206 whose head (head_len bytes) and
 * first body bytes (up to len) are in buf (copied), the rest of its Content-Length still in the
 * connection fd (non-blocking), moved to the client by this loop thread (ft_resp_socket). fd stays
 * the caller's until done(arg, err) runs on this thread (err 0: the body was read whole from fd).
 */
void px_s3_get_stream(px_s3_req_t *q, const char *buf, size_t head_len, size_t len, int fd,
		      void (*done)(void *arg, int err), void *arg);
/*
 * Relay loop thread (get.c): q goes on a worker, with the connection fd (blocking; -1 for none:
 * the worker asks again) to hostport and the len bytes buf (malloc'd, taken; a whole response
 * head, maybe followed by the first body bytes) already read from it.
 */
void px_s3_get_handoff(px_s3_req_t *q, int fd, const char *hostport, char *buf, size_t len);

#endif
