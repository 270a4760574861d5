/* SPDX-License-Identifier: Apache-2.0 */
/* S3 API front-end of the proxy: the request context and the contracts between its files (s3*.c). */
#ifndef PX_S3_H
#define PX_S3_H

/*
 * DESIGN
 * route.c takes a public-port request when it is an S3 request (path style under /s3, the root when
 * s3_root is set, virtual-host style for Host <bucket>.<s3_domain>), builds a px_s3_req_t,
 * verifies its SigV4 signature (header or presigned form) on the loop thread, and dispatches by
 * method and subresource to bucket.c, list.c, get.c, object.c, copy.c or multipart.c. Everything
 * that talks to a target runs on a worker (px_s3_defer); object data is relayed through the
 * proxy (no redirect: S3 clients do not follow 307s): GET bodies spliced from the target's
 * socket by relay.c's client, everything else with libcurl.
 *
 * BODIES
 * A request body is only ever read through px_s3_body_read() (or px_s3_body_all()), on a worker.
 * It removes aws-chunked framing, checks every chunk signature, and checks a hex
 * x-amz-content-sha256 and a Content-MD5 before handing out the final byte of the payload: a
 * body that fails verification never reaches a target complete, so nothing is stored.
 *
 * OWNERSHIP
 * px_s3_req_t and everything it points to live in ft_req_alloc memory of its request (freed when
 * the response is finished). The handler that receives it owes exactly one response: an
 * px_s3_error*(), px_s3_send_xml(), px_s3_send_empty(), or a stream ended by ft_resp_stream_end.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "auth/role.h"
#include "base/cksum.h"
#include "base/config.h"
#include "base/fanout.h"
#include "base/names.h"
#include "base/strbuf.h"
#include "base/xsum.h"
#include "http/http.h"
#include "http/parse.h"
#include "s3/sigv4.h"

#define PX_S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define PX_S3_XML_BODY_MAX (2u << 20) /* largest XML request body (DeleteObjects of 1000 long keys) */
/* "<32 hex>-<parts>", or a checksum serving as the ETag (a sha512 bucket's 128 hex digits), with quotes */
#define PX_S3_ETAG_MAX (FT_CKSUM_HEX_MAX + 8)
#define PX_S3_MAX_PARTS 10000
#define PX_S3_GET_RETRIES 2          /* a GET whose target is unreachable tries the object's next owners */
#define PX_S3_TARGET_HEAD_MAX 16384  /* largest response head read from a target */
#define PX_S3_TARGET_HEADERS_MAX 256 /* most headers in it (a stored object's x-amz-meta-* included) */

