/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader entry point: discovery, the run with its live table, Ctrl-C, cleanup, summary and JSON output. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "loader.h"

#define POLL_NS 100000000ll /* the main thread looks at signals and the clock this often */

static volatile sig_atomic_t interrupts;

static void on_signal(int sig)
{
	(void)sig;
	interrupts++;
}

static void install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The random payload PUT bodies are cut from (at least maxsize when that is <= 64 MiB). */
static uint8_t *make_payload(uint64_t seed, uint64_t maxsize, uint64_t *len)
{
	uint64_t n = maxsize < (64u << 10) ? (64u << 10) : maxsize > (64u << 20) ? (64u << 20) : maxsize;
	uint64_t *p = malloc((n + 7) & ~7ull), x = seed;

	if (p == NULL)
		return NULL;
	for (uint64_t i = 0; i < (n + 7) / 8; i++) { /* splitmix64 */
		uint64_t z = (x += 0x9E3779B97F4A7C15ull);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		p[i] = z ^ (z >> 31);
	}
	*len = n;
	return (uint8_t *)p;
}

static void describe(const ld_opts_t *o, uint64_t listed, bool created, const ft_smap_t *smap)
{
	char a[32], b[32];

	if (o->api == LD_API_URLS)
		printf("ft-loader: %llu URLs from %s", (unsigned long long)listed, o->url_list);
	else if (o->api == LD_API_S3)
		printf("ft-loader: S3 API at %s (%s), bucket \"%s\" (%llu objects%s)", o->s3endpoint,
		       o->s3_path_style ? "path style" : "virtual-hosted", o->bucket, (unsigned long long)listed,
		       ld_s3_signing() ? "" : ", unsigned requests: no AWS credentials in the environment");
	else
		printf("ft-loader: proxy %s:%d%s, bucket \"%s\" (%llu objects%s%s)", o->ip, o->port,
		       smap != NULL ? ", direct to the owning targets" : "", o->bucket, (unsigned long long)listed,
		       o->filelist[0] ? " from -filelist" : "", created ? ", created now" : "");
	printf("; %d workers on %d threads; %d%% PUT", o->numworkers, o->iothreads, o->pctput);
	if (o->pctput > 0)
		printf(" of %s..%s", ld_fmt_size((double)o->minsize, a, sizeof(a)),
		       ld_fmt_size((double)o->maxsize, b, sizeof(b)));
	if (o->duration_ns > 0)
		printf("; for %.1fs", (double)o->duration_ns / 1e9);
	if (o->maxputs > 0)
		printf("; maxputs %llu", (unsigned long long)o->maxputs);
	if (o->epochs > 0)
		printf("; %d epochs", o->epochs);
	if (o->get_batchsize > 0)
		printf("; GetBatch of %d", o->get_batchsize);
	printf("\n");
	fflush(stdout);
}

static void handle_interrupts(ld_job_t *j, int *seen)
{
	if (interrupts > *seen) {
		*seen = interrupts;
		if (*seen == 1) {
			fprintf(stderr,
				"ft-loader: interrupted: finishing requests in flight (Ctrl-C again to abort)\n");
			ld_job_stop(j, "interrupted");
		} else {
			atomic_store(&j->abort, true);
		}
	}
}

