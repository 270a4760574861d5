/* SPDX-License-Identifier: Apache-2.0 */
/* ft object: ls, put and get (one file, or a directory tree on parallel workers), rm, cat. */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ft.h"

#define WORKERS_DEFAULT 8
#define WORKERS_MAX 64
#define PAGE 1000

int cli_object_split(const char *arg, cli_bucket_t *b, const char **name, bool need_name)
{
	const char *s = strstr(arg, "://"), *slash;
	char bucket[512];

	slash = strchr(s != NULL ? s + 3 : arg, '/');
	size_t n = slash != NULL ? (size_t)(slash - arg) : strlen(arg);
	if (n >= sizeof(bucket))
		return cli_fail(FT_EXIT_USAGE, "bad bucket in \"%s\"", arg), -1;
	memcpy(bucket, arg, n);
	bucket[n] = '\0';
	if (cli_bucket_parse(bucket, b) != 0)
		return -1;
	*name = slash != NULL ? slash + 1 : "";
	if (need_name && **name == '\0')
		return cli_fail(FT_EXIT_USAGE, "\"%s\" names no object (BUCKET/NAME)", arg), -1;
	return 0;
}

/* One page of the listing; the page's JSON (new reference) or NULL after printing the failure (*rc set). */
static json_t *list_page(const cli_bucket_t *b, const char *prefix, const char *token, int *rc)
{
	char path[8192], p[2048], t[4096];
	cli_resp_t r;
	json_t *j = NULL;

	cli_encode(prefix, p, sizeof(p), false);
	cli_encode(token, t, sizeof(t), false);
	snprintf(path, sizeof(path), "/v1/buckets/%s?provider=%s&pagesize=%d&prefix=%s&continuation_token=%s", b->name,
		 b->provider, PAGE, p, t);
	if (cli_call("GET", path, NULL, &r) != 0 || r.status != 200)
		*rc = cli_resp_fail(&r, "listing objects");
	else if ((j = cli_resp_json(&r)) == NULL)
		*rc = cli_fail(FT_EXIT_FAIL, "listing objects: the answer is not JSON");
	cli_resp_free(&r);
	return j;
}

/* Every entry under prefix (at most limit; 0 = all) into a new array; NULL after printing the failure. */
static json_t *list_all(const cli_bucket_t *b, const char *prefix, long limit, int *rc)
{
	json_t *all = json_array();
	char token[4096] = "";

	for (;;) {
		json_t *page = list_page(b, prefix, token, rc);
		if (page == NULL) {
			json_decref(all);
			return NULL;
		}
		json_array_extend(all, json_object_get(page, "entries"));
		const char *next = json_string_value(json_object_get(page, "continuation_token"));
		snprintf(token, sizeof(token), "%s", next != NULL ? next : "");
		json_decref(page);
		if (token[0] == '\0' || (limit > 0 && (long)json_array_size(all) >= limit))
			break;
	}
	while (limit > 0 && (long)json_array_size(all) > limit)
		json_array_remove(all, json_array_size(all) - 1);
	return all;
}

static int object_ls(ft_cli_t *c)
{
	cli_bucket_t b;
	const char *name;
	int rc = FT_EXIT_OK;
	long limit = cli_opt_int(c, "limit", 0, 0, 100000000);

	if (c->n_args != 3)
		return cli_fail(FT_EXIT_USAGE, "object ls needs one BUCKET (ft object ls --help)");
	if (limit < 0 || cli_object_split(c->args[2], &b, &name, false) != 0)
		return FT_EXIT_USAGE;
	const char *prefix = cli_opt(c, "prefix") != NULL ? cli_opt(c, "prefix") : name;
	json_t *all = list_all(&b, prefix, limit, &rc);
	if (all == NULL)
		return rc;
	if (c->json) {
		cli_print_json(all);
	} else {
		static const char *const head[] = {"NAME", "SIZE", "VERSION"};
		cli_table_t *t = cli_table_new(3, head);
		size_t i;
		json_t *e;
		json_array_foreach(all, i, e) {
			char sz[32];
			const char *v = json_string_value(json_object_get(e, "version"));
			const char *row[] = {json_string_value(json_object_get(e, "name")),
					     cli_size(json_integer_value(json_object_get(e, "size")), sz, sizeof(sz)),
					     v != NULL ? v
						       : (json_is_true(json_object_get(e, "cached")) ? "cached" : "-")};
			cli_table_row(t, row);
		}
		cli_table_print(t, stdout);
	}
	json_decref(all);
	return rc;
}