/* ---- errors: one table (xml.c), one builder ---- */
typedef enum {
	PX_S3_OK = 0,
	PX_S3_ACCESS_DENIED,
	PX_S3_AUTH_HEADER_MALFORMED,
	PX_S3_AUTH_QUERY_ERROR,
	PX_S3_BAD_DIGEST,
	PX_S3_BUCKET_EXISTS_OWNED, /* BucketAlreadyOwnedByYou */
	PX_S3_BUCKET_NOT_EMPTY,
	PX_S3_ENTITY_TOO_LARGE,
	PX_S3_ENTITY_TOO_SMALL,
	PX_S3_INCOMPLETE_BODY,
	PX_S3_INSUFFICIENT_STORAGE,
	PX_S3_INTERNAL,
	PX_S3_INVALID_ACCESS_KEY,
	PX_S3_INVALID_ARGUMENT,
	PX_S3_INVALID_BUCKET_NAME,
	PX_S3_INVALID_DIGEST,
	PX_S3_INVALID_PART,
	PX_S3_INVALID_PART_ORDER,
	PX_S3_INVALID_RANGE,
	PX_S3_INVALID_PART_NUMBER,
	PX_S3_INVALID_REQUEST,
	PX_S3_KEY_TOO_LONG,
	PX_S3_MALFORMED_XML,
	PX_S3_METADATA_TOO_LARGE,
	PX_S3_METHOD_NOT_ALLOWED,
	PX_S3_MISSING_CONTENT_LENGTH,
	PX_S3_NO_SUCH_BUCKET,
	PX_S3_AMBIGUOUS_BUCKET, /* InvalidBucketState: remote buckets of several providers share the name */
	PX_S3_NO_SUCH_KEY,
	PX_S3_NO_SUCH_UPLOAD,
	PX_S3_NOT_IMPLEMENTED,
	PX_S3_PRECONDITION_FAILED,
	PX_S3_REQUEST_TIMEOUT,
	PX_S3_TIME_SKEWED, /* RequestTimeTooSkewed */
	PX_S3_SERVICE_UNAVAILABLE,
	PX_S3_SIGNATURE_MISMATCH, /* SignatureDoesNotMatch */
	PX_S3_SHA256_MISMATCH,    /* XAmzContentSHA256Mismatch */
	PX_S3_CHECKSUM_MISMATCH,  /* BadDigest for an x-amz-checksum-* header or trailer */
	PX_S3_INVALID_CHECKSUM,   /* InvalidRequest: an x-amz-checksum-* value that is not one digest */
	PX_S3_HEADER_TOO_LARGE,   /* RequestHeaderSectionTooLarge */
	/* "not configured" answers of bucket subresources, as S3 gives them */
	PX_S3_NO_SUCH_POLICY,
	PX_S3_NO_SUCH_LIFECYCLE,
	PX_S3_NO_SUCH_CORS,
	PX_S3_NO_SUCH_TAG_SET,
	PX_S3_NO_SUCH_WEBSITE,
	PX_S3_NO_ENCRYPTION,
	PX_S3_NO_OBJECT_LOCK,
	PX_S3_NO_REPLICATION,
	PX_S3_NO_OWNERSHIP_CONTROLS,
	PX_S3_NO_PUBLIC_ACCESS_BLOCK,
	PX_S3_ERR_COUNT,
} px_s3_err_t;

/* The S3 error code ("NoSuchKey"), HTTP status and default message of e. */
const char *px_s3_err_code(px_s3_err_t e);
int px_s3_err_status(px_s3_err_t e);
const char *px_s3_err_message(px_s3_err_t e);

/* ---- the request ---- */
typedef enum {
	PX_S3_STYLE_PATH = 0, /* /s3/<bucket>/<key> */
	PX_S3_STYLE_ROOT,     /* /<bucket>/<key> (s3_root) */
	PX_S3_STYLE_VHOST,    /* Host: <bucket>.<s3_domain>, path /<key> */
} px_s3_style_t;

#define PX_S3_BODY_BUF (64 * 1024)      /* bytes one body read (body.c) or relay to a target moves at most */
typedef struct px_s3_body px_s3_body_t; /* body reader state (body.c) */

/* What a remote bucket's listing page asks of its backend ("" or NULL: none; see the host's rlist_page). */
typedef struct {
	const char *prefix;
	const char *delimiter;
	const char *start_after;
	const char *token;
	int pagesize;
} px_s3_rlist_args_t;

/*
 * What the S3 front end needs from the daemon that serves it, filled in by that daemon (the proxy:
 * main.c), so that proxy/s3/ never includes the proxy's own header. The three calls block: call
 * them from a worker; ctx is passed back to each.
 */
typedef struct {
	const ft_config_t *cfg; /* s3_keys, s3_region, s3_anonymous, s3_root, s3_domain, ... */
	ft_fanout_t *fanout;    /* the daemon's fan-out threads (DeleteObjects, ListMultipartUploads) */
	void *ctx;
	/* Creates bucket (an ais bucket, cksum its checksum): 0, -EEXIST, or -EIO. */
	int (*bucket_create)(void *ctx, const char *bucket, ft_cksum_type_t cksum);
	/* Destroys bucket: 0, -ENOENT, or -EIO. */
	int (*bucket_destroy)(void *ctx, const char *bucket);
	/* Sets bucket's canned ACL (public-read or private): 0, -ENOENT, or -EIO. */
	int (*bucket_set_acl)(void *ctx, const char *bucket, bool public_read);
	/*
	 * One merged listing page of bucket: names starting with prefix, after token, at most pagesize;
	 * 0 with *entries (a JSON array, caller owns) and *more, or -1 with *status and why.
	 */
	int (*list_page)(void *ctx, const char *bucket, const char *prefix, const char *token, int pagesize,
			 json_t **entries, bool *more, int *status, char *why, size_t cap);
	/*
	 * One page of remote bucket's own listing (its backend's; rolled up at a->delimiter unless NULL or "", a
	 * common prefix as an entry {"name": P, "dir": true}): names starting with a->prefix from the backend's page
	 * a->token ("" first; then names after a->start_after where the backend can), at most a->pagesize; 0 with
	 * *entries (caller owns) and *next (the next page's token, "" at the end; caller frees), or -1 with *status
	 * and why.
	 */
	int (*rlist_page)(void *ctx, const char *provider, const char *bucket, const px_s3_rlist_args_t *a,
			  json_t **entries, char **next, int *status, char *why, size_t cap);
	/*
	 * The relay could not connect to target id: 0 when the daemon took it out of the cluster map (every node
	 * holds the new map on return, so the object's new owner serves a retry), -1 when it is alive. May be NULL.
	 */
	int (*target_unreachable)(void *ctx, const char *id);
} px_s3_host_t;

