/* SPDX-License-Identifier: Apache-2.0 */
/* Daemon configuration: defaults, then a JSON file, then command-line flags, each key validated. */
#include "base/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/*
 * DESIGN
 * One table describes every key: its name (JSON key and flag), kind, location in ft_config_t and
 * bounds. The JSON file and the command line both funnel into set_text(), so a key is validated
 * the same way wherever it comes from. Derived defaults (control_port, public_host, control_host)
 * are resolved last, from what was given explicitly.
 */

typedef enum {
	KIND_STR, /* char array; size = capacity */
	KIND_STR_NONEMPTY,
	KIND_INT,   /* int within [min, max] */
	KIND_INT64, /* int64_t within [min, max] */
	KIND_LOG_LEVEL,
	KIND_LOG_FORMAT,
	KIND_SYNC,
	KIND_MOUNTPATHS, /* JSON array; `--mountpath` (or `--mountpaths`) once per directory */
	KIND_BOOL,       /* int 0/1: JSON true/false, text true|false|1|0|yes|no */
	KIND_URLS,       /* char array: "" or http(s)://host[:port][/path] URLs, comma-separated */
	KIND_HTTP_URL,   /* char array: "" or one http:// or https://host[:port] URL */
} key_kind_t;

typedef struct {
	const char *name;
	key_kind_t kind;
	size_t off;
	size_t size;
	int64_t min, max;
} config_key_t;

#define STR(field, kind)                                                                            \
	{                                                                                           \
#field, kind, offsetof(ft_config_t, field), sizeof(((ft_config_t *)0)->field), 0, 0 \
	}
#define INT(field, lo, hi)                                                \
	{                                                                 \
#field, KIND_INT, offsetof(ft_config_t, field), 0, lo, hi \
	}
#define BOOL(field)                                                      \
	{                                                                \
#field, KIND_BOOL, offsetof(ft_config_t, field), 0, 0, 1 \
	}

static const config_key_t config_keys[] = {
	STR(id, KIND_STR),
	STR(bind, KIND_STR_NONEMPTY),
	INT(public_port, 1, 65535),
	STR(public_host, KIND_STR),
	INT(control_port, 1, 65535),
	STR(control_host, KIND_STR),
	STR(proxy_url, KIND_URLS),
	STR(state_dir, KIND_STR_NONEMPTY),
	STR(public_unix, KIND_STR),
	{"mountpaths", KIND_MOUNTPATHS, 0, 0, 0, 0},
	{"log_level", KIND_LOG_LEVEL, 0, 0, 0, 0},
	{"log_format", KIND_LOG_FORMAT, 0, 0, 0, 0},
	INT(loop_threads, 0, 1024),
	INT(worker_threads, 1, 1024),
	INT(keepalive_ms, 1, 3600000),
	{"sync", KIND_SYNC, 0, 0, 0, 0},
	{"reserve_bytes", KIND_INT64, offsetof(ft_config_t, reserve_bytes), 0, 0, INT64_MAX},
	{"mpu_expire_hours", KIND_INT, offsetof(ft_config_t, mpu_expire_hours), 0, 0, 1000000},
	INT(http_max_header_bytes, 1024, 16 << 20),
	INT(http_max_headers, 1, 100000),
	INT(http_idle_timeout_ms, 1, 86400000),
	INT(http_header_timeout_ms, 1, 86400000),
	INT(http_body_timeout_ms, 1, 86400000),
	STR(s3_keys, KIND_STR),
	BOOL(s3_anonymous),
	BOOL(s3_root),
	STR(s3_domain, KIND_STR),
	STR(s3_region, KIND_STR_NONEMPTY),
	INT(lru_high_pct, 1, 100),
	INT(lru_low_pct, 0, 99),
	{"lru_quota_bytes", KIND_INT64, offsetof(ft_config_t, lru_quota_bytes), 0, 0, INT64_MAX},
	INT(lru_interval_ms, 10, 86400000),
	{"hint_max_bytes", KIND_INT64, offsetof(ft_config_t, hint_max_bytes), 0, 0, INT64_MAX},
	INT(hint_max_names, 1, 100000000),
	INT(hint_prefetch_inflight, 0, 16),
	INT(probe_interval_ms, 0, 60000),
	INT(s3_relay_timeout_ms, 100, 3600000),
	INT(job_expiry_s, 1, 31536000),
	INT(open_file_cache, 0, 65536),
	INT(job_missing_grace_s, 1, 86400),
	INT(restore_after_s, 0, 604800),
	{"shard_max_decoded_bytes", KIND_INT64, offsetof(ft_config_t, shard_max_decoded_bytes), 0, 1, INT64_MAX},
	{"batch_max_buffered_bytes", KIND_INT64, offsetof(ft_config_t, batch_max_buffered_bytes), 0, 1, INT64_MAX},
	BOOL(auth),
	STR(auth_keys, KIND_STR),
	STR(cluster_secret, KIND_STR),
	BOOL(insecure),
	BOOL(auth_anonymous_metrics),
	BOOL(allow_public_read),
	INT(token_ttl_max, 60, 31536000),
	STR(etcd, KIND_HTTP_URL),
	STR(etcd_prefix, KIND_STR_NONEMPTY),
	INT(lease_ttl_s, 1, 600),
	STR(etcd_cert, KIND_STR),
	STR(etcd_key, KIND_STR),
	STR(tls_cert, KIND_STR),
	STR(tls_key, KIND_STR),
	STR(tls_client_ca, KIND_STR),
	STR(tls_ca, KIND_STR),
};

