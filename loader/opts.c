/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader command line: aisloader-style single-dash flags, sizes and durations with units, -help. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/codec.h"
#include "loader.h"

typedef enum { F_STR, F_INT, F_SIZE, F_DUR, F_BOOL, F_U64 } flag_kind_t;

typedef struct {
	const char *name;
	flag_kind_t kind;
	size_t off;      /* offset of the field in ld_opts_t */
	size_t cap;      /* F_STR: buffer size */
	const char *def; /* default, as text (for -help) */
	const char *help;
} flag_t;

#define OFF(f) offsetof(ld_opts_t, f)
#define STR(f) F_STR, OFF(f), sizeof(((ld_opts_t *)0)->f)

static const flag_t flags[] = {
	{"ip", STR(ip), "localhost", "proxy host (native API: listing, redirects, cluster map)"},
	{"port", F_INT, OFF(port), 0, "51080", "proxy public port"},
	{"https", F_BOOL, OFF(https), 0, "false",
	 "the proxy at -ip/-port speaks TLS (a cluster started with --tls); certificates are always verified"},
	{"cacert", STR(cacert), "",
	 "CA bundle (PEM) to verify https servers with; default FT_CACERT, else FT_STATE_DIR/tls/ca.pem when it "
	 "exists, else the system's CAs"},
	{"bucket", STR(bucket), "", "bucket to read from and write to (required, except with -url-list)"},
	{"provider", STR(provider), "ais", "bucket provider: ais, or a remote one (aws, gcp, azure, ht)"},
	{"duration", F_DUR, OFF(duration_ns), 0, "1m",
	 "how long to run (30s, 1m, 1h30m); 0 = until -maxputs, -totalputsize or -epochs end (or Ctrl-C); "
	 "when one of those is given and -duration is not, there is no time limit"},
	{"numworkers", F_INT, OFF(numworkers), 0, "10",
	 "concurrent requests in flight (each one keep-alive connection per host)"},
	{"iothreads", F_INT, OFF(iothreads), 0, "0",
	 "event-loop threads sharing the workers; 0 = number of CPUs (never more than -numworkers)"},
	{"sched", STR(sched), "batch",
	 "scheduling of the event-loop threads: batch (SCHED_BATCH: a reply that wakes one does not preempt "
	 "what runs, so a server under test on the same cores keeps them) or other (Linux's default: a woken "
	 "thread preempts at once; latencies closer to the replies' arrival when the cores are shared)"},
	{"pctput", F_INT, OFF(pctput), 0, "0", "percentage of PUTs (0..100); the rest are GETs"},
	{"minsize", F_SIZE, OFF(minsize), 0, "1MiB", "smallest PUT object (16KiB, 1MiB, 8MB; K, KB, KiB = 1024)"},
	{"maxsize", F_SIZE, OFF(maxsize), 0, "1MiB", "largest PUT object (sizes uniform in [minsize, maxsize])"},
	{"totalputsize", F_SIZE, OFF(totalputsize), 0, "0",
	 "stop after PUTs of this many bytes were started (the last one may cross it); 0 = no limit"},
	{"maxputs", F_U64, OFF(maxputs), 0, "0", "stop after exactly this many PUT requests; 0 = no limit"},
	{"cleanup", F_BOOL, OFF(cleanup), 0, "false",
	 "at the end (also after Ctrl-C) delete every object this run PUT (and the bucket, if it created it)"},
	{"epochs", F_INT, OFF(epochs), 0, "0",
	 "read every object (listed or in -filelist) this many times, each epoch in a new random order, then stop"},
	{"uniquegets", F_BOOL, OFF(uniquegets), 0, "false",
	 "GET each object once per epoch in random order (without it GETs pick objects at random)"},
	{"readoff", F_SIZE, OFF(readoff), 0, "0", "GET a range starting at this offset"},
	{"readlen", F_SIZE, OFF(readlen), 0, "0", "GET a range of this length (0 = to the end of the object)"},
	{"verifyhash", F_BOOL, OFF(verifyhash), 0, "false",
	 "hash GET bodies (of the object's checksum type) and compare with Ais-Checksum-Value and the hash recorded at PUT"},
	{"statsinterval", F_DUR, OFF(statsinterval_ns), 0, "10s", "live table period; 0 = summary only"},
	{"json", STR(json_path), "",
	 "write per-interval rows and the summary as JSON to this file; a bare -json (or -json -) prints the "
	 "document as the last line of stdout instead"},
	{"seed", F_U64, OFF(seed), 0, "0", "random seed for sizes, payloads and picks; 0 = from the clock"},
	{"filelist", STR(filelist), "", "file of object names to GET (one per line) instead of listing the bucket"},
	{"loaderid", STR(loaderid), "0", "this loader's id: PUT names are <loaderid>-<seq>"},
	{"loadernum", F_INT, OFF(loadernum), 0, "1",
	 "number of loaders sharing the bucket: with -epochs/-uniquegets each reads its share (numeric -loaderid)"},
	{"s3endpoint", STR(s3endpoint), "",
	 "use the S3 API at this URL (e.g. http://127.0.0.1:51080/s3, or https://); SigV4 from AWS_ACCESS_KEY_ID, "
	 "AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION"},
	{"s3-use-path-style", F_BOOL, OFF(s3_path_style), 0, "false",
	 "S3 path-style URLs (endpoint/bucket/key); default virtual-hosted (Host: bucket.endpoint)"},
	{"url-list", STR(url_list), "",
	 "file of http:// or https:// URLs: GET them (and PUT to them with -pctput), e.g. to drive nginx"},
	{"direct", F_BOOL, OFF(direct), 0, "false",
	 "read the cluster map once and send object requests straight to the owning target (no 307 hop)"},
	{"get-batchsize", F_INT, OFF(get_batchsize), 0, "0",
	 "GetBatch: read the objects N at a time (1..10000), each N in one POST /v1/batch answered with a TAR "
	 "(aisloader's -get-batchsize); native API and -pctput 0 only; 0 = one GET per object"},
	{"timeout", F_DUR, OFF(timeout_ns), 0, "60s", "one request's limit, redirects included; 0 = none"},
	{"quiet", F_BOOL, OFF(quiet), 0, "false", "no live table (the summary is still printed)"},
};