typedef struct px_s3 px_s3_t; /* the front end's state (route.c) */

/* Canned ACLs (acl.c). */
enum { PX_S3_ACL_NONE = 0, PX_S3_ACL_PRIVATE, PX_S3_ACL_PUBLIC_READ };
#define PX_S3_OWNER_ID "fasttier" /* the one owner of every bucket and object */

typedef struct px_s3_req {
	const px_s3_host_t *host;
	px_s3_t *s3;
	ft_req_t *r;
	px_s3_style_t style;
	char bucket[FT_BUCKET_NAME_MAX + 1]; /* "" for service requests (ListBuckets) */
	char provider[16];                   /* the bucket's: "ais", or remote (aws, gcp, azure, ht); route.c */
	const char *key;                     /* decoded object key, NUL-terminated; "" for bucket requests */
	size_t key_len;
	const char *resource;       /* "/<bucket>/<key>" for error bodies */
	char request_id[17];        /* 16 hex digits, sent as x-amz-request-id */
	bool anonymous;             /* unsigned request accepted because s3_anonymous is set */
	bool public_anon;           /* unsigned read of public-read data (acl.c): relayed unsigned, marked ft_anon */
	int acl;                    /* the x-amz-acl asked for (PX_S3_ACL_*), once px_s3_acl_header checked it */
	ft_sigv4_auth_t auth;       /* valid when !anonymous */
	const char *content_sha256; /* x-amz-content-sha256 as sent (header form), or NULL */
	px_s3_body_t *body;         /* body reader, set up by px_s3_body_prepare before a handler that reads a body */
	void (*deferred)(struct px_s3_req *q); /* px_s3_defer's function */
	void *op;                              /* the handler's own per-request state */
} px_s3_req_t;

/* ---- route.c: routing, authentication, body verification, target relay helpers ---- */

/* Starts the front end for host (copied) and loads its keys file (s3_keys); NULL with err filled. */
px_s3_t *px_s3_init(const px_s3_host_t *host, char *err, size_t errlen);
/* s3_relay_timeout_ms of the daemon's configuration (30000 before px_s3_init): a target silent this long fails a
 * relayed request. */
int px_s3_relay_timeout_ms(void);
/* Releases s (NULL: nothing); no request may be in progress. */
void px_s3_fini(px_s3_t *s);

/*
 * Public-port hook (loop thread), called first by px_route: returns false when r is not an S3
 * request (px_route goes on), true when it took r (and made or scheduled its response).
 */
bool px_s3_route(px_s3_t *s, ft_req_t *r);
/*
 * Public-port hook for the answers the HTTP server gives on its own (malformed or too large head, bad
 * framing, body over its limit), with the raw request target or NULL: when the target is an S3 path
 * (/s3, or any non-/v1 path with s3_root), answers r with an S3 XML error of that status and returns
 * true; false otherwise (r untouched). Virtual-host requests are not recognized: their Host may not
 * have been read.
 */
bool px_s3_server_error(px_s3_t *s, ft_req_t *r, const char *target, int status, const char *msg);

/* Runs fn(q) on the worker pool. */
void px_s3_defer(px_s3_req_t *q, void (*fn)(px_s3_req_t *q));

/*
 * Sets up q's body reader from its headers (body.c; the route calls it before a handler that reads a
 * body): PX_S3_OK, or the error with *msg.
 */
