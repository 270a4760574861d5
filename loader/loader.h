/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader internals shared by the loader/ sources: options, hosts, objects, job, HTTP client, engine, stats. */
#ifndef LD_LOADER_H
#define LD_LOADER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "base/cksum.h"
#include "cluster/smap.h"
#include "hist.h"
#include "http/parse.h"

#define LD_NAME_MAX 1024     /* object name bytes (FT_OBJ_NAME_MAX) */
#define LD_PATH_MAX 4096     /* origin-form request target: encoded name, query */
#define LD_REQ_MAX 8192      /* one request head */
#define LD_AUTH_MAX 300      /* "host:port" */
#define LD_MAX_HOSTS 1024    /* distinct host:port pairs a run may talk to */
#define LD_LOCATION_MAX 4096 /* longest Location header kept */
#define LD_MAX_REDIRECTS 4

/* ---- options (opts.c) ---- */
typedef enum { LD_GET = 0, LD_PUT = 1, LD_DEL = 2, LD_GETBATCH = 3, LD_NOPS = 4 } ld_op_t;
typedef enum { LD_API_NATIVE = 0, LD_API_S3, LD_API_URLS } ld_api_t;

typedef struct {
	char ip[256];
	int port;
	char bucket[256];
	char provider[16];
	int64_t duration_ns; /* 0: until -maxputs/-totalputsize/-epochs (or Ctrl-C) */
	int numworkers;      /* concurrent outstanding requests */
	int iothreads;       /* event-loop threads; 0 = number of CPUs */
	char sched[16];      /* -sched: "batch" or "other" */
	bool sched_batch;    /* the loop threads run under SCHED_BATCH */
	int pctput;
	uint64_t minsize, maxsize;
	uint64_t totalputsize; /* 0 = no limit */
	uint64_t maxputs;      /* 0 = no limit */
	bool cleanup;
	int epochs; /* 0 = not epoch-driven */
	bool uniquegets;
	uint64_t readoff, readlen;
	bool verifyhash;
	int64_t statsinterval_ns; /* 0 = summary only */
	char json_path[1024];
	uint64_t seed;
	char filelist[1024];
	char loaderid[64];
	int loadernum;
	char s3endpoint[1024];
	bool s3_path_style;
	char url_list[1024];
	bool direct;
	int get_batchsize;  /* GETs grouped this many at a time into one POST /v1/batch; 0 = off */
	int64_t timeout_ns; /* one request, including redirects */
	bool quiet;         /* no live table */
	bool https;         /* the proxy at -ip/-port speaks TLS */
	char cacert
		[1024]; /* -cacert: CA bundle (PEM) servers are verified with; "" = FT_CACERT, FT_STATE_DIR's, system */
	ld_api_t api;
} ld_opts_t;

/* Parses argv. Returns 0, 1 when -help was printed (exit 0), -1 after printing a usage error. */
int ld_opts_parse(ld_opts_t *o, int argc, char **argv);
/* "16KiB", "1MiB", "8MB" (K/KB/KiB = 1024, as aisloader), plain bytes. Returns 0 or -1. */
int ld_parse_size(const char *s, uint64_t *out);
/* "30s", "1m", "1h30m", "250ms", "0"; a bare number is seconds. Returns 0 or -1. */
int ld_parse_duration(const char *s, int64_t *out_ns);
/* Human form of a byte count ("1.50MiB") into buf. */
const char *ld_fmt_size(double bytes, char *buf, size_t cap);

/* ---- hosts (hosts.c): a process-wide table of host:port endpoints, indexes never change ---- */
typedef struct {
	char authority[LD_AUTH_MAX]; /* "host:port" as sent in Host */
	char name[LD_AUTH_MAX];      /* the host part without brackets: what a TLS certificate must name */
	bool tls;                    /* https: the connection speaks TLS (ld_tls_*) */
	struct sockaddr_storage addr;
	socklen_t addrlen;
} ld_host_t;

/*
 * Index of authority ("host:port", or "host" = port 80, 443 with tls) spoken in plain HTTP or TLS,
 * resolving and adding it if new; -1 on error. The same authority plain and with TLS are two hosts.
 */
int ld_host_get(const char *authority, size_t len, bool tls, char *err, size_t errlen);
/* Index of an authority that connects to the address (and TLS peer) of host index like (S3 virtual-hosted Host). */
int ld_host_alias(const char *authority, size_t len, int like, char *err, size_t errlen);
const ld_host_t *ld_host_at(int index);
int ld_host_count(void);

