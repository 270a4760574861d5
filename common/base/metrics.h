/* SPDX-License-Identifier: Apache-2.0 */
/* Metrics registry: lock-free sharded counters and histograms, rendered in the Prometheus text format. */
#ifndef FT_METRICS_H
#define FT_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"

/*
 * DESIGN
 * Every metric family of every daemon is one row of the table in metrics.c (name, help, type, up to two
 * labels with fixed value lists, the daemons that show it), so docs/metrics.md and the scrape output have
 * one source. A series is a family plus one value index per label; its cells (one for a counter or gauge,
 * one per bucket plus sum and count for a histogram) sit at a fixed offset in every shard.
 *
 * Hot path: a thread picks a shard once (round robin over FT_METRICS_SHARDS) and adds to its cell with a
 * relaxed atomic add. Threads rarely share a shard, so the add is an uncontended cache line; there is no
 * lock and no allocation anywhere on the path. A scrape sums the shards; a sum may miss adds in flight,
 * never loses them.
 *
 * Values known only when asked (mountpath capacity, map size) come from collectors: callbacks registered
 * at startup that append their own families at render time, with ft_metrics_family() and
 * ft_metrics_sample() so they follow the same format.
 */

typedef enum {
	FT_M_HTTP_REQUESTS = 0,     /* counter {op, code}: requests answered on the public port */
	FT_M_HTTP_REQUEST_BYTES,    /* counter {op, code}: request body bytes received */
	FT_M_HTTP_RESPONSE_BYTES,   /* counter {op, code}: response bytes sent (head and body) */
	FT_M_HTTP_DURATION,         /* histogram {op, cache}: from the request head to the last byte sent */
	FT_M_HTTP_CONNECTIONS,      /* counter {listener}: connections accepted */
	FT_M_HTTP_OPEN_CONNECTIONS, /* gauge: connections open now */
	FT_M_CACHE_HITS,            /* counter: GETs of remote-bucket objects served from the local copy */
	FT_M_CACHE_MISSES,          /* counter: GETs of remote-bucket objects that needed the backend */
	FT_M_COLDGET_BYTES,         /* counter {provider}: bytes read from a backend by cold GETs */
	FT_M_LRU_EVICTED_OBJECTS,   /* counter: cached objects evicted */
	FT_M_LRU_EVICTED_BYTES,     /* counter: their bytes */
	FT_M_JOB_OBJECTS,           /* counter {kind}: objects done by jobs (rebalance, prefetch, ...) */
	FT_M_JOB_BYTES,             /* counter {kind} */
	FT_M_JOB_ERRORS,            /* counter {kind} */
	FT_M_JOBS_RUNNING,          /* gauge {kind} */
	FT_M_ERRORS,                /* counter {kind}: failures by kind (ft_metric_error_t) */
	FT_M_S3_RELAY_RETRIES,      /* counter: S3 relay requests retried on the next target */
	FT_M_TARGET_DOWN_REPORTS,   /* counter: targets reported unreachable by this proxy */
	FT_M_S3_RELAY_GETS,         /* counter {way}: S3 GETs relayed, by how the answer went to the client */
	FT_M_OPEN_FILE_HITS,  /* counter: warm GETs/HEADs served from a kept-open object file (target/core/fcache.c) */
	FT_M_OPEN_FILE_STALE, /* counter: kept-open files found changed at a GET, opened anew */
	FT_M__COUNT
} ft_metric_t;

/* Values of the "op" label: the index is the HTTP method as ft_method_t (common/http/http.h) counts it. */
enum { FT_M_OP_GET = 0, FT_M_OP_HEAD, FT_M_OP_PUT, FT_M_OP_POST, FT_M_OP_DELETE, FT_M_OP_OPTIONS, FT_M_OP_OTHER };
#define FT_M_N_OPS 7
/* Values of the "listener" label of FT_M_HTTP_CONNECTIONS. */
enum { FT_M_LISTENER_TCP = 0, FT_M_LISTENER_UNIX };
/* Values of the "way" label of FT_M_S3_RELAY_GETS (proxy/s3/relay_loop.c). */
enum { FT_M_RELAY_SMALL = 0, FT_M_RELAY_SPLICED, FT_M_RELAY_WORKER };
/* Values of the "cache" label of FT_M_HTTP_DURATION. */
enum { FT_M_CACHE_WARM = 0, FT_M_CACHE_COLD };

/* Failure kinds of FT_M_ERRORS; the label words are in metrics.c. */
typedef enum {
	FT_ME_FRAMING = 0, /* a request the server refused itself: bad framing, timeouts, 413, 431 */
	FT_ME_CLIENT_GONE, /* a response not delivered whole: the client went away or stalled */
	FT_ME_BACKEND,     /* a backend (S3, GCS, Azure, HTTP origin) call failed */
	FT_ME_NODE,        /* a node-to-node call failed (connection or transport) */
	FT_ME_RELAY,       /* the S3 relay could not reach a target */
	FT_ME_DAMAGED,     /* damaged data found (checksum or size mismatch): never served */
	FT_ME_DISK,        /* a local file operation failed (write, rename, fsync) */
	FT_ME__COUNT
} ft_metric_error_t;

/* Which daemons show a family; set once per process with ft_metrics_set_role. */
enum { FT_M_ROLE_PROXY = 1, FT_M_ROLE_TARGET = 2 };

#define FT_METRICS_SHARDS 16

/* The cells of one series: a counter adds n; a gauge adds a signed amount (cast to uint64_t). */
void ft_metric_add(ft_metric_t m, unsigned label1, unsigned label2, uint64_t n);
static inline void ft_metric_inc(ft_metric_t m)
{
	ft_metric_add(m, 0, 0, 1);
}
static inline void ft_metric_error(ft_metric_error_t kind)
{
	ft_metric_add(FT_M_ERRORS, (unsigned)kind, 0, 1);
}
/* One observation of a histogram series, in nanoseconds (rendered in seconds). */
void ft_metric_observe_ns(ft_metric_t m, unsigned label1, unsigned label2, uint64_t ns);
/* The index of word among a family's first label's values (e.g. a job kind, a provider); the last value
 * ("other") when it is not one of them. */
unsigned ft_metric_label_index(ft_metric_t m, const char *word);
/* The sum over the shards of a counter or gauge series (tests, and the proxy's own checks). */
int64_t ft_metric_value(ft_metric_t m, unsigned label1, unsigned label2);

/* FT_M_ROLE_PROXY or FT_M_ROLE_TARGET: families of the other role are left out of the text. */
void ft_metrics_set_role(int role);

/* Appends its families to out at render time; registered at startup (at most 16 collectors). */
typedef void (*ft_metrics_collect_fn)(ft_strbuf_t *out, void *arg);
int ft_metrics_add_collector(ft_metrics_collect_fn fn, void *arg);
/* Removes a collector (at shutdown, before its arg goes away). */
void ft_metrics_remove_collector(ft_metrics_collect_fn fn, void *arg);

/* For collectors: the "# HELP" and "# TYPE" lines of a family, then samples. labels is "" or
 * `a="x",b="y"` with values escaped by ft_metrics_escape. */
void ft_metrics_family(ft_strbuf_t *out, const char *name, const char *help, const char *type);
void ft_metrics_sample(ft_strbuf_t *out, const char *name, const char *labels, double value);
/* Appends s escaped for a label value (backslash, double quote, newline). */
void ft_metrics_escape(ft_strbuf_t *out, const char *s);

/* The whole exposition: every family of this role, then the collectors. The caller frees out. */
void ft_metrics_render(ft_strbuf_t *out);
/* The content type of the text format. */
#define FT_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