px_s3_err_t px_s3_body_prepare(px_s3_req_t *q, const char **msg);
/* Whether x-amz-content-sha256 holds a hex SHA-256 or an aws-chunked form the body reader knows. */
bool px_s3_payload_hash_known(const char *sha);
/*
 * Worker thread only. Reads up to cap verified payload bytes. Returns the count (> 0), 0 at the
 * end of a fully verified body, or -e for a px_s3_err_t e (SignatureDoesNotMatch for a bad chunk
 * signature, XAmzContentSHA256Mismatch, BadDigest, IncompleteBody, RequestTimeout, ...); once
 * an error is returned every later call returns it again. The final payload byte is returned
 * only after every check passed.
 */
ssize_t px_s3_body_read(px_s3_req_t *q, void *buf, size_t cap);
/* The x-amz-checksum-* algorithm the request body is checked against (header or trailer), NONE for none. */
ft_xsum_alg_t px_s3_body_xsum(const px_s3_req_t *q);
/* The payload length the client declared (Content-Length, or x-amz-decoded-content-length). */
int64_t px_s3_body_length(const px_s3_req_t *q);
/*
 * Worker thread only: reads the whole (small) verified body into a malloc'd NUL-terminated buffer
 * (caller frees). Returns PX_S3_OK, or the error to send (EntityTooLarge above max) with *body
 * NULL; it does not respond.
 */
px_s3_err_t px_s3_body_all(px_s3_req_t *q, size_t max, char **body, size_t *len);

/*
 * The URL "<public_url of the owner>/v1/objects/<bucket>/<key>[?[provider=P&]query]" of the target
 * owning provider/bucket/key in the current cluster map (provider=P for a remote bucket), malloc'd
 * (caller frees); NULL when the map has no targets (or on allocation failure). query (already
 * encoded) may be NULL. Any thread.
 */
char *px_s3_owner_url(const char *provider, const char *bucket, const char *key, size_t key_len, const char *query);
/* px_s3_owner_url, and the owner's id into id (FT_ID_MAX bytes; "" when there is none). */
char *px_s3_owner_url_id(const char *provider, const char *bucket, const char *key, size_t key_len, const char *query,
			 char *id);
/* The same without the signature: an anonymous read of public data, which the target decides on (acl.c). */
char *px_s3_owner_url_unsigned(const char *provider, const char *bucket, const char *key, size_t key_len,
			       const char *query, char *id);
/* Whether q's bucket is a remote one (aws, gcp, azure, ht), which the S3 API serves in part (route.c). */
bool px_s3_remote(const px_s3_req_t *q);
/*
 * Whether q's key (or an anonymous q, which reads public data only) may act with role need on
 * bucket: the identity store's role and bucket grants. For a second bucket a request names, such
 * as a copy's source.
 */
bool px_s3_key_allows(const px_s3_req_t *q, ft_role_t need, const char *bucket);
/*
 * The buckets an S3 bucket name may mean: 1 with provider "ais" when an ais bucket has it, else how
 * many remote buckets (aws, gcp, azure, ht) have it, provider the first one's and all of them, comma
 * separated, in all (cut to all_cap); 0 when none. Any thread.
 */
int px_s3_bucket_lookup(const char *name, char provider[16], char *all, size_t all_cap);

/* ---- listmark.c: where a remote bucket's listing resumes after a marker handed out (v1, versions) ---- */

/*
 * Keeps btoken, the backend's token of the page where a listing of provider/bucket under prefix with
 * delimiter ("" none) resumes after marker. Any thread.
 */
void px_s3_listmark_put(const char *provider, const char *bucket, const char *prefix, const char *delimiter,
			const char *marker, const char *btoken);
/* The token kept for that listing and marker (malloc'd, caller frees), or NULL. Any thread. */
char *px_s3_listmark_get(const char *provider, const char *bucket, const char *prefix, const char *delimiter,
			 const char *marker);

/*
 * The calling worker's libcurl easy handle (a CURL *), reset, kept per thread so connections to
 * targets are reused; NULL when libcurl fails. Never clean it up: the thread's exit does.
 */