#define N_KEYS (sizeof(config_keys) / sizeof(config_keys[0]))

/* What the caller gave explicitly, for the derived defaults and for `--mountpath` replacing the file's list. */
typedef struct {
	bool control_port;
	bool cli_mountpath;
	const char *where; /* "config file X" or "command line", for messages */
} load_state_t;

static const char *const sync_words[] = {
	[FT_SYNC_NONE] = "none",
	[FT_SYNC_DATA] = "data",
	[FT_SYNC_FULL] = "full",
};

void ft_config_defaults(ft_config_t *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->bind, sizeof(c->bind), "127.0.0.1");
	c->public_port = 51080;
	snprintf(c->public_host, sizeof(c->public_host), "127.0.0.1");
	c->control_port = 51081;
	snprintf(c->control_host, sizeof(c->control_host), "127.0.0.1");
	snprintf(c->state_dir, sizeof(c->state_dir), ".");
	c->log_level = FT_LOG_INFO;
	c->loop_threads = 0;
	c->worker_threads = 64;
	c->keepalive_ms = 2000;
	snprintf(c->etcd_prefix, sizeof(c->etcd_prefix), "/fasttier");
	c->lease_ttl_s = 3;
	c->sync = FT_SYNC_NONE;
	c->reserve_bytes = 64 << 20;
	c->mpu_expire_hours = 7 * 24;
	c->http_max_header_bytes = 16384;
	c->http_max_headers = 100;
	c->http_idle_timeout_ms = 60000;
	c->http_header_timeout_ms = 10000;
	c->http_body_timeout_ms = 30000;
	snprintf(c->s3_region, sizeof(c->s3_region), "us-east-1");
	c->lru_high_pct = 90;
	c->lru_low_pct = 75;
	c->lru_quota_bytes = 0;
	c->lru_interval_ms = 10000;
	c->hint_max_bytes = 32 << 20;
	c->hint_max_names = 1000000;
	c->hint_prefetch_inflight = 4;
	c->probe_interval_ms = 250;
	c->s3_relay_timeout_ms = 30000;
	c->job_expiry_s = 3600;
	c->open_file_cache = 1024;
	c->job_missing_grace_s = 120;
	c->restore_after_s = 300;
	c->shard_max_decoded_bytes = (int64_t)1 << 30;
	c->batch_max_buffered_bytes = (int64_t)4 << 30;
	c->token_ttl_max = 7 * 24 * 3600;
}

int ft_config_take_flag(int *argc, char **argv, const char *flag)
{
	int n = 0, j = 1;

	for (int i = 1; i < *argc; i++) {
		if (strcmp(argv[i], flag) == 0)
			n++;
		else
			argv[j++] = argv[i];
	}
	*argc = j;
	argv[j] = NULL;
	return n;
}

void ft_config_free(ft_config_t *c)
{
	for (int i = 0; i < c->n_mountpaths; i++) {
		free(c->mountpaths[i]);
		c->mountpaths[i] = NULL;
	}
	c->n_mountpaths = 0;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static const config_key_t *find_key(const char *name)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		if (strcmp(config_keys[i].name, name) == 0)
			return &config_keys[i];
	}
	return NULL;
}