#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: ft-loader -bucket NAME [flags]\n"
		   "       ft-loader -url-list FILE [flags]\n\n"
		   "Load generator for FastTier (aisloader-style flags: -flag value or -flag=value; -- works too).\n"
		   "GETs (and PUTs with -pctput) with -numworkers requests in flight over keep-alive connections,\n"
		   "a live table every -statsinterval and a summary at the end. Exit status: 0 when every request\n"
		   "succeeded, 1 when any failed (a status other than 2xx, a hash mismatch, a connection error),\n"
		   "2 for a usage or setup error.\n\nflags:\n");
	for (size_t i = 0; i < N_FLAGS; i++) {
		const char *arg = flags[i].kind == F_BOOL   ? ""
				  : flags[i].kind == F_SIZE ? " SIZE"
				  : flags[i].kind == F_DUR  ? " DURATION"
				  : flags[i].kind == F_STR  ? " STRING"
							    : " N";
		fprintf(f, "  -%s%s\n\t%s (default %s)\n", flags[i].name, arg, flags[i].help,
			flags[i].def[0] ? flags[i].def : "\"\"");
	}
	fprintf(f, "  -help\n\tthis text\n\n"
		   "examples:\n"
		   "  ft-loader -bucket b1 -pctput 100 -minsize 1MiB -maxsize 1MiB -maxputs 1000 -numworkers 16\n"
		   "  ft-loader -bucket b1 -duration 30s -numworkers 64 -direct -json out.json\n"
		   "  ft-loader -bucket b1 -epochs 2 -uniquegets -verifyhash -duration 0\n"
		   "  ft-loader -bucket b1 -epochs 1 -uniquegets -get-batchsize 64 -direct   # GetBatch\n"
		   "  ft-loader -url-list urls.txt -numworkers 32 -duration 10s   # e.g. nginx baseline\n"
		   "  ft-loader -bucket b1 -https -cacert DIR/tls/ca.pem -direct   # a cluster started with --tls\n"
		   "See docs/loader.md.\n");
}

int ld_parse_size(const char *s, uint64_t *out)
{
	char *end;
	double v;
	uint64_t mult = 1;

	while (isspace((unsigned char)*s))
		s++;
	if (*s == '\0' || *s == '-')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || v < 0)
		return -1;
	while (isspace((unsigned char)*end))
		end++;
	static const struct {
		const char *sfx;
		uint64_t mult;
	} units[] = {
		{"", 1},
		{"b", 1},
		{"k", 1ull << 10},
		{"kb", 1ull << 10},
		{"kib", 1ull << 10},
		{"m", 1ull << 20},
		{"mb", 1ull << 20},
		{"mib", 1ull << 20},
		{"g", 1ull << 30},
		{"gb", 1ull << 30},
		{"gib", 1ull << 30},
		{"t", 1ull << 40},
		{"tb", 1ull << 40},
		{"tib", 1ull << 40},
	};
	size_t i;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].sfx) == 0) {
			mult = units[i].mult;
			break;
		}
	}
	if (i == sizeof(units) / sizeof(units[0]))
		return -1;
	v *= (double)mult;
	if (v >= 1.8e19)
		return -1;
	*out = (uint64_t)(v + 0.5);
	return 0;
}