/*
 * Splits "http://authority/path?query", "https://..." (*tls set) or an origin-form "/path" (no
 * authority, *tls false) into its parts. Returns 0 or -1.
 */
int ld_url_split(const char *url, const char **auth, size_t *auth_len, const char **path, bool *tls);

/* ---- TLS (tls.c): one client SSL_CTX per process, verifying every peer ---- */
typedef struct ssl_st ld_ssl_t; /* OpenSSL's SSL, without its headers here */

/*
 * Configures TLS (o is borrowed for the run): peers are verified against -cacert, else FT_CACERT,
 * else FT_STATE_DIR/tls/ca.pem when it exists, else the system's CAs. The process's SSL_CTX is made
 * now when now (a CA bundle that does not load fails the start), else on the first TLS connection.
 * Returns 0, -1 with err.
 */
int ld_tls_init(const ld_opts_t *o, bool now, char *err, size_t errlen);
void ld_tls_free(void);
/* The CA bundle in use ("" = the system's). */
const char *ld_tls_cafile(void);
/* A client SSL over fd (connected or connecting) that verifies host's name or IP address; NULL with err. */
ld_ssl_t *ld_tls_new(int fd, const ld_host_t *h, char *err, size_t errlen);
typedef enum { LD_TLS_OK = 0, LD_TLS_WANT_READ, LD_TLS_WANT_WRITE, LD_TLS_CLOSED, LD_TLS_ERROR } ld_tls_rc_t;
/*
 * One step of the handshake / a read / a write on a non-blocking SSL. rc > 0 (read, write: bytes) or
 * LD_TLS_OK (handshake done) on success, else -ld_tls_rc_t: WANT_* (retry when the socket is ready
 * that way, a write with the same buffer and length), CLOSED (the peer ended the stream), ERROR (err
 * says why, naming h and OpenSSL's reason). Clears OpenSSL's error queue.
 */
int ld_tls_handshake(ld_ssl_t *s, const ld_host_t *h, char *err, size_t errlen);
ssize_t ld_tls_read(ld_ssl_t *s, void *buf, size_t n, const ld_host_t *h, char *err, size_t errlen);
ssize_t ld_tls_write(ld_ssl_t *s, const void *buf, size_t n, const ld_host_t *h, char *err, size_t errlen);
/* Nonzero when OpenSSL holds bytes already read from the socket (no socket readiness will announce them). */
int ld_tls_pending(ld_ssl_t *s);
void ld_tls_close(ld_ssl_t *s);

/* ---- objects (objects.c) ---- */
typedef struct {
	const char *name; /* NUL-terminated, owned by the list; NULL for a name generated from seq */
	uint64_t seq;
	uint64_t size;
	uint64_t hash; /* xxhash64 of the content when has_hash (written by this run) */
	int host;      /* -url-list: the URL's host; otherwise -1 */
	bool has_hash;
} ld_obj_t;

/* Startup (single thread): adds a named object; returns 0, -1 on allocation failure. */
int ld_objs_add_named(const char *name, size_t len, uint64_t size, int host);
/* From any thread: adds an object this run wrote. Returns 0, -1 on allocation failure. */
int ld_objs_add_put(uint64_t seq, uint64_t size, uint64_t hash, bool has_hash);
uint64_t ld_objs_count(void);
/* Entry i < ld_objs_count(); the pointer stays valid until ld_objs_free. */
const ld_obj_t *ld_objs_at(uint64_t i);
void ld_objs_free(void);
/* The name of o ("<loaderid>-<seq>" for generated ones) into buf; returns its length. */
size_t ld_obj_name(const ld_obj_t *o, char *buf, size_t cap);
/* Generated name for seq into buf; returns its length. */
size_t ld_seq_name(uint64_t seq, char *buf, size_t cap);
void ld_objs_set_loaderid(const char *id);

/* ---- job (job.c): what each worker does next, and when the run stops ---- */
typedef enum { LD_JOB_RUN = 0, LD_JOB_CLEANUP } ld_job_kind_t;

typedef struct {
	ld_op_t op;
	const ld_obj_t *obj;  /* GET: the object */
	uint64_t seq;         /* PUT, DEL: the generated name's number */
	uint64_t size;        /* PUT: payload bytes */
	uint64_t payload_off; /* PUT: start of the payload in the random buffer */
} ld_task_t;