/* Whole-string decimal integer; 0 or -1. */
static int parse_int64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (s[0] == '\0' || s[0] == ' ' || s[0] == '\t')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

static int add_mountpath(ft_config_t *c, const char *dir, const load_state_t *st, char *err, size_t errlen)
{
	if (dir[0] == '\0')
		return fail(err, errlen, "%s: key \"mountpaths\": empty directory", st->where);
	if (strlen(dir) >= FT_PATH_MAX)
		return fail(err, errlen, "%s: key \"mountpaths\": path longer than %d bytes", st->where,
			    FT_PATH_MAX - 1);
	for (int i = 0; i < c->n_mountpaths; i++) {
		if (strcmp(c->mountpaths[i], dir) == 0)
			return fail(err, errlen, "%s: key \"mountpaths\": \"%s\" given twice", st->where, dir);
	}
	if (c->n_mountpaths >= FT_MAX_MOUNTPATHS)
		return fail(err, errlen, "%s: key \"mountpaths\": more than %d mountpaths", st->where,
			    FT_MAX_MOUNTPATHS);
	char *copy = strdup(dir);
	if (copy == NULL)
		return fail(err, errlen, "out of memory");
	c->mountpaths[c->n_mountpaths++] = copy;
	return 0;
}

/* Whether s[0..n) is scheme://host... with a non-empty host, the scheme http or https. */
static bool url_ok(const char *s, size_t n)
{
	size_t p = n >= 7 && strncmp(s, "http://", 7) == 0 ? 7 : n >= 8 && strncmp(s, "https://", 8) == 0 ? 8 : 0;

	return p > 0 && p < n && s[p] != '/' && s[p] != ':' && memchr(s, ' ', n) == NULL && memchr(s, ',', n) == NULL;
}

/* KIND_URLS and KIND_HTTP_URL: every URL of v well formed (v may be empty). */
static int urls_check(const config_key_t *k, const char *v, load_state_t *st, char *err, size_t errlen)
{
	bool list = k->kind == KIND_URLS;

	for (const char *p = v; *p != '\0';) {
		size_t n = list ? strcspn(p, ",") : strlen(p);
		if (!url_ok(p, n))
			return fail(err, errlen, "%s: key \"%s\": %s, got \"%s\"", st->where, k->name,
				    list ? "must be http:// or https:// URLs, comma-separated"
					 : "must be one http:// or https:// URL",
				    v);
		p += n;
		if (*p == ',' && *++p == '\0')
			return fail(err, errlen, "%s: key \"%s\": ends in a comma", st->where, k->name);
	}
	return 0;
}

/* Applies one scalar value given as text (a flag, or a JSON value already type-checked). */
static int set_text(ft_config_t *c, const config_key_t *k, const char *v, load_state_t *st, char *err, size_t errlen)
{
	char *base = (char *)c;
	int64_t n;

	switch (k->kind) {
	case KIND_STR_NONEMPTY:
		if (v[0] == '\0')
			return fail(err, errlen, "%s: key \"%s\": must not be empty", st->where, k->name);
		/* fall through */
	case KIND_URLS:
	case KIND_HTTP_URL:
		if ((k->kind == KIND_URLS || k->kind == KIND_HTTP_URL) && urls_check(k, v, st, err, errlen) != 0)
			return -1;
		/* fall through */
	case KIND_STR:
		if (strlen(v) >= k->size)
			return fail(err, errlen, "%s: key \"%s\": longer than %zu bytes", st->where, k->name,
				    k->size - 1);
		memcpy(base + k->off, v, strlen(v) + 1);
		return 0;
	case KIND_INT:
	case KIND_INT64:
		if (parse_int64(v, &n) != 0 || n < k->min || n > k->max)
			return fail(err, errlen, "%s: key \"%s\": must be an integer in %lld..%lld, got \"%s\"",
				    st->where, k->name, (long long)k->min, (long long)k->max, v);
		if (k->kind == KIND_INT)
			*(int *)(base + k->off) = (int)n;
		else
			*(int64_t *)(base + k->off) = n;
		if (strcmp(k->name, "control_port") == 0)
			st->control_port = true;
		return 0;
	case KIND_LOG_LEVEL:
		if (ft_log_level_parse(v, &c->log_level) != 0)
			return fail(err, errlen, "%s: key \"log_level\": \"%s\" is not one of debug|info|warn|error",
				    st->where, v);
		return 0;
	case KIND_LOG_FORMAT:
		if (ft_log_format_parse(v, &c->log_format) != 0)
			return fail(err, errlen, "%s: key \"log_format\": \"%s\" is not one of text|json", st->where,
				    v);
		return 0;
	case KIND_SYNC:
		for (int i = FT_SYNC_NONE; i <= FT_SYNC_FULL; i++) {
			if (strcmp(v, sync_words[i]) == 0) {
				c->sync = (ft_sync_policy_t)i;
				return 0;
			}
		}
		return fail(err, errlen, "%s: key \"sync\": \"%s\" is not one of none|data|full", st->where, v);
	case KIND_BOOL:
		if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0)
			*(int *)(base + k->off) = 1;
		else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcmp(v, "no") == 0)
			*(int *)(base + k->off) = 0;
		else
			return fail(err, errlen, "%s: key \"%s\": \"%s\" is not one of true|false|1|0|yes|no",
				    st->where, k->name, v);
		return 0;
	case KIND_MOUNTPATHS:
		/* Command line only (the JSON array goes through set_json). */
		if (!st->cli_mountpath) {
			ft_config_free(c);
			st->cli_mountpath = true;
		}
		return add_mountpath(c, v, st, err, errlen);
	}
	return fail(err, errlen, "%s: key \"%s\": internal error", st->where, k->name);
}