void *px_s3_curl(void);
/* Options every relay sets on a handle h: URL, no proxy, timeouts, redirects (the map changed). */
void px_s3_curl_common(void *h, const char *url);

/* ---- relay.c: the GET/HEAD relay's own keep-alive client (worker threads only) ---- */
typedef struct {
	int fd; /* the connection, its body unread (but rl->pre); owned until px_s3_relay_done */
	char hostport[272];
	bool unreachable; /* px_s3_relay_get failed: no connection, or closed before any byte of a head */
	bool adopted;     /* a relay loop's connection (px_s3_relay_adopt): given back to the loops when done */
	char *pre;        /* body bytes the loop read after the head (pre[pre_off..pre_end)), malloc'd; read first */
	size_t pre_off, pre_end;
	char head[PX_S3_TARGET_HEAD_MAX];              /* the response head as received, NUL-terminated */
	ft_hp_resp_head_t resp;                        /* status, length, framing, keep-alive; points into head */
	ft_hp_header_t hdrs[PX_S3_TARGET_HEADERS_MAX]; /* its resp.nheaders headers */
} px_s3_relay_t;
/*
 * Sends "GET <url>" (or HEAD; plain http://, or https:// of a target of this machine, on its Unix
 * socket) with the extra header lines (NULL-terminated, may be NULL) on a kept-alive or new
 * connection and reads the response head, leaving every body byte in the socket rl->fd. 0 = head read (then px_s3_relay_done is owed), -1 = no usable answer
 * (nothing to release; the caller may try another way, as the target saw at most a GET or HEAD).
 */
int px_s3_relay_get(px_s3_relay_t *rl, bool head, const char *url, const char *const *headers);
/*
 * The request text of px_s3_relay_get (malloc'd, *len bytes; caller frees) and the "host:port" of
 * url into hostport (cap bytes); NULL when url is neither plain http:// nor https:// of a target of
 * this machine with a Unix socket (*local_only: then only that socket may carry the request).
 */
char *px_s3_relay_request(const char *url, bool head, const char *const *headers, char *hostport, size_t cap,
			  size_t *len, bool *local_only);
/*
 * Takes over a connection (fd, blocking) on which the relay loop sent a request and read either
 * the whole response head and maybe the first body bytes after it (len bytes of buf) or nothing
 * (len 0: the head is read here); buf (malloc'd or NULL) is taken: it keeps those body bytes
 * (rl->pre), which px_s3_relay_take_pre and px_s3_relay_read_body give before the socket's. 0, or
 * -1 when no head could be had (fd is then still owed px_s3_relay_done).
 */
int px_s3_relay_adopt(px_s3_relay_t *rl, int fd, const char *hostport, char *buf, size_t len);
/* Copies up to cap of the body bytes read with the head (rl->pre) into buf and consumes them; how many. */
size_t px_s3_relay_take_pre(px_s3_relay_t *rl, void *buf, size_t cap);
/*
 * Reads exactly len body bytes of the answer into buf (blocking, each read bounded by the relay's
 * timeout). 0, or -EPIPE (the target closed first), -ETIMEDOUT, -errno: the body is then cut and
 * the connection must not be reused (px_s3_relay_done(rl, false)).
 */
int px_s3_relay_read_body(px_s3_relay_t *rl, void *buf, size_t len);
/* Ends the exchange: the connection is kept for reuse when body_read (the whole body was consumed), else closed. */
void px_s3_relay_done(px_s3_relay_t *rl, bool body_read);

/* ---- relay_loop.c: the GET relay's event loop (see its DESIGN) ---- */
#define PX_S3_RLOOP_SMALL (64 * 1024) /* bodies up to this size are answered by the relay loop in one call */
/* Lets the HTTP server's loop threads relay GETs (each makes its relay loop on its first one). */
void px_s3_rloop_start(void);
/* Frees the relay loops and closes their connections; the HTTP server stopped first (its loop threads ended). */
void px_s3_rloop_stop(void);
/*
 * A loop thread: hands q's GET (the request text req of len bytes, malloc'd and taken) for the
 * target at hostport to this thread's relay loop, which answers q or hands it to a worker (get.c);
 * local_only: dialed on the target's Unix socket only (px_s3_relay_request said so). False off a
 * loop thread or when relaying is stopped (req freed; q is still the caller's).
 */
