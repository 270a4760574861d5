/* SPDX-License-Identifier: Apache-2.0 */
/* Remote storage backends (S3, GCS, Azure Blob, plain HTTP origin) behind one blocking, streaming interface. */
#ifndef FT_BACKEND_H
#define FT_BACKEND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

/*
 * CONTRACT
 * - A backend handle (ft_backend_t) stands for one remote bucket. It is immutable after
 *   ft_backend_open() and may be used by any number of threads at once.
 * - Every call blocks the calling thread on the network: call from worker threads, never from a
 *   public-port loop thread. A call never hangs: it fails with FT_BACKEND_ECONNECT or
 *   FT_BACKEND_ETIMEDOUT when the backend cannot be reached within connect_timeout_ms, or when no
 *   byte moves in either direction for stall_timeout_ms while the call waits.
 * - Reads stream: ft_backend_get() returns as soon as the response headers are in (errors such as
 *   not-found are reported there, never as an empty body); the caller then pulls bytes with
 *   ft_backend_read() as they arrive. Nothing is buffered beyond one network chunk, so a slow
 *   caller slows the backend down (TCP backpressure). Time the caller spends between reads does
 *   not count against the stall timeout.
 * - A reader is used by one thread at a time (it may move between threads). ft_backend_cancel()
 *   may be called from any other thread while the reader is open; the blocked or next read
 *   returns FT_BACKEND_ECANCELED. Closing a reader before its end abandons the connection.
 * - End of body (ft_backend_read() returning OK with *got == 0) means every byte of the requested
 *   range arrived, and, with verify set, that the whole object matched the backend's MD5 or CRC32C.
 *   A body cut short is always an error (FT_BACKEND_ETRUNCATED or the transport's error), never
 *   a short success.
 * - Connections are kept alive and reused across calls and threads (a small process-wide pool).
 */

typedef enum {
	FT_BACKEND_OK = 0,
	FT_BACKEND_ENOTFOUND,  /* the object does not exist */
	FT_BACKEND_ENOBUCKET,  /* the bucket (container) does not exist */
	FT_BACKEND_EAUTH,      /* 401/403: credentials missing, wrong, or not allowed */
	FT_BACKEND_ERANGE,     /* 416: the range starts past the end of the object */
	FT_BACKEND_ECHANGED,   /* 412: if_match no longer matches: the object changed */
	FT_BACKEND_ETHROTTLED, /* 429 or 503: retry later */
	FT_BACKEND_ESERVER,    /* another 5xx */
	FT_BACKEND_EREQUEST,   /* another status the backend refused the request with */
	FT_BACKEND_ECONNECT,   /* cannot resolve, connect or handshake; connection lost before a response */
	FT_BACKEND_ETIMEDOUT,  /* connect timeout, or no progress for stall_timeout_ms */
	FT_BACKEND_ETRUNCATED, /* the connection ended before the body was complete */
	FT_BACKEND_ECHECKSUM,  /* the body does not match the backend's MD5/CRC32C */
	FT_BACKEND_EPROTO,     /* a response we cannot parse or that contradicts the request */
	FT_BACKEND_ENOTSUP,    /* the provider cannot do this (ht: put, delete, list) */
	FT_BACKEND_ECONFIG,    /* bad or incomplete configuration */
	FT_BACKEND_ESOURCE,    /* put: the body source failed or ended before length */
	FT_BACKEND_ECANCELED,  /* ft_backend_cancel(), or a sink asked to stop */
	FT_BACKEND_ENOMEM,
	FT_BACKEND_ERR_COUNT
} ft_backend_err_t;

/* Short text for an error code ("object not found", ...); never NULL. */
const char *ft_backend_strerror(ft_backend_err_t e);
/* The status a client of the cluster should see for e (404, 403, 416, 412, 503, 502, 504, 501, 500). */
int ft_backend_http_status(ft_backend_err_t e);
/* Whether trying again later may succeed (throttled, 5xx, connect, timeout, truncated). */
int ft_backend_retryable(ft_backend_err_t e);

/* What went wrong, for logs and error bodies. Every call that takes one fills it on failure. */
typedef struct {
	ft_backend_err_t code;
	long http_status; /* the backend's status, 0 when no response */
	char msg[320];    /* e.g. "aws GET b/o: 404 NoSuchKey: The specified key does not exist." */
} ft_backend_error_t;

typedef enum {
	FT_BACKEND_NONE = 0,
	FT_BACKEND_AWS,   /* S3 and S3-compatible stores: SigV4 */
	FT_BACKEND_GCP,   /* GCS JSON API: OAuth2 service account, or anonymous */
	FT_BACKEND_AZURE, /* Azure Blob: Shared Key or SAS */
	FT_BACKEND_HT,    /* any HTTP(S) origin by URL prefix; read-only */
} ft_backend_provider_t;