/* Runs the main job: the live table every -statsinterval until the engine is done. Returns 0 or -1. */
static int run_phase(const ld_opts_t *o, ld_job_t *j, ld_report_t *rep, double *elapsed, int *seen)
{
	char err[256];
	ld_opstats_t iv[LD_NOPS];
	int64_t start = ld_mono_ns(), last_tick = start, next_tick = 0;
	ld_engine_t *E;

	for (int k = 0; k < LD_NOPS; k++)
		ld_opstats_reset(&iv[k]);
	if (o->duration_ns > 0)
		j->deadline_ns = start + o->duration_ns;
	if (o->statsinterval_ns > 0)
		next_tick = start + o->statsinterval_ns;
	E = ld_engine_start(j, o->iothreads, o->numworkers, err, sizeof(err));
	if (E == NULL) {
		fprintf(stderr, "ft-loader: %s\n", err);
		return -1;
	}
	for (;;) {
		int64_t now = ld_mono_ns(), wait = POLL_NS;
		if (next_tick != 0 && next_tick - now < wait)
			wait = next_tick - now > 0 ? next_tick - now : 0;
		if (j->deadline_ns != 0 && j->deadline_ns - now < wait)
			wait = j->deadline_ns - now > 0 ? j->deadline_ns - now : 0;
		bool done = ld_engine_wait(E, wait);
		now = ld_mono_ns();
		handle_interrupts(j, seen);
		if (j->deadline_ns != 0 && now >= j->deadline_ns)
			ld_job_stop(j, "duration reached");
		if (done)
			break;
		if (next_tick != 0 && now >= next_tick) {
			ld_engine_collect(E, iv, stderr);
			ld_report_interval(rep, iv, (double)(now - start) / 1e9, (double)(now - last_tick) / 1e9);
			for (int k = 0; k < LD_NOPS; k++)
				ld_opstats_reset(&iv[k]);
			last_tick = now;
			while (next_tick <= now)
				next_tick += o->statsinterval_ns;
		}
	}
	int64_t end = ld_mono_ns();
	ld_engine_collect(E, iv, stderr);
	ld_engine_free(E);
	/* the last (partial) interval, so the rows add up to the summary */
	ld_report_interval(rep, iv, (double)(end - start) / 1e9, (double)(end - last_tick) / 1e9);
	*elapsed = (double)(end - start) / 1e9;
	return 0;
}

/* Deletes every name this run generated (seq_first .. seq_end-1). Returns the DELETE stats in out. */
static int cleanup_phase(const ld_opts_t *o, uint64_t seq_first, uint64_t seq_end, ld_opstats_t *out, double *elapsed,
			 int *seen)
{
	ld_job_t j;
	ld_engine_t *E;
	ld_opstats_t st[LD_NOPS];
	char err[256];
	int64_t start = ld_mono_ns();

	for (int k = 0; k < LD_NOPS; k++)
		ld_opstats_reset(&st[k]);
	if (ld_job_init(&j, o, LD_JOB_CLEANUP, seq_first) != 0)
		return -1;
	j.seq_end = seq_end;
	E = ld_engine_start(&j, o->iothreads, o->numworkers, err, sizeof(err));
	if (E == NULL) {
		fprintf(stderr, "ft-loader: cleanup: %s\n", err);
		ld_job_destroy(&j);
		return -1;
	}
	while (!ld_engine_wait(E, POLL_NS))
		handle_interrupts(&j, seen);
	ld_engine_collect(E, st, stderr);
	ld_engine_free(E);
	ld_job_destroy(&j);
	*out = st[LD_DEL];
	*elapsed = (double)(ld_mono_ns() - start) / 1e9;
	return 0;
}