typedef struct {
	const ld_opts_t *o;
	ld_job_kind_t kind;
	int64_t deadline_ns; /* monotonic; 0 = none */
	atomic_bool stop;    /* no new requests */
	atomic_bool abort;   /* drop requests in flight too */
	atomic_uint_fast64_t puts_issued;
	atomic_uint_fast64_t put_bytes_issued;
	atomic_uint_fast64_t seq_next; /* next generated name */
	uint64_t seq_first;            /* first name this run generates */
	uint64_t seq_end;              /* cleanup: names [seq_first, seq_end) */
	atomic_uint_fast64_t del_next; /* cleanup cursor */
	/* epochs / unique GETs: a shared permutation, under mu */
	pthread_mutex_t mu;
	uint64_t *perm;
	uint64_t perm_len, perm_pos;
	int epoch;               /* epochs completed */
	uint64_t gets_available; /* GET-able objects at start (the loader's share) */
	const char *stop_reason; /* static string, first reason wins (under mu) */
	/* random payload */
	const uint8_t *payload;
	uint64_t payload_len;
} ld_job_t;

int ld_job_init(ld_job_t *j, const ld_opts_t *o, ld_job_kind_t kind, uint64_t seq_first);
void ld_job_destroy(ld_job_t *j);
/* Stops the job (idempotent); reason is kept if it is the first. */
void ld_job_stop(ld_job_t *j, const char *reason);
/*
 * The next task for a worker, or false when the job is over (then the worker goes idle). now_ns
 * is monotonic; rng a per-thread xorshift state.
 */
bool ld_job_next(ld_job_t *j, int64_t now_ns, uint64_t *rng, ld_task_t *t);
/*
 * GetBatch (-pctput 0): the objects of the next up to max GETs into objs, as ld_job_next would pick
 * them one by one but under one lock, and never across an epoch's end (the last batch of an epoch
 * may be shorter). Returns the count, 0 when the job is over.
 */
size_t ld_job_next_gets(ld_job_t *j, int64_t now_ns, uint64_t *rng, const ld_obj_t **objs, size_t max);
uint64_t ld_rand(uint64_t *state);

/* ---- HTTP client pieces (httpc.c) ---- */
typedef enum {
	LD_RESP_HEAD = 0,
	LD_RESP_BODY_LEN,
	LD_RESP_BODY_EOF,
	LD_RESP_CHUNKED, /* a chunked body, decoded by ft_hp_chunked_decode */
	LD_RESP_DONE,
} ld_resp_state_t;

/* Receives body bytes (after de-chunking) when set. */
typedef void (*ld_body_fn)(void *ctx, const char *p, size_t n);

/*
 * Incremental parser of one HTTP/1.x response. The head (ft_hp_parse_resp_head) is parsed in place
 * when it arrives in one piece, else gathered in hbuf (allocated once, LD_HEAD_MAX). Headers kept:
 * status, Content-Length, Transfer-Encoding: chunked, Connection, Location, Ais-Checksum-Type/-Value.
 */
#define LD_HEAD_MAX (64 * 1024)
#define LD_HEADERS_MAX 128 /* most headers in a response head */
typedef struct {
	ld_resp_state_t state;
	int status;
	int minor;
	bool chunked, keep_alive, no_body;
	int64_t content_length; /* -1 when absent */
	uint64_t left;          /* body bytes still due (Content-Length) */
	uint64_t body_bytes;    /* body bytes seen */
	ft_hp_chunked_t chunk;  /* LD_RESP_CHUNKED: the decoder's state */
	char *hbuf;             /* owned; NULL until a head is split across reads */
	size_t hlen;
	char location[LD_LOCATION_MAX];
	char cksum_type[16];
	char cksum_value[FT_CKSUM_HEX_MAX];
} ld_resp_t;

/* Ready for a new response; head_request: a HEAD (no body follows whatever the headers say). */
void ld_resp_reset(ld_resp_t *r, bool head_request);
void ld_resp_free(ld_resp_t *r);
/*
 * Feeds n bytes. Returns the count consumed (<= n; the rest belongs to what follows), or -1 on a
 * malformed response (err holds why). r->state == LD_RESP_DONE once the response (a 1xx one
 * included) is complete. In LD_RESP_BODY_EOF the body ends with the connection: call
 * ld_resp_eof.
 */
