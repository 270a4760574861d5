/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader output: live table rows per interval, the final summary, and the same as a JSON file. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "loader.h"

static const char *const op_names[LD_NOPS] = {
	[LD_GET] = "GET",
	[LD_PUT] = "PUT",
	[LD_DEL] = "DELETE",
	[LD_GETBATCH] = "GETBATCH",
};

const char *ld_op_name(ld_op_t op)
{
	return (unsigned)op < LD_NOPS ? op_names[op] : "?";
}

struct ld_report {
	const ld_opts_t *o;
	FILE *out;
	bool header_done;
	ld_opstats_t total[LD_NOPS];
	json_t *intervals; /* array of rows */
	json_t *summary;   /* array of rows, set by ld_report_summary("run") */
	json_t *phases;    /* object: phase -> {duration_s, stop_reason} */
};

void ld_opstats_reset(ld_opstats_t *s)
{
	s->count = s->bytes = s->errors = s->items = 0;
	ft_hist_reset(&s->lat);
}

void ld_opstats_merge(ld_opstats_t *dst, const ld_opstats_t *src)
{
	dst->count += src->count;
	dst->bytes += src->bytes;
	dst->errors += src->errors;
	dst->items += src->items;
	ft_hist_merge(&dst->lat, &src->lat);
}

ld_report_t *ld_report_new(const ld_opts_t *o, FILE *out)
{
	ld_report_t *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->o = o;
	r->out = out;
	for (int k = 0; k < LD_NOPS; k++)
		ld_opstats_reset(&r->total[k]);
	r->intervals = json_array();
	r->summary = json_array();
	r->phases = json_object();
	if (r->intervals == NULL || r->summary == NULL || r->phases == NULL) {
		ld_report_free(r);
		return NULL;
	}
	return r;
}

void ld_report_free(ld_report_t *r)
{
	if (r == NULL)
		return;
	json_decref(r->intervals);
	json_decref(r->summary);
	json_decref(r->phases);
	free(r);
}

const ld_opstats_t *ld_report_totals(const ld_report_t *r)
{
	return r->total;
}

/* A latency in ns as "850us", "12.34ms", "1.23s". */
static const char *fmt_lat(uint64_t ns, char *buf, size_t cap)
{
	if (ns < 1000000)
		snprintf(buf, cap, "%.0fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, cap, "%.2fms", (double)ns / 1e6);
	else
		snprintf(buf, cap, "%.2fs", (double)ns / 1e9);
	return buf;
}

static void print_header(ld_report_t *r)
{
	fprintf(r->out, "%-8s %-8s %10s %11s %8s %8s %8s %8s %8s %8s %8s %13s %9s %7s\n", "Time", "OP", "Count", "Size",
		"Min", "Avg", "P50", "P90", "P99", "P99.9", "Max", "Throughput", "Ops/s", "Errors");
}

static void print_row(ld_report_t *r, const char *when, ld_op_t op, const ld_opstats_t *s, double secs)
{
	char sz[32], tp[40], l[7][16];
	const ft_hist_t *h = &s->lat;

	ld_fmt_size((double)s->bytes, sz, sizeof(sz));
	ld_fmt_size(secs > 0 ? (double)s->bytes / secs : 0, tp, sizeof(tp) - 2);
	strcat(tp, "/s");
	fprintf(r->out, "%-8s %-8s %10llu %11s %8s %8s %8s %8s %8s %8s %8s %13s %9.0f %7llu\n", when, op_names[op],
		(unsigned long long)s->count, sz, fmt_lat(h->count ? h->min : 0, l[0], 16),
		fmt_lat((uint64_t)ft_hist_mean(h), l[1], 16), fmt_lat(ft_hist_percentile(h, 50), l[2], 16),
		fmt_lat(ft_hist_percentile(h, 90), l[3], 16), fmt_lat(ft_hist_percentile(h, 99), l[4], 16),
		fmt_lat(ft_hist_percentile(h, 99.9), l[5], 16), fmt_lat(h->max, l[6], 16), tp,
		secs > 0 ? (double)s->count / secs : 0.0, (unsigned long long)s->errors);
}

static json_t *row_json(ld_op_t op, const ld_opstats_t *s, double secs)
{
	const ft_hist_t *h = &s->lat;
	json_t *lat = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "min", h->count ? (double)h->min / 1e3 : 0.0,
				"avg", ft_hist_mean(h) / 1e3, "p50", (double)ft_hist_percentile(h, 50) / 1e3, "p90",
				(double)ft_hist_percentile(h, 90) / 1e3, "p99", (double)ft_hist_percentile(h, 99) / 1e3,
				"p99.9", (double)ft_hist_percentile(h, 99.9) / 1e3, "max", (double)h->max / 1e3);

	json_t *row = json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:o}", "op", op_names[op], "count",
				(json_int_t)s->count, "bytes", (json_int_t)s->bytes, "errors", (json_int_t)s->errors,
				"seconds", secs, "ops_per_s", secs > 0 ? (double)s->count / secs : 0.0, "bytes_per_s",
				secs > 0 ? (double)s->bytes / secs : 0.0, "latency_us", lat);

	if (row != NULL && op == LD_GETBATCH) { /* the objects the batches delivered */
		json_object_set_new(row, "items", json_integer((json_int_t)s->items));
		json_object_set_new(row, "items_per_s", json_real(secs > 0 ? (double)s->items / secs : 0.0));
	}
	return row;
}