/* Applies one JSON value after checking its type against the key's kind. */
static int set_json(ft_config_t *c, const config_key_t *k, json_t *v, load_state_t *st, char *err, size_t errlen)
{
	char num[32];
	size_t i;
	json_t *item;

	switch (k->kind) {
	case KIND_INT:
	case KIND_INT64:
		if (!json_is_integer(v))
			return fail(err, errlen, "%s: key \"%s\": must be an integer", st->where, k->name);
		snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		return set_text(c, k, num, st, err, errlen);
	case KIND_BOOL:
		if (!json_is_boolean(v))
			return fail(err, errlen, "%s: key \"%s\": must be true or false", st->where, k->name);
		return set_text(c, k, json_is_true(v) ? "true" : "false", st, err, errlen);
	case KIND_MOUNTPATHS:
		if (!json_is_array(v))
			return fail(err, errlen, "%s: key \"mountpaths\": must be an array of strings", st->where);
		ft_config_free(c);
		json_array_foreach(v, i, item) {
			if (!json_is_string(item))
				return fail(err, errlen, "%s: key \"mountpaths\": must be an array of strings",
					    st->where);
			if (add_mountpath(c, json_string_value(item), st, err, errlen) != 0)
				return -1;
		}
		return 0;
	default:
		if (!json_is_string(v))
			return fail(err, errlen, "%s: key \"%s\": must be a string", st->where, k->name);
		if (strlen(json_string_value(v)) != json_string_length(v))
			return fail(err, errlen, "%s: key \"%s\": contains a NUL byte", st->where, k->name);
		return set_text(c, k, json_string_value(v), st, err, errlen);
	}
}

static int load_file(ft_config_t *c, const char *path, load_state_t *st, char *err, size_t errlen)
{
	char where[FT_PATH_MAX + 16];
	json_error_t jerr;
	const char *key;
	json_t *root, *v;
	int rc = -1;

	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL && jerr.line < 1)
		return fail(err, errlen, "config file %s: %s", path, jerr.text);
	if (root == NULL)
		return fail(err, errlen, "config file %s: %s (line %d)", path, jerr.text, jerr.line);
	snprintf(where, sizeof(where), "config file %s", path);
	st->where = where;
	if (!json_is_object(root)) {
		fail(err, errlen, "%s: not a JSON object", where);
		goto out;
	}
	json_object_foreach(root, key, v) {
		const config_key_t *k = find_key(key);
		if (k == NULL) {
			fail(err, errlen, "%s: unknown key \"%s\"", where, key);
			goto out;
		}
		if (set_json(c, k, v, st, err, errlen) != 0)
			goto out;
	}
	rc = 0;
out:
	st->where = "command line";
	json_decref(root);
	return rc;
}

static bool is_bool_key(const char *name)
{
	const config_key_t *k = find_key(name);

	return k != NULL && k->kind == KIND_BOOL;
}

/*
 * Reads the flag at argv[*i] into name (with '-' turned into '_') and *value, and advances *i past
 * it. Returns 0, or -1 with a message.
 */