ssize_t ld_resp_feed(ld_resp_t *r, const char *p, size_t n, ld_body_fn fn, void *ctx, char *err, size_t errlen);
/* The peer closed the connection: returns true when that completes the response. */
bool ld_resp_eof(ld_resp_t *r);

/* Appends to a fixed buffer; sets b->overflow instead of writing past cap. */
typedef struct {
	char *p;
	size_t len, cap;
	bool overflow;
} ld_buf_t;
void ld_buf_add(ld_buf_t *b, const char *s, size_t n);
/*
 * The access token every native request carries ("Authorization: Bearer"): FT_TOKEN from the
 * environment, else the file `token` at the top of FT_STATE_DIR (what `ft-cluster start` writes);
 * none when neither is set. Call once before any request; returns 0, or -1 with err when
 * FT_STATE_DIR's token cannot be read.
 */
int ld_token_load(char *err, size_t errlen);
void ld_buf_str(ld_buf_t *b, const char *s);
void ld_buf_u64(ld_buf_t *b, uint64_t v);
/* Percent-encodes s into b: everything but unreserved (and '/' when keep_slash). */
void ld_buf_escape(ld_buf_t *b, const char *s, size_t n, bool keep_slash);

/* What one request looks like on the wire (engine and sync client). */
typedef struct {
	const char *method;
	const char *authority;         /* Host */
	const char *path;              /* origin form: "/a/b?x=y" */
	int64_t content_length;        /* -1: no body */
	uint64_t range_off, range_len; /* range_len 0 and range_off 0: no Range; range_len 0: "off-" */
	bool range;
	bool expect_continue;
	bool s3_sign; /* add SigV4 headers (ld_s3_*) */
} ld_reqspec_t;

/* Writes the request head into b. Returns 0, -1 when it does not fit or signing fails. */
int ld_req_write(ld_buf_t *b, const ld_reqspec_t *rs);

/* ---- object URLs and S3 (route.c) ---- */
/* Configures routing once: the proxy/S3 host indexes and (for -direct) the cluster map (borrowed). */
int ld_route_init(const ld_opts_t *o, ft_smap_t *smap, char *err, size_t errlen);
void ld_route_free(void);
/*
 * Where a request for object name (len bytes) goes: host index and origin-form path (written to
 * path). url-list objects use the URL's host and path. Returns 0, -1 on error (err filled).
 */
int ld_route(const ld_opts_t *o, const ld_obj_t *url_obj, const char *name, size_t len, int *host, ld_buf_t *path,
	     char *err, size_t errlen);
/* -direct: the index in the cluster map of the target owning name; -1 without -direct. */
int ld_route_owner(const ld_opts_t *o, const char *name, size_t len);
/* Targets in the cluster map with -direct (0 without). */
int ld_route_targets(void);
/* The host index of target t of the cluster map, or the proxy's when t < 0. */
int ld_route_host_of(int t);
/* Whether S3 signing is configured (credentials in the environment). */
bool ld_s3_signing(void);
/* Adds x-amz-date, x-amz-content-sha256 and Authorization for rs to b (before the blank line). */
int ld_s3_sign_headers(ld_buf_t *b, const ld_reqspec_t *rs);

/* ---- blocking one-shot client for startup and bookkeeping (sync.c) ---- */
typedef struct {
	int status;
	char *body; /* NUL-terminated, owned: free() */
	size_t body_len;
	char location[LD_LOCATION_MAX];
} ld_sync_resp_t;

/* Sends one request (Connection: close) to a host index; follows no redirects. Returns 0 or -1. */
int ld_sync_do(int host, const ld_reqspec_t *rs, const void *body, size_t body_len, ld_sync_resp_t *out, int timeout_ms,
	       char *err, size_t errlen);

/* ---- discovery at start (listing.c) ---- */
/* Fills the object list from -filelist, -url-list or a bucket listing; seq_first: the first free
 * generated number. Creates a missing native bucket when PUTs will run (*created set). */
int ld_discover(const ld_opts_t *o, uint64_t *seq_first, bool *created, char *err, size_t errlen);
/* Reads the cluster map from the proxy (for -direct); NULL on error. */
ft_smap_t *ld_fetch_smap(const ld_opts_t *o, char *err, size_t errlen);
/* Destroys the bucket (native) after a cleanup of a bucket the loader created. */
int ld_destroy_bucket(const ld_opts_t *o, char *err, size_t errlen);