void ld_report_interval(ld_report_t *r, const ld_opstats_t iv[LD_NOPS], double elapsed_s, double interval_s)
{
	char when[16];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	for (int k = 0; k < LD_NOPS; k++) {
		if (iv[k].count == 0 && iv[k].errors == 0)
			continue;
		ld_opstats_merge(&r->total[k], &iv[k]);
		if (r->out != NULL) {
			if (!r->header_done) {
				print_header(r);
				r->header_done = true;
			}
			print_row(r, when, (ld_op_t)k, &iv[k], interval_s);
		}
		json_t *row = row_json((ld_op_t)k, &iv[k], interval_s);
		if (row != NULL) {
			json_object_set_new(row, "time", json_string(when));
			json_object_set_new(row, "elapsed_s", json_real(elapsed_s));
			json_array_append_new(r->intervals, row);
		}
	}
	if (r->out != NULL)
		fflush(r->out);
}

void ld_report_summary(ld_report_t *r, const char *phase, double elapsed_s, const char *stop_reason)
{
	FILE *f = r->out != NULL ? r->out : stdout;
	bool any = false;

	fprintf(f, "\nSummary (%s): %.2fs%s%s\n", phase, elapsed_s, stop_reason ? ", " : "",
		stop_reason ? stop_reason : "");
	for (int k = 0; k < LD_NOPS; k++) {
		if (r->total[k].count == 0 && r->total[k].errors == 0)
			continue;
		if (!any) {
			ld_report_t tmp = *r;
			tmp.out = f;
			print_header(&tmp);
			any = true;
		}
		ld_report_t tmp = *r;
		tmp.out = f;
		print_row(&tmp, "total", (ld_op_t)k, &r->total[k], elapsed_s);
		json_array_append_new(r->summary, row_json((ld_op_t)k, &r->total[k], elapsed_s));
	}
	if (!any)
		fprintf(f, "no requests completed\n");
	const ld_opstats_t *gb = &r->total[LD_GETBATCH];
	if (gb->count > 0)
		fprintf(f, "GETBATCH: %llu items in %llu batches (%.1f a successful batch), %.0f items/s\n",
			(unsigned long long)gb->items, (unsigned long long)gb->count,
			gb->count > gb->errors ? (double)gb->items / (double)(gb->count - gb->errors) : 0.0,
			elapsed_s > 0 ? (double)gb->items / elapsed_s : 0.0);
	json_object_set_new(r->phases, phase,
			    json_pack("{s:f, s:s?}", "duration_s", elapsed_s, "stop_reason", stop_reason));
	fflush(f);
}

static json_t *opts_json(const ld_opts_t *o)
{
	static const char *const apis[] = {"native", "s3", "url-list"};

	return json_pack("{s:s, s:i, s:s, s:s, s:s, s:f, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:b, s:i, s:b, s:I, s:I,"
			 " s:b, s:f, s:I, s:s, s:i, s:b, s:s, s:i, s:b}",
			 "api", apis[o->api], "port", o->port, "ip", o->ip, "bucket", o->bucket, "provider",
			 o->provider, "duration_s", (double)o->duration_ns / 1e9, "numworkers", o->numworkers,
			 "iothreads", o->iothreads, "pctput", o->pctput, "minsize", (json_int_t)o->minsize, "maxsize",
			 (json_int_t)o->maxsize, "totalputsize", (json_int_t)o->totalputsize, "maxputs",
			 (json_int_t)o->maxputs, "cleanup", o->cleanup, "epochs", o->epochs, "uniquegets",
			 o->uniquegets, "readoff", (json_int_t)o->readoff, "readlen", (json_int_t)o->readlen,
			 "verifyhash", o->verifyhash, "statsinterval_s", (double)o->statsinterval_ns / 1e9, "seed",
			 (json_int_t)o->seed, "loaderid", o->loaderid, "loadernum", o->loadernum, "direct", o->direct,
			 "sched", o->sched, "get_batchsize", o->get_batchsize, "https", o->https);
}

int ld_report_write_json(ld_report_t *r, const char *path, void *extra_json)
{
	json_t *doc = json_pack("{s:i, s:o, s:O, s:O, s:O}", "version", 1, "config", opts_json(r->o), "intervals",
				r->intervals, "summary", r->summary, "phases", r->phases);
	json_t *extra = extra_json;
	int rc = -1;

	if (doc != NULL && extra != NULL)
		json_object_update(doc, extra);
	json_decref(extra);
	if (doc != NULL && strcmp(path, "-") == 0) {
		/* one line, last on stdout, so a caller can pick it out of the table output */
		fflush(stdout);
		rc = json_dumpf(doc, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10));
		if (rc == 0 && (fputc('\n', stdout) == EOF || fflush(stdout) != 0))
			rc = -1;
	} else if (doc != NULL) {
		rc = json_dump_file(doc, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
	}
	json_decref(doc);
	return rc;
}