/* ---- transfers on parallel workers ---- */

typedef struct {
	char *local; /* path on this machine */
	char *name;  /* object name */
	int64_t size;
} item_t;

typedef struct {
	cli_bucket_t bucket;
	bool put;
	item_t *items;
	size_t n, cap, next;
	pthread_mutex_t lock;
	int64_t bytes, done, failed, total_bytes;
	int rc; /* the first failure's exit code */
} batch_t;

static int batch_add(batch_t *bt, const char *local, const char *name, int64_t size)
{
	if (bt->n == bt->cap) {
		size_t cap = bt->cap ? bt->cap * 2 : 64;
		item_t *p = realloc(bt->items, cap * sizeof(*p));
		if (p == NULL)
			return -1;
		bt->items = p;
		bt->cap = cap;
	}
	bt->items[bt->n].local = strdup(local);
	bt->items[bt->n].name = strdup(name);
	bt->items[bt->n].size = size;
	bt->total_bytes += size;
	bt->n++;
	return 0;
}

/* Makes the parent directories of path. */
static void mkparents(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
}

/* One item; 0 or an exit code (printed). */
static int transfer(batch_t *bt, const item_t *it)
{
	char path[8192];
	cli_resp_t r;
	FILE *f;
	int rc = FT_EXIT_OK;

	cli_obj_path(path, sizeof(path), &bt->bucket, it->name);
	if (bt->put) {
		f = fopen(it->local, "rb");
		if (f == NULL)
			return cli_fail(FT_EXIT_FAIL, "%s: %s", it->local, strerror(errno));
		if (cli_put_from(path, f, it->size, &bt->bytes, &r) != 0 || r.status != 200)
			rc = cli_resp_fail(&r, it->name);
		fclose(f);
	} else {
		char tmp[8192];
		snprintf(tmp, sizeof(tmp), "%s.ft-part", it->local);
		mkparents(tmp);
		f = fopen(tmp, "wb");
		if (f == NULL)
			return cli_fail(FT_EXIT_FAIL, "%s: %s", tmp, strerror(errno));
		if (cli_get_to(path, f, &bt->bytes, &r) != 0 || r.status != 200)
			rc = cli_resp_fail(&r, it->name);
		if (fclose(f) != 0 && rc == FT_EXIT_OK)
			rc = cli_fail(FT_EXIT_FAIL, "%s: %s", tmp, strerror(errno));
		if (rc == FT_EXIT_OK && rename(tmp, it->local) != 0)
			rc = cli_fail(FT_EXIT_FAIL, "%s: %s", it->local, strerror(errno));
		if (rc != FT_EXIT_OK)
			unlink(tmp);
	}
	cli_resp_free(&r);
	return rc;
}

static void *worker(void *arg)
{
	batch_t *bt = arg;

	for (;;) {
		pthread_mutex_lock(&bt->lock);
		size_t i = bt->next < bt->n ? bt->next++ : bt->n;
		pthread_mutex_unlock(&bt->lock);
		if (i == bt->n)
			return NULL;
		int rc = transfer(bt, &bt->items[i]);
		pthread_mutex_lock(&bt->lock);
		if (rc != FT_EXIT_OK) {
			bt->failed++;
			if (bt->rc == FT_EXIT_OK || rc == FT_EXIT_CONNECT)
				bt->rc = rc;
		}
		bt->done++;
		pthread_mutex_unlock(&bt->lock);
	}
}