/* ---- stats (stats.c) ---- */
typedef struct {
	uint64_t count; /* completed requests, errors included */
	uint64_t bytes; /* body bytes received (GET) or sent (PUT) by successful requests */
	uint64_t errors;
	uint64_t items; /* GETBATCH: members of the successful batches' answers */
	ft_hist_t lat;  /* latency in ns of every completed request */
} ld_opstats_t;

/* "GET", "PUT", "DELETE", "GETBATCH": the op's name in tables, JSON and error messages. */
const char *ld_op_name(ld_op_t op);

void ld_opstats_reset(ld_opstats_t *s);
void ld_opstats_merge(ld_opstats_t *dst, const ld_opstats_t *src);

typedef struct ld_report ld_report_t;
ld_report_t *ld_report_new(const ld_opts_t *o, FILE *out);
/* One interval row per op with activity; merged into the totals. */
void ld_report_interval(ld_report_t *r, const ld_opstats_t iv[LD_NOPS], double elapsed_s, double interval_s);
/* Prints the final summary of the phase ("run" or "cleanup"). */
void ld_report_summary(ld_report_t *r, const char *phase, double elapsed_s, const char *stop_reason);
/* The totals so far. */
const ld_opstats_t *ld_report_totals(const ld_report_t *r);
/* Writes the JSON file (intervals, summary, extra object fields, stolen); path "-" = one line on stdout. Returns 0 or -1. */
int ld_report_write_json(ld_report_t *r, const char *path, void *extra_json);
void ld_report_free(ld_report_t *r);

/* ---- GetBatch (batch.c): one POST /v1/batch for up to -get-batchsize GETs ---- */
typedef struct ld_batch ld_batch_t;

/* A worker's batch state (request body, items, answer walker), allocated once; NULL when out of memory. */
ld_batch_t *ld_batch_new(const ld_opts_t *o);
void ld_batch_free(ld_batch_t *b);
/*
 * Takes the next batch's objects from the job and builds its request: *host is where it goes (the
 * proxy, or with -direct the target owning most of its items). Returns the item count, 0 when the
 * job is over, -1 when the body cannot be built (err filled; the items were taken: a failed batch).
 */
int ld_batch_next(ld_batch_t *b, ld_job_t *j, int64_t now_ns, uint64_t *rng, int *host, char *err, size_t errlen);
/* The JSON body of the batch in flight. */
const char *ld_batch_body(const ld_batch_t *b, size_t *len);
/* "[7 items from "<first name>"]": the batch in flight, for messages. */
const char *ld_batch_label(ld_batch_t *b);
/* Before each response (each hop): forgets what an earlier one said. */
void ld_batch_answer_reset(ld_batch_t *b);
/* Body bytes of a response with this status: a 200's are walked as TAR, another's first bytes kept for messages. */
void ld_batch_answer_feed(ld_batch_t *b, int status, const char *p, size_t n);
/* Why the answer is already known to be bad (a malformed TAR, a member not asked for), or NULL. */
const char *ld_batch_answer_error(const ld_batch_t *b);
/*
 * The 200's body ended: NULL when it was a whole TAR holding exactly the items asked, in order,
 * each named "<bucket>/<objname>", else why (in b).
 */
const char *ld_batch_answer_end(ld_batch_t *b);
/* The start of a failed answer's body (an error's JSON), "" when none. */
const char *ld_batch_answer_text(ld_batch_t *b);
/* Members walked in the current answer. */
uint64_t ld_batch_members(const ld_batch_t *b);

/* ---- engine (engine.c) ---- */
typedef struct ld_engine ld_engine_t;
/* Starts nthreads event loops sharing nworkers concurrent requests of job j. NULL on error. */
ld_engine_t *ld_engine_start(ld_job_t *j, int nthreads, int nworkers, char *err, size_t errlen);
/* Waits up to timeout_ns for every loop to finish; returns true when all have. */
bool ld_engine_wait(ld_engine_t *e, int64_t timeout_ns);
/* Moves the stats gathered since the last call into out (added). Prints queued error messages. */
void ld_engine_collect(ld_engine_t *e, ld_opstats_t out[LD_NOPS], FILE *errout);
/* Joins the threads and frees everything. */
void ld_engine_free(ld_engine_t *e);

int64_t ld_mono_ns(void);

#endif
