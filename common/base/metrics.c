/* SPDX-License-Identifier: Apache-2.0 */
/* Metrics registry: the table of every family, sharded lock-free cells, collectors, Prometheus text rendering. */
#include "base/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Cells per shard: enough for the table below (checked at start). */
#define MAX_CELLS 1024
#define MAX_COLLECTORS 16

enum { TYPE_COUNTER = 0, TYPE_GAUGE, TYPE_HISTOGRAM };

typedef struct {
	const char *name, *help;
	int type;
	int roles;
	const char *label1;
	const char *const *values1;
	unsigned n1;
	const char *label2;
	const char *const *values2;
	unsigned n2;
} family_t;

static const char *const ops[FT_M_N_OPS] = {"GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "OTHER"};
static const char *const codes[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const char *const caches[] = {[FT_M_CACHE_WARM] = "warm", [FT_M_CACHE_COLD] = "cold"};
static const char *const listeners[] = {[FT_M_LISTENER_TCP] = "tcp", [FT_M_LISTENER_UNIX] = "unix"};
static const char *const relay_ways[] = {
	[FT_M_RELAY_SMALL] = "small", [FT_M_RELAY_SPLICED] = "spliced", [FT_M_RELAY_WORKER] = "worker"};
static const char *const providers[] = {"aws", "gcp", "azure", "ht", "other"};
static const char *const job_kinds[] = {"rebalance", "resilver",  "prefetch", "evict", "evict-bucket",
					"mirror",    "ec-encode", "scrub",    "other"};
static const char *const error_kinds[FT_ME__COUNT] = {
	[FT_ME_FRAMING] = "framing", [FT_ME_CLIENT_GONE] = "client_gone",
	[FT_ME_BACKEND] = "backend", [FT_ME_NODE] = "node",
	[FT_ME_RELAY] = "relay",     [FT_ME_DAMAGED] = "damaged",
	[FT_ME_DISK] = "disk",
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define BOTH (FT_M_ROLE_PROXY | FT_M_ROLE_TARGET)
#define L1(name, vals) name, vals, N(vals)
#define L2(name, vals) name, vals, N(vals)
#define NOLABEL NULL, NULL, 1

static const family_t families[FT_M__COUNT] = {
	[FT_M_HTTP_REQUESTS] = {"ft_http_requests_total",
				"Requests answered on the public port, by method and status class.", TYPE_COUNTER, BOTH,
				L1("op", ops), L2("code", codes)},
	[FT_M_HTTP_REQUEST_BYTES] = {"ft_http_request_bytes_total", "Request body bytes received on the public port.",
				     TYPE_COUNTER, BOTH, L1("op", ops), L2("code", codes)},
	[FT_M_HTTP_RESPONSE_BYTES] = {"ft_http_response_bytes_total",
				      "Response bytes (head and body) sent on the public port.", TYPE_COUNTER, BOTH,
				      L1("op", ops), L2("code", codes)},
	[FT_M_HTTP_DURATION] = {"ft_http_request_duration_seconds",
				"Time from a request's head to its last response byte; cache=cold when a backend "
				"was read or written.",
				TYPE_HISTOGRAM, BOTH, L1("op", ops), L2("cache", caches)},
	[FT_M_HTTP_CONNECTIONS] = {"ft_http_connections_total",
				   "Client connections accepted on the public port: its TCP port, or its Unix socket "
				   "(nodes of the same machine and mount namespace).",
				   TYPE_COUNTER, BOTH, L1("listener", listeners), NOLABEL},
	[FT_M_HTTP_OPEN_CONNECTIONS] = {"ft_http_open_connections", "Client connections open on the public port.",
					TYPE_GAUGE, BOTH, NOLABEL, NOLABEL},
	[FT_M_CACHE_HITS] = {"ft_cache_hits_total", "GETs of remote-bucket objects served from the local copy.",
			     TYPE_COUNTER, FT_M_ROLE_TARGET, NOLABEL, NOLABEL},
	[FT_M_CACHE_MISSES] = {"ft_cache_misses_total", "GETs of remote-bucket objects that went to the backend.",
			       TYPE_COUNTER, FT_M_ROLE_TARGET, NOLABEL, NOLABEL},
	[FT_M_COLDGET_BYTES] = {"ft_coldget_bytes_total", "Bytes read from each backend provider by cold GETs.",
				TYPE_COUNTER, FT_M_ROLE_TARGET, L1("provider", providers), NOLABEL},
	[FT_M_LRU_EVICTED_OBJECTS] = {"ft_lru_evicted_objects_total", "Cached objects evicted by the LRU.",
				      TYPE_COUNTER, FT_M_ROLE_TARGET, NOLABEL, NOLABEL},
	[FT_M_LRU_EVICTED_BYTES] = {"ft_lru_evicted_bytes_total", "Bytes of the cached objects evicted by the LRU.",
				    TYPE_COUNTER, FT_M_ROLE_TARGET, NOLABEL, NOLABEL},
	[FT_M_JOB_OBJECTS] = {"ft_job_objects_total", "Objects done by jobs, by kind (rebalance, prefetch, ...).",
			      TYPE_COUNTER, FT_M_ROLE_TARGET, L1("kind", job_kinds), NOLABEL},
	[FT_M_JOB_BYTES] = {"ft_job_bytes_total", "Bytes of the objects done by jobs, by kind.", TYPE_COUNTER,
			    FT_M_ROLE_TARGET, L1("kind", job_kinds), NOLABEL},
	[FT_M_JOB_ERRORS] = {"ft_job_errors_total", "Objects jobs failed on, by kind.", TYPE_COUNTER, FT_M_ROLE_TARGET,
			     L1("kind", job_kinds), NOLABEL},
	[FT_M_JOBS_RUNNING] = {"ft_jobs_running", "Jobs running now, by kind.", TYPE_GAUGE, FT_M_ROLE_TARGET,
			       L1("kind", job_kinds), NOLABEL},
	[FT_M_ERRORS] = {"ft_errors_total", "Failures by kind.", TYPE_COUNTER, BOTH, L1("kind", error_kinds), NOLABEL},
	[FT_M_S3_RELAY_RETRIES] = {"ft_s3_relay_retries_total",
				   "S3 relay requests retried on the next target after a failed connection.",
				   TYPE_COUNTER, FT_M_ROLE_PROXY, NOLABEL, NOLABEL},
	[FT_M_TARGET_DOWN_REPORTS] = {"ft_target_down_reports_total",
				      "Targets marked down at once after a failed connection.", TYPE_COUNTER,
				      FT_M_ROLE_PROXY, NOLABEL, NOLABEL},
	[FT_M_S3_RELAY_GETS] =
		{"ft_s3_relay_gets_total",
		 "S3 GETs relayed from the targets, by the way of the answer: small (read whole and sent by "
		 "a loop thread), spliced (moved socket to socket by a loop thread), worker (a worker thread).",
		 TYPE_COUNTER, FT_M_ROLE_PROXY, L1("way", relay_ways), NOLABEL},
	[FT_M_OPEN_FILE_HITS] =
		{"ft_open_file_cache_hits_total",
		 "Warm GETs and HEADs served from an object file kept open (no open, no metadata read).", TYPE_COUNTER,
		 FT_M_ROLE_TARGET, NOLABEL, NOLABEL},
	[FT_M_OPEN_FILE_STALE] =
		{"ft_open_file_cache_stale_total",
		 "Kept-open object files found replaced, deleted or changed at a GET, and opened anew.", TYPE_COUNTER,
		 FT_M_ROLE_TARGET, NOLABEL, NOLABEL},
};

/* Upper bounds of the histogram buckets, in seconds (+Inf is the last cell). */
static const double bucket_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
#define N_BUCKETS (N(bucket_le) + 1)
#define HIST_CELLS (N_BUCKETS + 2) /* buckets, sum (ns), count */

static _Alignas(64) uint64_t cells[FT_METRICS_SHARDS][MAX_CELLS];
static unsigned base_cell[FT_M__COUNT];
static atomic_uint next_shard;
static __thread int my_shard = -1;
static atomic_int role = BOTH;

static struct {
	pthread_mutex_t mu;
	ft_metrics_collect_fn fn[MAX_COLLECTORS];
	void *arg[MAX_COLLECTORS];
	int n;
} collectors = {.mu = PTHREAD_MUTEX_INITIALIZER};

static unsigned series_cells(const family_t *f)
{
	return f->type == TYPE_HISTOGRAM ? HIST_CELLS : 1;
}

/* Lays the families out in the cells once, before main. */
__attribute__((constructor)) static void metrics_layout(void)
{
	unsigned next = 0;

	for (int m = 0; m < FT_M__COUNT; m++) {
		const family_t *f = &families[m];
		base_cell[m] = next;
		next += f->n1 * f->n2 * series_cells(f);
	}
	if (next > MAX_CELLS) {
		fprintf(stderr, "metrics: the families need %u cells, more than %d\n", next, MAX_CELLS);
		abort();
	}
}

static uint64_t *my_cells(void)
{
	if (my_shard < 0)
		my_shard = (int)(atomic_fetch_add_explicit(&next_shard, 1, memory_order_relaxed) % FT_METRICS_SHARDS);
	return cells[my_shard];
}

/* The first cell of a series; labels past their family's values go to the last value. */
static unsigned cell_of(ft_metric_t m, unsigned l1, unsigned l2)
{
	const family_t *f = &families[m];

	if (l1 >= f->n1)
		l1 = f->n1 - 1;
	if (l2 >= f->n2)
		l2 = f->n2 - 1;
	return base_cell[m] + (l1 * f->n2 + l2) * series_cells(f);
}

void ft_metric_add(ft_metric_t m, unsigned label1, unsigned label2, uint64_t n)
{
	if ((unsigned)m >= FT_M__COUNT)
		return;
	__atomic_fetch_add(&my_cells()[cell_of(m, label1, label2)], n, __ATOMIC_RELAXED);
}

void ft_metric_observe_ns(ft_metric_t m, unsigned label1, unsigned label2, uint64_t ns)
{
	unsigned b = 0, c;
	uint64_t *cl;

	if ((unsigned)m >= FT_M__COUNT || families[m].type != TYPE_HISTOGRAM)
		return;
	while (b < N(bucket_le) && (double)ns > bucket_le[b] * 1e9)
		b++;
	c = cell_of(m, label1, label2);
	cl = my_cells();
	__atomic_fetch_add(&cl[c + b], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cl[c + N_BUCKETS], ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cl[c + N_BUCKETS + 1], 1, __ATOMIC_RELAXED);
}

unsigned ft_metric_label_index(ft_metric_t m, const char *word)
{
	const family_t *f;

	if ((unsigned)m >= FT_M__COUNT)
		return 0;
	f = &families[m];
	for (unsigned i = 0; f->values1 != NULL && word != NULL && i < f->n1; i++)
		if (strcmp(f->values1[i], word) == 0)
			return i;
	return f->n1 - 1;
}

static uint64_t sum_cell(unsigned c)
{
	uint64_t v = 0;

	for (int s = 0; s < FT_METRICS_SHARDS; s++)
		v += __atomic_load_n(&cells[s][c], __ATOMIC_RELAXED);
	return v;
}

int64_t ft_metric_value(ft_metric_t m, unsigned label1, unsigned label2)
{
	if ((unsigned)m >= FT_M__COUNT)
		return 0;
	return (int64_t)sum_cell(cell_of(m, label1, label2));
}

void ft_metrics_set_role(int r)
{
	atomic_store(&role, r);
}

int ft_metrics_add_collector(ft_metrics_collect_fn fn, void *arg)
{
	int rc = -1;

	pthread_mutex_lock(&collectors.mu);
	if (collectors.n < MAX_COLLECTORS) {
		collectors.fn[collectors.n] = fn;
		collectors.arg[collectors.n] = arg;
		collectors.n++;
		rc = 0;
	}
	pthread_mutex_unlock(&collectors.mu);
	return rc;
}

void ft_metrics_remove_collector(ft_metrics_collect_fn fn, void *arg)
{
	pthread_mutex_lock(&collectors.mu);
	for (int i = 0; i < collectors.n; i++) {
		if (collectors.fn[i] != fn || collectors.arg[i] != arg)
			continue;
		memmove(&collectors.fn[i], &collectors.fn[i + 1], (size_t)(collectors.n - i - 1) * sizeof(fn));
		memmove(&collectors.arg[i], &collectors.arg[i + 1], (size_t)(collectors.n - i - 1) * sizeof(arg));
		collectors.n--;
		break;
	}
	pthread_mutex_unlock(&collectors.mu);
}

void ft_metrics_escape(ft_strbuf_t *out, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\')
			ft_strbuf_adds(out, "\\\\");
		else if (*s == '"')
			ft_strbuf_adds(out, "\\\"");
		else if (*s == '\n')
			ft_strbuf_adds(out, "\\n");
		else
			ft_strbuf_addc(out, *s);
	}
}

void ft_metrics_family(ft_strbuf_t *out, const char *name, const char *help, const char *type)
{
	ft_strbuf_addf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void ft_metrics_sample(ft_strbuf_t *out, const char *name, const char *labels, double value)
{
	if (labels == NULL || labels[0] == '\0')
		ft_strbuf_addf(out, "%s %.17g\n", name, value);
	else
		ft_strbuf_addf(out, "%s{%s} %.17g\n", name, labels, value);
}

/* `a="x",b="y"` of series (l1, l2), into buf; "" for a family without labels. */
static void series_labels(const family_t *f, unsigned l1, unsigned l2, char *buf, size_t cap)
{
	buf[0] = '\0';
	if (f->label1 != NULL && f->label2 != NULL)
		snprintf(buf, cap, "%s=\"%s\",%s=\"%s\"", f->label1, f->values1[l1], f->label2, f->values2[l2]);
	else if (f->label1 != NULL)
		snprintf(buf, cap, "%s=\"%s\"", f->label1, f->values1[l1]);
}

static void render_histogram(ft_strbuf_t *out, const family_t *f, unsigned c, const char *labels)
{
	const char *sep = labels[0] != '\0' ? "," : "";
	uint64_t cum = 0;

	for (unsigned b = 0; b < N_BUCKETS; b++) {
		cum += sum_cell(c + b);
		if (b < N(bucket_le))
			ft_strbuf_addf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", f->name, labels, sep, bucket_le[b],
				       (unsigned long long)cum);
		else
			ft_strbuf_addf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", f->name, labels, sep,
				       (unsigned long long)cum);
	}
	ft_strbuf_addf(out, "%s_sum%s%s%s %.9f\n", f->name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
		       (double)sum_cell(c + N_BUCKETS) / 1e9);
	ft_strbuf_addf(out, "%s_count%s%s%s %llu\n", f->name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
		       (unsigned long long)sum_cell(c + N_BUCKETS + 1));
}

static void render_family(ft_strbuf_t *out, ft_metric_t m)
{
	static const char *const type_words[] = {"counter", "gauge", "histogram"};
	const family_t *f = &families[m];
	char labels[256];

	ft_metrics_family(out, f->name, f->help, type_words[f->type]);
	for (unsigned i = 0; i < f->n1; i++) {
		for (unsigned j = 0; j < f->n2; j++) {
			unsigned c = cell_of(m, i, j);
			series_labels(f, i, j, labels, sizeof(labels));
			if (f->type == TYPE_HISTOGRAM) {
				render_histogram(out, f, c, labels);
				continue;
			}
			if (labels[0] != '\0')
				ft_strbuf_addf(out, "%s{%s} ", f->name, labels);
			else
				ft_strbuf_addf(out, "%s ", f->name);
			if (f->type == TYPE_GAUGE)
				ft_strbuf_addf(out, "%lld\n", (long long)sum_cell(c));
			else
				ft_strbuf_addf(out, "%llu\n", (unsigned long long)sum_cell(c));
		}
	}
}

void ft_metrics_render(ft_strbuf_t *out)
{
	int r = atomic_load(&role);

	for (int m = 0; m < FT_M__COUNT; m++)
		if (families[m].roles & r)
			render_family(out, (ft_metric_t)m);
	pthread_mutex_lock(&collectors.mu);
	for (int i = 0; i < collectors.n; i++)
		collectors.fn[i](out, collectors.arg[i]);
	pthread_mutex_unlock(&collectors.mu);
}