/* "aws", "gcp", "azure", "ht" ("" for NONE). */
const char *ft_backend_provider_name(ft_backend_provider_t p);
/* Accepts the names above and the aliases s3, gs, gcs, az. Returns 0, -1 if unknown. */
int ft_backend_provider_parse(const char *s, ft_backend_provider_t *out);

typedef enum {
	FT_BACKEND_ADDR_AUTO = 0, /* aws: virtual-host on the AWS endpoint, path-style on a custom one */
	FT_BACKEND_ADDR_PATH,     /* http://endpoint/bucket/key */
	FT_BACKEND_ADDR_VIRTUAL,  /* http://bucket.endpoint/key */
} ft_backend_addressing_t;

#define FT_BACKEND_NAME_MAX 256
#define FT_BACKEND_KEY_MAX 256
#define FT_BACKEND_TOKEN_MAX 4096

/*
 * Per-bucket configuration (bucket properties). Empty strings mean "not set": at
 * ft_backend_open() time unset credentials, region and endpoint come from the environment
 * (see docs/backends.md), and then from the provider's defaults.
 */
typedef struct {
	ft_backend_provider_t provider;
	char bucket[FT_BACKEND_NAME_MAX];   /* aws/gcp bucket, azure container; ht: unused */
	char endpoint[FT_URL_MAX];          /* base URL ("" = provider default); ht: the URL prefix */
	ft_backend_addressing_t addressing; /* aws only */
	char region[FT_REGION_MAX];         /* aws signing region */
	/* aws */
	char access_key[FT_BACKEND_KEY_MAX];
	char secret_key[FT_BACKEND_KEY_MAX];
	char session_token[FT_BACKEND_TOKEN_MAX];
	/* gcp: a service-account JSON key file; none (here or in the environment) = anonymous */
	char credentials_file[FT_PATH_MAX];
	/* azure: Shared Key (account + base64 key), or a SAS token (query string, no '?') */
	char account[FT_BACKEND_NAME_MAX];
	char account_key[FT_BACKEND_KEY_MAX];
	char sas[FT_BACKEND_TOKEN_MAX];
	/* transport; 0 = default */
	int connect_timeout_ms; /* default 5000 */
	int stall_timeout_ms;   /* default 30000 */
} ft_backend_config_t;

/* Zeroes c and sets provider. */
void ft_backend_config_init(ft_backend_config_t *c, ft_backend_provider_t provider);
/*
 * Fills c from a JSON object of bucket properties: {"provider": "aws", "bucket": ..., "endpoint":
 * ..., "addressing": "path|virtual", "region", "access_key", "secret_key", "session_token",
 * "credentials_file", "account", "account_key", "sas", "connect_timeout_ms", "stall_timeout_ms"}.
 * An unknown key, a wrong type or a too-long value is an error (FT_BACKEND_ECONFIG).
 * The environment is not read here.
 */
ft_backend_err_t ft_backend_config_from_json(ft_backend_config_t *c, const json_t *props, ft_backend_error_t *err);
/* The properties as JSON (new reference); secrets (secret_key, session_token, account_key, sas) only if with_secrets. */
json_t *ft_backend_config_to_json(const ft_backend_config_t *c, int with_secrets);

/* Object metadata as the backend states it. */
#define FT_BACKEND_ETAG_MAX 128
#define FT_BACKEND_VERSION_MAX 128
typedef struct {
	int64_t size;                         /* of the whole object; -1 unknown */
	int64_t mtime_ns;                     /* last modified; 0 unknown */
	char etag[FT_BACKEND_ETAG_MAX];       /* without quotes; "" none */
	char version[FT_BACKEND_VERSION_MAX]; /* S3 version id, GCS generation, Azure version id; "" none */
	char md5[33];                         /* hex MD5 of the whole object when the backend states a true one */
	char crc32c[9];                       /* hex CRC32C of the whole object (GCS) */
} ft_backend_meta_t;

/*
 * Whether a and b describe the same content of an object (for revalidation): compares the
 * version when both have one, else the ETag, else the MD5, else size and mtime.
 */
int ft_backend_meta_same(const ft_backend_meta_t *a, const ft_backend_meta_t *b);

typedef struct ft_backend ft_backend_t;
typedef struct ft_backend_reader ft_backend_reader_t;

/* Once per process before use (initializes libcurl); returns 0 or -1. Safe to call again. */
int ft_backend_global_init(void);
/* Frees the idle connection pool; call at exit after every backend and reader is closed. */
void ft_backend_global_cleanup(void);

/*
 * Validates cfg, completes it from the environment and loads credentials (gcp: reads the
 * service-account file). Returns the handle (caller owns; ft_backend_close), or NULL with err
 * filled (FT_BACKEND_ECONFIG, FT_BACKEND_ENOMEM). Makes no network call.
 */