bool px_s3_rloop_submit(px_s3_req_t *q, const char *hostport, bool local_only, char *req, size_t len);
/* Any thread: a kept-alive connection to hostport (its last answer read whole) goes to a relay loop's idle pool; false when none takes it (fd still the caller's). */
bool px_s3_rloop_give(int fd, const char *hostport);

/* The S3 error named by code ("NoSuchUpload"), or PX_S3_OK when the table has no such code. */
px_s3_err_t px_s3_err_of_code(const char *code);

/*
 * The object metadata of the request to pass on to a target: "Content-Type: ..." when given and
 * one "x-amz-meta-<name>: <value>" per user metadata header, as a NULL-terminated array of
 * header lines in the request's memory. Returns PX_S3_OK, or MetadataTooLarge (user metadata over
 * S3's 2 KiB) / InvalidArgument (a value that cannot be stored) without responding.
 */
px_s3_err_t px_s3_meta_lines(px_s3_req_t *q, const char ***lines);

/* What a target answered to a relayed request. */
typedef struct {
	long status;               /* 0 when the exchange did not complete */
	char etag[PX_S3_ETAG_MAX]; /* ETag header, quotes included, "" if none */
	char message[256];         /* the target's JSON "message" on an error status */
	char code[48];             /* the target's JSON "code" (an S3 error code), "" if none */
	char checksum[96];         /* "x-amz-checksum-<alg>: <base64>" the target kept, "" if none */
	char checksum_type[16];    /* its x-amz-checksum-type (FULL_OBJECT, COMPOSITE), "" if none */
} px_s3_target_reply_t;

/*
 * Worker thread only: PUTs the verified request body to url (Content-Length = the declared
 * payload length), with the header lines in extra (NULL-terminated, may be NULL; e.g. the object
 * metadata of px_s3_meta_lines) and fills *reply. Returns PX_S3_OK when the target answered (any status), or
 * the error to send: the body failed verification or arrived incomplete (the target saw a cut
 * body and stored nothing), or the target could not be reached (ServiceUnavailable).
 */
px_s3_err_t px_s3_put_to(px_s3_req_t *q, const char *url, const char *const *extra, px_s3_target_reply_t *reply);
/* The x-amz-checksum-<alg> and x-amz-checksum-type of reply, as response headers of q (none when it has none). */
void px_s3_checksum_headers(px_s3_req_t *q, const px_s3_target_reply_t *reply);
/* A curl header callback (data: a px_s3_target_reply_t) keeping the last response's ETag and checksum. */
size_t px_s3_reply_header_cb(char *buf, size_t size, size_t nitems, void *reply);