int main(int argc, char **argv)
{
	ld_opts_t o;
	ld_job_t job;
	bool job_ok = false, created = false;
	ft_smap_t *smap = NULL;
	ld_report_t *rep = NULL;
	uint8_t *payload = NULL;
	uint64_t seq_first = 1, listed, run_errors = 0;
	ld_opstats_t cleaned;
	double run_s = 0, clean_s = 0;
	int exit_code = 2, seen = 0, rc;
	char err[512];
	json_t *extra = NULL;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = ld_opts_parse(&o, argc, argv);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	ld_objs_set_loaderid(o.loaderid);
	ld_opstats_reset(&cleaned);
	if (ld_token_load(err, sizeof(err)) != 0 ||
	    ld_tls_init(&o, o.https || o.cacert[0] || strncasecmp(o.s3endpoint, "https://", 8) == 0, err,
			sizeof(err)) != 0) {
		fprintf(stderr, "ft-loader: %s\n", err);
		goto out;
	}
	if (o.direct && (smap = ld_fetch_smap(&o, err, sizeof(err))) == NULL) {
		fprintf(stderr, "ft-loader: -direct: %s\n", err);
		goto out;
	}
	if (ld_route_init(&o, smap, err, sizeof(err)) != 0 ||
	    ld_discover(&o, &seq_first, &created, err, sizeof(err)) != 0) {
		fprintf(stderr, "ft-loader: %s\n", err);
		goto out;
	}
	listed = ld_objs_count();
	describe(&o, listed, created, smap);
	if (listed == 0 && o.pctput == 0) {
		fprintf(stderr, "ft-loader: nothing to GET: bucket \"%s\" is empty and -pctput is 0\n", o.bucket);
		goto out;
	}
	if (ld_job_init(&job, &o, LD_JOB_RUN, seq_first) != 0) {
		fprintf(stderr, "ft-loader: out of memory\n");
		goto out;
	}
	job_ok = true;
	payload = make_payload(o.seed, o.pctput > 0 ? o.maxsize : 0, &job.payload_len);
	rep = ld_report_new(&o, o.quiet || o.statsinterval_ns == 0 ? NULL : stdout);
	if (payload == NULL || rep == NULL) {
		fprintf(stderr, "ft-loader: out of memory\n");
		goto out;
	}
	job.payload = payload;
	install_signals();
	if (run_phase(&o, &job, rep, &run_s, &seen) != 0)
		goto out;
	ld_report_summary(rep, "run", run_s, job.stop_reason);
	for (int k = 0; k < LD_NOPS; k++)
		run_errors += ld_report_totals(rep)[k].errors;
	uint64_t seq_end = atomic_load(&job.seq_next);
	if (o.cleanup && o.api != LD_API_URLS && !atomic_load(&job.abort)) {
		if (seq_end > seq_first && cleanup_phase(&o, seq_first, seq_end, &cleaned, &clean_s, &seen) != 0)
			goto out;
		printf("Cleanup: %llu DELETE requests for the %llu names this run wrote, %llu errors, %.2fs\n",
		       (unsigned long long)cleaned.count, (unsigned long long)(seq_end - seq_first),
		       (unsigned long long)cleaned.errors, clean_s);
		if (created && cleaned.errors == 0 && o.api == LD_API_NATIVE) {
			if (ld_destroy_bucket(&o, err, sizeof(err)) != 0) {
				fprintf(stderr, "ft-loader: cleanup: %s\n", err);
				cleaned.errors++;
			} else {
				printf("Cleanup: destroyed bucket \"%s\" (created by this run)\n", o.bucket);
			}
		}
	}
	exit_code = run_errors > 0 || cleaned.errors > 0 ? 1 : 0;
	if (o.json_path[0]) {
		extra = json_pack("{s:I, s:I, s:I, s:s?, s:b, s:{s:b, s:I, s:I, s:I, s:f}, s:i}", "objects_listed",
				  (json_int_t)listed, "first_put_seq", (json_int_t)seq_first, "errors",
				  (json_int_t)run_errors, "stop_reason", job.stop_reason, "interrupted", seen > 0,
				  "cleanup", "enabled", o.cleanup, "requests", (json_int_t)cleaned.count, "errors",
				  (json_int_t)cleaned.errors, "names", (json_int_t)(seq_end - seq_first), "duration_s",
				  clean_s, "exit_code", exit_code);
		if (ld_report_write_json(rep, o.json_path, extra) != 0) {
			fprintf(stderr, "ft-loader: cannot write %s\n", o.json_path);
			exit_code = 2;
		}
	}
out:
	ld_report_free(rep);
	if (job_ok)
		ld_job_destroy(&job);
	free(payload);
	ld_route_free();
	ft_smap_put(smap);
	ld_objs_free();
	ld_tls_free();
	return exit_code;
}