ft_backend_t *ft_backend_open(const ft_backend_config_t *cfg, ft_backend_error_t *err);
/* Every reader of b must be closed first. NULL is a no-op. */
void ft_backend_close(ft_backend_t *b);
/* The effective configuration (after the environment and defaults were applied). */
const ft_backend_config_t *ft_backend_config(const ft_backend_t *b);

/* Object metadata; FT_BACKEND_ENOTFOUND when the object does not exist. */
ft_backend_err_t ft_backend_head(ft_backend_t *b, const char *name, ft_backend_meta_t *out, ft_backend_error_t *err);

typedef struct {
	int64_t offset; /* first byte wanted */
	int64_t length; /* bytes from offset; 0 = to the end of the object */
	/*
	 * The object must still be this one (metadata from an earlier head/get: its ETag, or its
	 * generation on gcp), else FT_BACKEND_ECHANGED; NULL = any. Lets range reads of one object
	 * be stitched together safely.
	 */
	const ft_backend_meta_t *match;
	int verify; /* whole-object reads: check the body against the backend's MD5 (else CRC32C) */
} ft_backend_get_opts_t;

/*
 * Starts reading name (opts NULL = the whole object). Returns once the response headers are in:
 * FT_BACKEND_OK with *out (caller owns; ft_backend_reader_close), or the error with *out NULL.
 * A range reaching past the end is cut at the end; one starting past it is FT_BACKEND_ERANGE.
 */
ft_backend_err_t ft_backend_get(ft_backend_t *b, const char *name, const ft_backend_get_opts_t *opts,
				ft_backend_reader_t **out, ft_backend_error_t *err);
/* Metadata of the whole object from the GET response (size is the object's, not the range's). */
const ft_backend_meta_t *ft_backend_reader_meta(const ft_backend_reader_t *r);
/* Bytes this reader yields in total (the range's length); -1 when the backend did not say. */
int64_t ft_backend_reader_length(const ft_backend_reader_t *r);
/*
 * Pulls up to cap bytes into buf, blocking until at least one byte is there, the body ends or an
 * error occurs. OK with *got > 0: data; OK with *got == 0: the end (complete, verified). Any
 * error is final: later calls return it again (details in ft_backend_reader_error).
 */
ft_backend_err_t ft_backend_read(ft_backend_reader_t *r, void *buf, size_t cap, size_t *got);
/*
 * Whether r can hand its bytes to a file without passing them through user space
 * (ft_backend_read_to_fd): an ht GET from an http:// origin, whole body as sent, nothing to verify.
 */
int ft_backend_reader_splices(const ft_backend_reader_t *r);
/*
 * ft_backend_read for a reader that splices: up to cap bytes written to fd at offset off (fd's file
 * position untouched) straight from the socket (splice(2) through a pipe). *fd_errno is 0, or the
 * errno of a failed write to fd (then the reader fails with FT_BACKEND_ECANCELED: the caller's
 * side, not the backend's). A reader that does not splice fails with FT_BACKEND_EREQUEST.
 */
ft_backend_err_t ft_backend_read_to_fd(ft_backend_reader_t *r, int fd, int64_t off, size_t cap, size_t *got,
				       int *fd_errno);
/* Makes the current or next read fail with FT_BACKEND_ECANCELED. Any thread; r must stay open meanwhile. */
void ft_backend_cancel(ft_backend_reader_t *r);
const ft_backend_error_t *ft_backend_reader_error(const ft_backend_reader_t *r);
/* Releases r at any point. NULL is a no-op. */
void ft_backend_reader_close(ft_backend_reader_t *r);

/*
 * Push form of a read: streams the object into sink (called with each chunk as it arrives; it
 * may block, which slows the backend down; nonzero stops the transfer with FT_BACKEND_ECANCELED).
 * meta (optional) is filled from the response headers before the first chunk.
 */
typedef int (*ft_backend_sink_fn)(void *ctx, const void *buf, size_t len);
ft_backend_err_t ft_backend_get_to(ft_backend_t *b, const char *name, const ft_backend_get_opts_t *opts,
				   ft_backend_sink_fn sink, void *ctx, ft_backend_meta_t *meta,
				   ft_backend_error_t *err);

/* Upload body: read() fills buf with up to cap bytes and returns how many, 0 at the end, < 0 on error. */
typedef int64_t (*ft_backend_source_fn)(void *ctx, void *buf, size_t cap);
typedef struct {
	ft_backend_source_fn read;
	void *ctx;
	/* Optional: back to the first byte, 0 on success. Lets a request whose reused keep-alive
	 * connection turned out dead be resent on a fresh one instead of failing. */
	int (*rewind)(void *ctx);
	int64_t length;           /* exact body length; the source must yield exactly this many bytes */
	const char *md5;          /* optional hex MD5 of the body: sent so the backend checks it */
	const char *content_type; /* optional */
} ft_backend_body_t;