/* Runs bt on workers with a progress display; the exit code. */
static int batch_run(ft_cli_t *c, batch_t *bt, const char *label)
{
	long workers = cli_opt_int(c, "workers", WORKERS_DEFAULT, 1, WORKERS_MAX);
	pthread_t th[WORKERS_MAX];
	cli_progress_t pg;
	int started = 0;

	if (workers < 0)
		return FT_EXIT_USAGE;
	if ((size_t)workers > bt->n)
		workers = bt->n > 0 ? (long)bt->n : 1;
	cli_progress_init(&pg, c);
	for (long i = 0; i < workers; i++)
		if (pthread_create(&th[started], NULL, worker, bt) == 0)
			started++;
	if (started == 0)
		worker(bt);
	for (;;) {
		pthread_mutex_lock(&bt->lock);
		int64_t done = bt->done;
		pthread_mutex_unlock(&bt->lock);
		int64_t bytes = __atomic_load_n(&bt->bytes, __ATOMIC_RELAXED);
		if (done == (int64_t)bt->n)
			break;
		cli_progress_show(&pg, label, done, (int64_t)bt->n, bytes, -1, -1, false);
		usleep(200 * 1000);
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	cli_progress_show(&pg, label, bt->done, (int64_t)bt->n, bt->bytes, -1, 0, true);
	if (c->json)
		printf("{\"objects\": %lld, \"bytes\": %lld, \"errors\": %lld}\n", (long long)(bt->done - bt->failed),
		       (long long)bt->bytes, (long long)bt->failed);
	else
		printf("%s: %lld objects, %lld bytes, %lld errors\n", label, (long long)(bt->done - bt->failed),
		       (long long)bt->bytes, (long long)bt->failed);
	return bt->rc;
}

static void batch_free(batch_t *bt)
{
	for (size_t i = 0; i < bt->n; i++) {
		free(bt->items[i].local);
		free(bt->items[i].name);
	}
	free(bt->items);
	pthread_mutex_destroy(&bt->lock);
}

static batch_t *walk_batch; /* nftw has no argument */
static const char *walk_root, *walk_prefix;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	char name[8192];

	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	const char *rel = path + strlen(walk_root);
	while (*rel == '/')
		rel++;
	snprintf(name, sizeof(name), "%s%s%s", walk_prefix,
		 walk_prefix[0] && walk_prefix[strlen(walk_prefix) - 1] != '/' ? "/" : "", rel);
	return batch_add(walk_batch, path, name, st->st_size);
}

static int object_put(ft_cli_t *c)
{
	batch_t bt = {.put = true, .lock = PTHREAD_MUTEX_INITIALIZER};
	const char *name;
	struct stat st;
	int rc;

	if (c->n_args != 4)
		return cli_fail(FT_EXIT_USAGE, "object put needs FILE|DIR and BUCKET[/NAME] (ft object put --help)");
	if (cli_object_split(c->args[3], &bt.bucket, &name, false) != 0)
		return FT_EXIT_USAGE;
	if (stat(c->args[2], &st) != 0)
		return cli_fail(FT_EXIT_USAGE, "%s: %s", c->args[2], strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		if (!cli_flag(c, "recursive"))
			return cli_fail(FT_EXIT_USAGE, "%s is a directory: put it with -r", c->args[2]);
		walk_batch = &bt;
		walk_root = c->args[2];
		walk_prefix = name;
		if (nftw(c->args[2], walk_one, 32, FTW_PHYS) != 0)
			return cli_fail(FT_EXIT_FAIL, "walking %s failed", c->args[2]);
	} else {
		const char *base = strrchr(c->args[2], '/');
		char full[8192];
		if (*name == '\0' || name[strlen(name) - 1] == '/') {
			snprintf(full, sizeof(full), "%s%s", name, base != NULL ? base + 1 : c->args[2]);
			name = full;
		}
		batch_add(&bt, c->args[2], name, st.st_size);
	}
	rc = batch_run(c, &bt, "put");
	batch_free(&bt);
	return rc;
}

