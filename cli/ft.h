/* SPDX-License-Identifier: Apache-2.0 */
/* Internal header of the ft command-line client: options, the HTTP calls, output helpers, the command groups. */
#ifndef FT_CLI_H
#define FT_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes (docs/cli.md). */
enum {
	FT_EXIT_OK = 0,
	FT_EXIT_FAIL = 1,    /* the cluster answered an error, or some objects or a job failed */
	FT_EXIT_USAGE = 2,   /* bad command line */
	FT_EXIT_CONNECT = 3, /* the cluster could not be reached */
};

#define FT_CLI_MAX_ARGS 64
#define FT_CLI_MAX_OPTS 32

/* The parsed command line: positionals and --options (a boolean option has value "true"). */
typedef struct {
	const char *endpoint; /* no trailing '/' */
	const char *token;    /* NULL: no Authorization header */
	const char *cacert;   /* PEM CA bundle for https endpoints; NULL: the system's */
	bool json;
	bool help;
	int n_args;
	const char *args[FT_CLI_MAX_ARGS];
	int n_opts;
	struct {
		const char *name, *value;
	} opts[FT_CLI_MAX_OPTS];
} ft_cli_t;

/* The value of --name (the last one given), or NULL. */
const char *cli_opt(const ft_cli_t *c, const char *name);
/* Whether boolean --name was given. */
bool cli_flag(const ft_cli_t *c, const char *name);
/* --name as an integer in [lo, hi], def when absent; -1 after printing a usage error. */
long cli_opt_int(const ft_cli_t *c, const char *name, long def, long lo, long hi);
/* Prints "ft: <msg>" to stderr; returns code. */
int cli_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A bucket argument: "name", "ais://name", "s3://name" (aws), "gs://" (gcp), "az://" (azure), "ht://". */
typedef struct {
	char provider[16];
	char name[256];
} cli_bucket_t;
/* 0, or -1 after printing a usage error. */
int cli_bucket_parse(const char *arg, cli_bucket_t *b);

/* ---- http.c ---- */
typedef struct {
	long status; /* 0: no answer (err says why) */
	char *body;  /* NUL-terminated, may be NULL; the caller frees with cli_resp_free */
	size_t len;
	char err[1024];   /* transport error, or the answer's "message" */
	char props[8192]; /* Ais-Bucket-Props of a HEAD */
	int64_t length;   /* Content-Length of a HEAD, -1 unknown */
} cli_resp_t;

/* Once, before any thread calls. */
void cli_http_init(const ft_cli_t *c);
/*
 * method path?query with an optional JSON body (borrowed) at the endpoint (or at path itself when
 * it is a whole http(s):// URL); redirects followed
 * with the body re-sent. 0 when an answer came (r->status), -1 when none (r->err).
 */
int cli_call(const char *method, const char *path, const json_t *body, cli_resp_t *r);
/* GETs path into out (a FILE, written as it comes); progress (may be NULL) counts the bytes. */
int cli_get_to(const char *path, FILE *out, int64_t *progress, cli_resp_t *r);
/* POSTs the JSON body to path and writes a 2xx answer's body into out as it comes (redirects followed). */
int cli_post_to(const char *path, const json_t *body, FILE *out, int64_t *progress, cli_resp_t *r);
/* PUTs size bytes of file in to path (redirects followed, the body re-sent). */
int cli_put_from(const char *path, FILE *in, int64_t size, int64_t *progress, cli_resp_t *r);
/* The answer as JSON (new reference) or NULL. */
json_t *cli_resp_json(const cli_resp_t *r);
void cli_resp_free(cli_resp_t *r);
/* Prints the failure of r ("ft: <what>: <status> <message>") and returns the exit code that fits. */
int cli_resp_fail(const cli_resp_t *r, const char *what);
/* "/v1/objects/<bucket>/<encoded name>?provider=<p>" into buf. */
void cli_obj_path(char *buf, size_t cap, const cli_bucket_t *b, const char *name);
/* Percent-encodes s into out (cap bytes); keep_slash leaves '/' as is. */
void cli_encode(const char *s, char *out, size_t cap, bool keep_slash);

/* ---- out.c: tables, sizes, progress ---- */
/* "1.5 MiB" style into buf. */
const char *cli_size(int64_t n, char *buf, size_t cap);
/* "1m05s" style (or "-" for < 0). */
const char *cli_duration(int64_t secs, char *buf, size_t cap);
/* A table: a header row, then rows of n columns, printed aligned by cli_table_print. */
typedef struct cli_table cli_table_t;
cli_table_t *cli_table_new(int n_cols, const char *const *header);
void cli_table_row(cli_table_t *t, const char *const *cells);
void cli_table_print(cli_table_t *t, FILE *out);
/* Prints j as indented JSON on stdout. */
void cli_print_json(const json_t *j);

/*
 * A progress display on stderr: a bar redrawn in place on a terminal, else a plain line every few
 * seconds. total < 0: unknown.
 */
typedef struct {
	bool tty, enabled;
	int64_t start_ns, last_ns;
	int width;
} cli_progress_t;
void cli_progress_init(cli_progress_t *p, const ft_cli_t *c);
/* Shows objects done of total, bytes, rate (bytes/s, -1 computed here), ETA (s, -1 unknown). */
void cli_progress_show(cli_progress_t *p, const char *label, int64_t done, int64_t total, int64_t bytes, int64_t rate,
		       int64_t eta, bool final);
int64_t cli_now_ns(void);

/* "BUCKET/NAME" into *b and *name (NAME may be empty unless need_name): 0, or -1 after a usage error. */
int cli_object_split(const char *arg, cli_bucket_t *b, const char **name, bool need_name);
/* ft object get-batch (batch.c). */
int cli_object_get_batch(ft_cli_t *c);

/* ---- command groups: each returns an exit code ---- */
int cli_bucket(ft_cli_t *c);
int cli_object(ft_cli_t *c);
int cli_job(ft_cli_t *c);
int cli_cluster(ft_cli_t *c);
int cli_etl(ft_cli_t *c);
/* Waits for job id with a progress display; the job's final document in *out (may be NULL). */
int cli_job_wait(ft_cli_t *c, const char *id, json_t **out);

#endif