/*
 * Writes name with a streaming body of known length; returns only after the backend
 * acknowledged it. out (optional) gets the new ETag/version/size as far as the response tells.
 * ht: FT_BACKEND_ENOTSUP.
 */
ft_backend_err_t ft_backend_put(ft_backend_t *b, const char *name, const ft_backend_body_t *body,
				ft_backend_meta_t *out, ft_backend_error_t *err);
/* ft_backend_put of length bytes of fd from offset (pread: fd's file position is untouched). */
ft_backend_err_t ft_backend_put_fd(ft_backend_t *b, const char *name, int fd, int64_t offset, int64_t length,
				   const char *md5, ft_backend_meta_t *out, ft_backend_error_t *err);
/* ft_backend_put of a memory buffer (borrowed for the call). */
ft_backend_err_t ft_backend_put_mem(ft_backend_t *b, const char *name, const void *buf, size_t len,
				    ft_backend_meta_t *out, ft_backend_error_t *err);

/*
 * Deletes name. FT_BACKEND_ENOTFOUND if the backend says it was not there (S3 does not say:
 * deleting a missing key is OK there). ht: FT_BACKEND_ENOTSUP.
 */
ft_backend_err_t ft_backend_delete(ft_backend_t *b, const char *name, ft_backend_error_t *err);

typedef struct {
	char *name; /* owned by the page */
	int64_t size;
	int64_t mtime_ns;               /* 0 unknown */
	char etag[FT_BACKEND_ETAG_MAX]; /* without quotes */
	bool dir; /* a delimited listing's common prefix ("directory"): name ends with the delimiter, size -1 */
} ft_backend_entry_t;

typedef struct {
	ft_backend_entry_t *entries; /* in the backend's (lexicographic) order */
	int n;
	char *next_token; /* pass to the next call; NULL when this is the last page */
} ft_backend_page_t;

/*
 * One page of the flat listing of names starting with prefix (NULL or "" = all), after the page
 * that returned token (NULL = first page). max: entries wanted, 0 = 1000, capped at 1000 (a page
 * may hold fewer even when more follow). out is zeroed first; free it with ft_backend_page_free.
 * ht: FT_BACKEND_ENOTSUP.
 */
ft_backend_err_t ft_backend_list(ft_backend_t *b, const char *prefix, const char *token, int max,
				 ft_backend_page_t *out, ft_backend_error_t *err);
typedef struct {
	const char *prefix; /* NULL or "": every name */
	/*
	 * NULL or "": the flat listing. Else names whose rest after the prefix holds it roll up, by the backend,
	 * into one entry each of their common prefix (up to and with the first delimiter; dir set), so a
	 * "directory" costs one entry, not one a name; entries, names and common prefixes together, come in byte
	 * order, and the token continues the same delimited listing.
	 */
	const char *delimiter;
	const char *token; /* NULL or "": the first page */
	/*
	 * First page only (no token): the names after this one. aws asks the backend for them (start-after); the
	 * others list from the start, so callers skip what is not after it themselves.
	 */
	const char *start_after;
	int max; /* as ft_backend_list's */
} ft_backend_list_args_t;

/* ft_backend_list with the arguments above. */
ft_backend_err_t ft_backend_list_page(ft_backend_t *b, const ft_backend_list_args_t *a, ft_backend_page_t *out,
				      ft_backend_error_t *err);
void ft_backend_page_free(ft_backend_page_t *p);

/*
 * One page of the buckets (azure: containers) that the account of cfg sees, after the page that
 * returned token (NULL = first page): entries carry the name (size -1, mtime_ns 0), next_token is
 * NULL on the last page. cfg->bucket is ignored; credentials, endpoint and region are taken as
 * ft_backend_open takes them (cfg, then the environment). gcp also needs a project: the
 * environment's GOOGLE_CLOUD_PROJECT, else the service-account key's project_id, else
 * FT_BACKEND_ECONFIG saying so. ht: FT_BACKEND_ENOTSUP (an HTTP origin has no buckets). Blocks on
 * the network as every call here; out is zeroed first, free it with ft_backend_page_free.
 */
ft_backend_err_t ft_backend_list_buckets(const ft_backend_config_t *cfg, const char *token, ft_backend_page_t *out,
					 ft_backend_error_t *err);
/*
 * The endpoint ft_backend_list_buckets(cfg) would send to (after the environment and defaults),
 * into out ("" when cfg is not usable). Makes no network call. Returns 0 or -1.
 */
int ft_backend_account_endpoint(const ft_backend_config_t *cfg, char *out, size_t cap);

#endif