/* ---- responses (route.c) ---- */
/* S3 XML error with e's status and code; fmt NULL = the default message. Ends the request. */
void px_s3_error(px_s3_req_t *q, px_s3_err_t e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Error for a request that has no px_s3_req_t yet (routing, authentication). */
void px_s3_error_raw(ft_req_t *r, const char *resource, px_s3_err_t e, const char *msg);
/* Maps a target's error status (404, 409, 416, 507, ...) to the S3 error and sends it. */
void px_s3_error_from_target(px_s3_req_t *q, const px_s3_target_reply_t *reply);

/* ---- s3_sigv2.c ---- */
/*
 * Verifies a Signature Version 2 request (Authorization "AWS KEY:SIG", or the presigned query
 * AWSAccessKeyId/Expires/Signature). Returns 0 when r carries neither (check SigV4), else 1 with
 * *res (FT_SIGV4_OK, _UNKNOWN_KEY, _MISMATCH, _EXPIRED, _SKEWED, _MALFORMED) and the access key
 * copied to access. vhost_bucket: the bucket of a virtual-host request (signed as "/<bucket>"
 * before the path), else NULL; raw_path: the path as sent.
 */
int px_s3_sigv2_verify(ft_req_t *r, const char *vhost_bucket, const char *raw_path, time_t now,
		       ft_sigv4_secret_fn secret_fn, void *ctx, ft_sigv4_result_t *res, char *access,
		       size_t access_cap);

/* ---- xml.c: building responses ---- */
/* A document is a growable string: p is malloc'd and NUL-terminated; failed set means unusable. */
typedef ft_strbuf_t px_xml_t;

/* Starts a document with the XML declaration. */
void px_xml_init(px_xml_t *x);
void px_xml_free(px_xml_t *x);
/* <tag> and, with ns, <tag xmlns="PX_S3_XMLNS">. */
void px_xml_open(px_xml_t *x, const char *tag);
void px_xml_open_ns(px_xml_t *x, const char *tag);
void px_xml_close(px_xml_t *x, const char *tag);
/* <tag>escaped text</tag> (len bytes; text may be any bytes except NUL). */
void px_xml_elem_n(px_xml_t *x, const char *tag, const char *text, size_t len);
void px_xml_elem(px_xml_t *x, const char *tag, const char *text);
void px_xml_elemf(px_xml_t *x, const char *tag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Appends escaped text (for & < > " ' and control characters). */
void px_xml_text(px_xml_t *x, const char *text, size_t len);
/* The error document of e for resource with request_id; the caller frees x. */
void px_xml_error_doc(px_xml_t *x, px_s3_err_t e, const char *message, const char *resource, const char *request_id);

/* Sends x (freed here) with status and Content-Type application/xml; OOM -> 500. Ends the request. */
void px_s3_send_xml(px_s3_req_t *q, int status, px_xml_t *x);
/* Empty body with status (200, 204). Ends the request. */
void px_s3_send_empty(px_s3_req_t *q, int status);

/* ---- xml.c: reading request bodies (a minimal, strict, non-validating reader) ---- */
/*
 * Accepts: an optional XML declaration, comments, one root element with nested elements,
 * attributes (ignored), character data with the five predefined entities and character
 * references, CDATA sections. Refuses (MalformedXML): DOCTYPE and any other markup declaration,
 * mismatched or unclosed tags, more than 64 levels or 200000 elements, text outside the root.
 * Element names lose their namespace prefix.
 */
typedef struct px_xml_node {
	const char *name;
	char *text; /* character data directly inside this element, decoded, NUL-terminated */
	size_t text_len;
	struct px_xml_node *child, *next;
} px_xml_node_t;

typedef struct px_xml_doc px_xml_doc_t;
/* Parses buf; NULL with *why (static text) on malformed input or allocation failure. */
px_xml_doc_t *px_xml_parse(const char *buf, size_t len, const char **why);
const px_xml_node_t *px_xml_root(const px_xml_doc_t *d);
/* First child of n named name, or NULL. */
const px_xml_node_t *px_xml_child(const px_xml_node_t *n, const char *name);
void px_xml_doc_free(px_xml_doc_t *d);

/* DeleteObjects body: <Delete><Quiet>?</Quiet><Object><Key>..</Key></Object>...</Delete>. */
typedef struct {
	bool quiet;
	int n;
	const char **keys; /* malloc'd array of pointers into doc */
	size_t *key_lens;
	px_xml_doc_t *doc;
} px_s3_delete_req_t;
/* 0, or -1 with *why (MalformedXML; more than 1000 keys is also refused). Free with px_s3_delete_req_free. */
int px_s3_parse_delete(const char *body, size_t len, px_s3_delete_req_t *out, const char **why);
void px_s3_delete_req_free(px_s3_delete_req_t *d);

/* CompleteMultipartUpload body: <CompleteMultipartUpload><Part><PartNumber>N</PartNumber><ETag>..</ETag></Part>... */
typedef struct {
	int part;                       /* 1..10000 */
	char etag[PX_S3_ETAG_MAX];      /* without surrounding quotes */
	char checksum[FT_XSUM_B64_MAX]; /* its Checksum<ALG> element, "" if none */
} px_s3_part_t;
/*
 * Parts in document order (order and ETags are checked by the caller: InvalidPartOrder,
 * InvalidPart). 0 with *parts (malloc'd, caller frees) and *n >= 1, or -1 with *why (MalformedXML:
 * no parts, a part without PartNumber or ETag, a number outside 1..10000).
 */
int px_s3_parse_complete(const char *body, size_t len, px_s3_part_t **parts, int *n, const char **why);

/* ---- bucket.c ---- */
void px_s3_list_buckets(px_s3_req_t *q);
void px_s3_bucket_create(px_s3_req_t *q);
void px_s3_bucket_head(px_s3_req_t *q);
void px_s3_bucket_delete(px_s3_req_t *q);
void px_s3_bucket_location(px_s3_req_t *q);
/* GET/PUT/DELETE of a bucket subresource (?versioning, ?acl, ?policy, ...): "unset" answers or 501. */
void px_s3_bucket_subresource(px_s3_req_t *q, const char *sub);
/* The ACL document of GET ?acl: the owner has FULL_CONTROL, and with public_read AllUsers READ. */
void px_s3_send_acl(px_s3_req_t *q, bool public_read);
/* S3 bucket name rules (3..63 of [a-z0-9.-], ...): 0, or -1 with *why. */
int px_s3_check_bucket_name(const char *name, const char **why);

/* ---- list.c ---- */
#define PX_S3_LIST_VERSIONS 3                         /* ListObjectVersions: every object once, version id null */
void px_s3_list_objects(px_s3_req_t *q, int version); /* 1: ListObjects, 2: ListObjectsV2, PX_S3_LIST_VERSIONS */

/* ---- get.c, object.c, copy.c (their shared internals: object.h) ---- */
void px_s3_object_get(px_s3_req_t *q); /* GET and HEAD (get.c) */
void px_s3_object_put(px_s3_req_t *q);
void px_s3_object_copy(px_s3_req_t *q); /* CopyObject, UploadPartCopy (copy.c) */
/*
 * Loop thread: parses and checks x-amz-copy-source (the source bucket exists, the key is a
 * storable name) and, for UploadPartCopy (part), x-amz-copy-source-range; keeps the source in
 * q->op. 0, or -1 after responding.
 */
int px_s3_copy_source_prepare(px_s3_req_t *q, bool part);
/*
 * Worker thread only, after px_s3_copy_source_prepare(q, true): streams the source (its range)
 * into put_url (a target's part upload) and responds: CopyPartResult, or the S3 error.
 */
void px_s3_copy_part(px_s3_req_t *q, const char *put_url);
void px_s3_object_delete(px_s3_req_t *q);
void px_s3_delete_objects(px_s3_req_t *q);
/* GET/PUT/DELETE of an object subresource (?acl, ?tagging, ...). */
void px_s3_object_subresource(px_s3_req_t *q, const char *sub);

/* ---- acl.c: canned ACLs (docs/acl.md) ---- */
/* Whether r has an x-amz-grant-* header. */
bool px_s3_has_grant_header(ft_req_t *r);
/* Loop thread: checks x-amz-acl (and refuses x-amz-grant-*) into q->acl; false after answering (501, 403). */
bool px_s3_acl_header(px_s3_req_t *q);
/* The header line that carries q->acl to a target ("x-amz-acl: public-read"), or NULL (private). */
const char *px_s3_acl_line(const px_s3_req_t *q);
/* Whether an unsigned q may go on as a read of public-read data (allow_public_read on). */
bool px_s3_acl_anonymous_ok(px_s3_req_t *q);
/* GET/PUT ?acl of a bucket and of an object (PUT: its body reader is prepared). */
void px_s3_bucket_acl(px_s3_req_t *q);
void px_s3_object_acl(px_s3_req_t *q);

/* ---- multipart.c (route.c routes to it) ---- */
typedef enum {
	PX_S3_MPU_CREATE,       /* POST /b/k?uploads */
	PX_S3_MPU_UPLOAD_PART,  /* PUT /b/k?partNumber=N&uploadId=ID (x-amz-copy-source: UploadPartCopy) */
	PX_S3_MPU_COMPLETE,     /* POST /b/k?uploadId=ID */
	PX_S3_MPU_ABORT,        /* DELETE /b/k?uploadId=ID */
	PX_S3_MPU_LIST_PARTS,   /* GET /b/k?uploadId=ID */
	PX_S3_MPU_LIST_UPLOADS, /* GET /b?uploads */
} px_s3_mpu_op_t;

/*
 * Loop thread, after authentication; the bucket exists in the BMD. q->key is "" for
 * LIST_UPLOADS. The callee owes the one response (usually via px_s3_defer).
 */
void px_s3_multipart(px_s3_req_t *q, px_s3_mpu_op_t op);

#endif