int ld_parse_duration(const char *s, int64_t *out_ns)
{
	char *end;
	double v;

	if (isdigit((unsigned char)*s) || *s == '.') { /* a bare number: seconds (aisloader's habit) */
		errno = 0;
		v = strtod(s, &end);
		if (errno == 0 && end != s && *end == '\0' && v < 9.2e9) {
			*out_ns = (int64_t)(v * 1e9);
			return 0;
		}
	}
	return ft_duration_parse(s, out_ns); /* Go's form: "30s", "1m30s", "250ms" */
}

const char *ld_fmt_size(double bytes, char *buf, size_t cap)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int i = 0;

	while (bytes >= 1024 && i < 4) {
		bytes /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, cap, "%.0f%s", bytes, u[i]);
	else
		snprintf(buf, cap, "%.2f%s", bytes, u[i]);
	return buf;
}

static int parse_bool(const char *v, bool *out)
{
	if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "t") == 0 || strcmp(v, "T") == 0 ||
	    strcmp(v, "TRUE") == 0 || strcmp(v, "True") == 0) {
		*out = true;
		return 0;
	}
	if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcmp(v, "f") == 0 || strcmp(v, "F") == 0 ||
	    strcmp(v, "FALSE") == 0 || strcmp(v, "False") == 0) {
		*out = false;
		return 0;
	}
	return -1;
}

/* Stores value v into the field of f. Returns 0 or -1. */
static int set_flag(ld_opts_t *o, const flag_t *f, const char *v)
{
	char *field = (char *)o + f->off;
	char *end;

	switch (f->kind) {
	case F_STR:
		if (strlen(v) >= f->cap)
			return -1;
		memcpy(field, v, strlen(v) + 1);
		return 0;
	case F_INT: {
		errno = 0;
		long x = strtol(v, &end, 10);
		if (errno != 0 || end == v || *end != '\0' || x < 0 || x > 1000000000)
			return -1;
		*(int *)field = (int)x;
		return 0;
	}
	case F_U64: {
		errno = 0;
		if (*v == '-')
			return -1;
		unsigned long long x = strtoull(v, &end, 10);
		if (errno != 0 || end == v || *end != '\0')
			return -1;
		*(uint64_t *)field = x;
		return 0;
	}
	case F_SIZE:
		return ld_parse_size(v, (uint64_t *)field);
	case F_DUR:
		return ld_parse_duration(v, (int64_t *)field);
	case F_BOOL:
		return parse_bool(v, (bool *)field);
	}
	return -1;
}

static void set_defaults(ld_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < N_FLAGS; i++) {
		if (set_flag(o, &flags[i], flags[i].def[0] ? flags[i].def : (flags[i].kind == F_STR ? "" : "0")) != 0)
			abort(); /* a default that does not parse is a bug here */
	}
}

static const flag_t *find_flag(const char *name, size_t len)
{
	for (size_t i = 0; i < N_FLAGS; i++) {
		if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
			return &flags[i];
	}
	return NULL;
}

/* -get-batchsize: its range, and what a batch of whole-object GETs cannot do. Returns 0 or -1 after a message. */
static int check_batch(const ld_opts_t *o)
{
	const char *why = NULL;

	if (o->get_batchsize == 0)
		return 0;
	if (o->get_batchsize > 10000)
		why = "must be 0..10000";
	else if (o->api != LD_API_NATIVE)
		why = "works with the native API only (not with -s3endpoint or -url-list)";
	else if (o->pctput != 0)
		why = "reads only: it needs -pctput 0";
	else if (o->readoff != 0 || o->readlen != 0)
		why = "reads whole objects: no -readoff or -readlen";
	else if (o->verifyhash)
		why = "cannot check object hashes (a batch's TAR carries no checksums): no -verifyhash";
	if (why == NULL)
		return 0;
	fprintf(stderr, "ft-loader: -get-batchsize %s\n", why);
	return -1;
}