static int object_get(ft_cli_t *c)
{
	batch_t bt = {.lock = PTHREAD_MUTEX_INITIALIZER};
	const char *name;
	int rc = FT_EXIT_OK;

	if (c->n_args < 3 || c->n_args > 4)
		return cli_fail(FT_EXIT_USAGE,
				"object get needs BUCKET/NAME [FILE] or BUCKET DIR -r (ft object get --help)");
	if (cli_object_split(c->args[2], &bt.bucket, &name, !cli_flag(c, "recursive")) != 0)
		return FT_EXIT_USAGE;
	if (cli_flag(c, "recursive")) {
		const char *dir = c->n_args == 4 ? c->args[3] : ".";
		const char *prefix = cli_opt(c, "prefix") != NULL ? cli_opt(c, "prefix") : name;
		json_t *all = list_all(&bt.bucket, prefix, 0, &rc);
		size_t i;
		json_t *e;
		char local[8192];
		if (all == NULL)
			return rc;
		json_array_foreach(all, i, e) {
			const char *n = json_string_value(json_object_get(e, "name"));
			snprintf(local, sizeof(local), "%s/%s", dir, n);
			batch_add(&bt, local, n, json_integer_value(json_object_get(e, "size")));
		}
		json_decref(all);
		rc = batch_run(c, &bt, "get");
		batch_free(&bt);
		return rc;
	}
	const char *out = c->n_args == 4 ? c->args[3] : (strrchr(name, '/') ? strrchr(name, '/') + 1 : name);
	char path[8192];
	cli_resp_t r;
	cli_obj_path(path, sizeof(path), &bt.bucket, name);
	if (strcmp(out, "-") == 0) {
		if (cli_get_to(path, stdout, NULL, &r) != 0 || r.status != 200)
			rc = cli_resp_fail(&r, name);
		cli_resp_free(&r);
		return rc;
	}
	batch_add(&bt, out, name, -1);
	rc = batch_run(c, &bt, "get");
	batch_free(&bt);
	return rc;
}

static int object_rm(ft_cli_t *c)
{
	int rc = FT_EXIT_OK;

	if (c->n_args < 3)
		return cli_fail(FT_EXIT_USAGE, "object rm needs BUCKET/NAME... (ft object rm --help)");
	for (int i = 2; i < c->n_args; i++) {
		cli_bucket_t b;
		const char *name;
		char path[8192];
		cli_resp_t r;
		if (cli_object_split(c->args[i], &b, &name, true) != 0)
			return FT_EXIT_USAGE;
		cli_obj_path(path, sizeof(path), &b, name);
		if (cli_call("DELETE", path, NULL, &r) != 0 || r.status != 200)
			rc = cli_resp_fail(&r, c->args[i]);
		else if (!c->json)
			printf("removed %s\n", c->args[i]);
		cli_resp_free(&r);
	}
	return rc;
}

static int object_cat(ft_cli_t *c)
{
	cli_bucket_t b;
	const char *name;
	char path[8192];
	cli_resp_t r;
	int rc = FT_EXIT_OK;

	if (c->n_args != 3)
		return cli_fail(FT_EXIT_USAGE, "object cat needs BUCKET/NAME");
	if (cli_object_split(c->args[2], &b, &name, true) != 0)
		return FT_EXIT_USAGE;
	cli_obj_path(path, sizeof(path), &b, name);
	if (cli_opt(c, "etl") != NULL) { /* through a transformer (docs/etl.md) */
		size_t n = strlen(path);
		snprintf(path + n, sizeof(path) - n, "&etl=");
		cli_encode(cli_opt(c, "etl"), path + n + 5, sizeof(path) - n - 5, false);
	}
	if (cli_get_to(path, stdout, NULL, &r) != 0 || r.status != 200)
		rc = cli_resp_fail(&r, c->args[2]);
	fflush(stdout);
	cli_resp_free(&r);
	return rc;
}

int cli_object(ft_cli_t *c)
{
	const char *verb = c->n_args > 1 ? c->args[1] : "";

	if (strcmp(verb, "ls") == 0)
		return object_ls(c);
	if (strcmp(verb, "put") == 0)
		return object_put(c);
	if (strcmp(verb, "get") == 0)
		return object_get(c);
	if (strcmp(verb, "rm") == 0)
		return object_rm(c);
	if (strcmp(verb, "cat") == 0)
		return object_cat(c);
	if (strcmp(verb, "get-batch") == 0)
		return cli_object_get_batch(c);
	return cli_fail(FT_EXIT_USAGE, "object needs ls, put, get, get-batch, rm or cat (ft object --help)");
}