static int next_flag(int argc, char **argv, int *i, char *name, size_t namecap, const char **value, char *err,
		     size_t errlen)
{
	const char *arg = argv[*i];
	const char *eq;
	size_t len;

	if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
		return fail(err, errlen, "command line: unexpected argument \"%s\"", arg);
	arg += 2;
	eq = strchr(arg, '=');
	len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
	if (len >= namecap)
		return fail(err, errlen, "command line: unknown key \"--%.*s\"", (int)len, arg);
	for (size_t j = 0; j < len; j++)
		name[j] = arg[j] == '-' ? '_' : arg[j];
	name[len] = '\0';
	/* Known before its value is taken, so "--help FILE" does not read as a missing value. */
	if (strcmp(name, "config") != 0 && strcmp(name, "mountpath") != 0 && find_key(name) == NULL)
		return fail(err, errlen, "command line: unknown key \"--%s\"", name);
	if (eq != NULL) {
		*value = eq + 1;
	} else if (is_bool_key(name) && (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0)) {
		*value = "true"; /* a bare boolean flag: --insecure */
	} else {
		if (*i + 1 >= argc)
			return fail(err, errlen, "command line: key \"%s\" needs a value", name);
		*value = argv[++*i];
	}
	(*i)++;
	return 0;
}

/* Finds `--config FILE`; *path stays NULL when absent. */
static int find_config_flag(int argc, char **argv, const char **path, char *err, size_t errlen)
{
	char name[64];
	const char *value;

	*path = NULL;
	for (int i = 1; i < argc;) {
		if (next_flag(argc, argv, &i, name, sizeof(name), &value, err, errlen) != 0)
			return -1;
		if (strcmp(name, "config") != 0)
			continue;
		if (*path != NULL)
			return fail(err, errlen, "command line: key \"config\" given twice");
		if (value[0] == '\0')
			return fail(err, errlen, "command line: key \"config\": empty file name");
		*path = value;
	}
	return 0;
}

static int apply_flags(ft_config_t *c, int argc, char **argv, load_state_t *st, char *err, size_t errlen)
{
	char name[64];
	const char *value;

	for (int i = 1; i < argc;) {
		if (next_flag(argc, argv, &i, name, sizeof(name), &value, err, errlen) != 0)
			return -1;
		if (strcmp(name, "config") == 0)
			continue;
		if (strcmp(name, "mountpath") == 0)
			snprintf(name, sizeof(name), "mountpaths");
		if (set_text(c, find_key(name), value, st, err, errlen) != 0)
			return -1;
	}
	return 0;
}

/* Resolves the defaults that depend on other keys. */
static int derive(ft_config_t *c, const load_state_t *st, char *err, size_t errlen)
{
	if (!st->control_port) {
		if (c->public_port >= 65535)
			return fail(err, errlen,
				    "key \"control_port\": default public_port+1 is out of range; "
				    "set control_port");
		c->control_port = c->public_port + 1;
	}
	if (c->control_port == c->public_port)
		return fail(err, errlen, "key \"control_port\": equals public_port %d", c->public_port);
	if (c->lru_low_pct >= c->lru_high_pct)
		return fail(err, errlen, "key \"lru_low_pct\": %d must be below lru_high_pct %d", c->lru_low_pct,
			    c->lru_high_pct);
	if (c->public_host[0] == '\0')
		memcpy(c->public_host, c->bind, sizeof(c->public_host));
	if (c->control_host[0] == '\0')
		memcpy(c->control_host, c->public_host, sizeof(c->control_host));
	return 0;
}

/*
 * On entry c holds nothing to free. On failure c may hold partially applied values (including
 * mountpath strings): the caller still calls ft_config_free().
 */
int ft_config_load(ft_config_t *c, int argc, char **argv, char *err, size_t errlen)
{
	load_state_t st = {.where = "command line"};
	const char *file;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	ft_config_defaults(c);
	/* Derived keys start empty so that an explicit value can be told from the default. */
	c->public_host[0] = '\0';
	c->control_host[0] = '\0';
	if (find_config_flag(argc, argv, &file, err, errlen) != 0)
		return -1;
	if (file != NULL && load_file(c, file, &st, err, errlen) != 0)
		return -1;
	if (apply_flags(c, argc, argv, &st, err, errlen) != 0)
		return -1;
	return derive(c, &st, err, errlen);
}