/* Checks combinations and derives api, sizes and seed. Returns 0 or -1 after a message. */
static int validate(ld_opts_t *o, bool min_set, bool max_set, bool duration_set)
{
	/* a count limit alone means "until it is reached", not "for the default minute" */
	if (!duration_set && (o->maxputs > 0 || o->totalputsize > 0 || o->epochs > 0))
		o->duration_ns = 0;
	if (o->url_list[0] && o->s3endpoint[0]) {
		fprintf(stderr, "ft-loader: -url-list and -s3endpoint exclude each other\n");
		return -1;
	}
	o->api = o->url_list[0] ? LD_API_URLS : o->s3endpoint[0] ? LD_API_S3 : LD_API_NATIVE;
	if (o->api != LD_API_URLS && o->bucket[0] == '\0') {
		fprintf(stderr, "ft-loader: -bucket is required (or -url-list)\n");
		return -1;
	}
	if (o->direct && o->api != LD_API_NATIVE) {
		fprintf(stderr, "ft-loader: -direct works with the native API only\n");
		return -1;
	}
	if (strncasecmp(o->ip, "https://", 8) == 0 || strncasecmp(o->ip, "http://", 7) == 0) {
		fprintf(stderr, "ft-loader: -ip takes a host, not a URL; for an https proxy give -ip HOST -https\n");
		return -1;
	}
	if (o->pctput > 100) {
		fprintf(stderr, "ft-loader: -pctput must be 0..100\n");
		return -1;
	}
	if (o->numworkers < 1) {
		fprintf(stderr, "ft-loader: -numworkers must be at least 1\n");
		return -1;
	}
	if (o->port < 1 || o->port > 65535) {
		fprintf(stderr, "ft-loader: -port must be 1..65535\n");
		return -1;
	}
	if (o->loadernum < 1) {
		fprintf(stderr, "ft-loader: -loadernum must be at least 1\n");
		return -1;
	}
	if (o->minsize > o->maxsize) {
		if (min_set && max_set) {
			fprintf(stderr, "ft-loader: -minsize is larger than -maxsize\n");
			return -1;
		}
		if (min_set)
			o->maxsize = o->minsize;
		else
			o->minsize = o->maxsize;
	}
	if (o->loaderid[0] == '\0' || strchr(o->loaderid, '/') != NULL) {
		fprintf(stderr, "ft-loader: -loaderid must be non-empty and hold no '/'\n");
		return -1;
	}
	if (o->filelist[0] && o->api == LD_API_URLS) {
		fprintf(stderr, "ft-loader: -filelist and -url-list exclude each other\n");
		return -1;
	}
	if (strcmp(o->json_path, "true") == 0)
		strcpy(o->json_path, "-");
	else if (strcmp(o->json_path, "false") == 0)
		o->json_path[0] = '\0';
	if (strcmp(o->sched, "batch") != 0 && strcmp(o->sched, "other") != 0) {
		fprintf(stderr, "ft-loader: -sched must be batch or other\n");
		return -1;
	}
	o->sched_batch = strcmp(o->sched, "batch") == 0;
	if (check_batch(o) != 0)
		return -1;
	if (o->iothreads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		o->iothreads = n > 0 ? (int)n : 1;
	}
	if (o->iothreads > o->numworkers)
		o->iothreads = o->numworkers;
	if (o->seed == 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		o->seed = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
		if (o->seed == 0)
			o->seed = 1;
	}
	return 0;
}

int ld_opts_parse(ld_opts_t *o, int argc, char **argv)
{
	bool min_set = false, max_set = false, duration_set = false;

	set_defaults(o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *val = NULL;
		const flag_t *f;

		if (a[0] != '-' || a[1] == '\0') {
			fprintf(stderr, "ft-loader: unexpected argument \"%s\" (flags start with '-'; see -help)\n", a);
			return -1;
		}
		a += a[1] == '-' ? 2 : 1;
		if (strcmp(a, "help") == 0 || strcmp(a, "h") == 0) {
			usage(stdout);
			return 1;
		}
		eq = strchr(a, '=');
		f = find_flag(a, eq != NULL ? (size_t)(eq - a) : strlen(a));
		if (f == NULL) {
			fprintf(stderr, "ft-loader: unknown flag \"%s\" (see -help)\n", argv[i]);
			return -1;
		}
		if (eq != NULL) {
			val = eq + 1;
		} else if (f->off == OFF(json_path) &&
			   (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] != '\0'))) {
			val = "-"; /* aisloader's boolean -json: the document goes to stdout */
		} else if (f->kind == F_BOOL) {
			val = "true"; /* a bare boolean sets it; -flag=false clears it */
		} else {
			if (i + 1 >= argc) {
				fprintf(stderr, "ft-loader: flag -%s needs a value\n", f->name);
				return -1;
			}
			val = argv[++i];
		}
		if (set_flag(o, f, val) != 0) {
			fprintf(stderr, "ft-loader: bad value \"%s\" for -%s\n", val, f->name);
			return -1;
		}
		if (f->off == OFF(minsize))
			min_set = true;
		if (f->off == OFF(maxsize))
			max_set = true;
		if (f->off == OFF(duration_ns))
			duration_set = true;
	}
	return validate(o, min_set, max_set, duration_set);
}
