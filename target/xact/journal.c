/* SPDX-License-Identifier: Apache-2.0 */
/* Job journals: "<state_dir>/jobs/<id>.json" (the message) and "<id>.done" (one line per object done). */
#include "xact/journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/config.h"
#include "base/log.h"
#include "base/names.h"

/*
 * DESIGN
 * The message is written once, whole, before the job starts; every object done appends
 * "<bytes> <percent-encoded name>\n" with one write(2) on an O_APPEND descriptor, so lines never
 * interleave and a crash loses at most the page cache's last lines (those objects are done again).
 * A torn last line is ignored when read back. A job that ends (finished, failed or aborted by a
 * user) removes its journal; a target that stops keeps it, and at the next start jobs.c resumes
 * the job from it.
 */

#define JOURNAL_DIR "jobs"
/*
 * The owner's only: a download's message keeps its source URLs whole (a resumed job needs them),
 * presigned signatures, SAS tokens and user:password@ included. fchmod covers a file left by a
 * crash or an older version with another mode.
 */
#define JOURNAL_MODE 0600
#define JOURNAL_DIR_MODE 0700

struct tgt_journal {
	pthread_mutex_t lock;
	int fd;
	char msg_path[FT_PATH_MAX + 80];
	char done_path[FT_PATH_MAX + 80];
};

static int paths(tgt_journal_t *jl, const char *state_dir, const char *id)
{
	int a = snprintf(jl->msg_path, sizeof(jl->msg_path), "%s/%s/%s.json", state_dir, JOURNAL_DIR, id);
	int b = snprintf(jl->done_path, sizeof(jl->done_path), "%s/%s/%s.done", state_dir, JOURNAL_DIR, id);

	return a < 0 || b < 0 || (size_t)a >= sizeof(jl->msg_path) || (size_t)b >= sizeof(jl->done_path) ? -1 : 0;
}

static tgt_journal_t *open_done(tgt_journal_t *jl)
{
	jl->fd = open(jl->done_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, JOURNAL_MODE);
	if (jl->fd < 0 || fchmod(jl->fd, JOURNAL_MODE) != 0) {
		int err = errno;
		if (jl->fd >= 0)
			close(jl->fd);
		ft_warn("job journal %s: %s", jl->done_path, strerror(err));
		free(jl);
		return NULL;
	}
	pthread_mutex_init(&jl->lock, NULL);
	return jl;
}

tgt_journal_t *tgt_journal_create(const char *state_dir, const char *id, const json_t *msg)
{
	tgt_journal_t *jl = calloc(1, sizeof(*jl));
	char dir[FT_PATH_MAX + 16], tmp[FT_PATH_MAX + 96];
	int fd = -1;

	if (jl == NULL || paths(jl, state_dir, id) != 0)
		goto fail;
	snprintf(dir, sizeof(dir), "%s/%s", state_dir, JOURNAL_DIR);
	if ((mkdir(dir, JOURNAL_DIR_MODE) != 0 && errno != EEXIST) || chmod(dir, JOURNAL_DIR_MODE) != 0)
		goto fail;
	snprintf(tmp, sizeof(tmp), "%s.tmp", jl->msg_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, JOURNAL_MODE);
	if (fd < 0 || fchmod(fd, JOURNAL_MODE) != 0 || json_dumpfd(msg, fd, JSON_COMPACT) != 0 || fsync(fd) != 0 ||
	    close(fd) != 0) {
		if (fd >= 0)
			close(fd);
		unlink(tmp);
		goto fail;
	}
	if (rename(tmp, jl->msg_path) != 0) {
		unlink(tmp);
		goto fail;
	}
	unlink(jl->done_path); /* a stale one of an earlier job of this id */
	return open_done(jl);
fail:
	ft_warn("job %s: cannot write its journal under %s/%s: %s", id, state_dir, JOURNAL_DIR, strerror(errno));
	free(jl);
	return NULL;
}

tgt_journal_t *tgt_journal_reopen(const char *state_dir, const char *id)
{
	tgt_journal_t *jl = calloc(1, sizeof(*jl));

	if (jl == NULL || paths(jl, state_dir, id) != 0) {
		free(jl);
		return NULL;
	}
	if (chmod(jl->msg_path, JOURNAL_MODE) != 0 && errno != ENOENT) /* one an older version left readable */
		ft_warn("job journal %s: %s", jl->msg_path, strerror(errno));
	return open_done(jl);
}

void tgt_journal_done(tgt_journal_t *jl, const char *name, int64_t bytes)
{
	size_t n = strlen(name);
	char *line = malloc(3 * n + 32);

	if (jl == NULL || line == NULL) {
		free(line);
		return;
	}
	int k = snprintf(line, 32, "%lld ", (long long)bytes);
	size_t len = (size_t)k + ft_pct_encode(name, n, line + k, 0);
	line[len++] = '\n';
	pthread_mutex_lock(&jl->lock);
	if (write(jl->fd, line, len) != (ssize_t)len)
		ft_warn("job journal %s: short write", jl->done_path);
	pthread_mutex_unlock(&jl->lock);
	free(line);
}

void tgt_journal_close(tgt_journal_t *jl, int remove)
{
	if (jl == NULL)
		return;
	close(jl->fd);
	if (remove) {
		unlink(jl->msg_path);
		unlink(jl->done_path);
	}
	pthread_mutex_destroy(&jl->lock);
	free(jl);
}

/* The done lines of path into a new object name -> bytes. */
static json_t *read_done(const char *path)
{
	json_t *done = json_object();
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (f == NULL)
		return done;
	while ((n = getline(&line, &cap, f)) > 0) {
		char *sp = strchr(line, ' ');
		if (line[n - 1] != '\n' || sp == NULL)
			break; /* torn last line */
		line[n - 1] = '\0';
		char *name = malloc(strlen(sp + 1) + 1);
		long len = name != NULL ? ft_pct_decode(sp + 1, strlen(sp + 1), name, FT_PCT_STRICT) : -1;
		if (len > 0)
			json_object_set_new(done, name, json_integer(strtoll(line, NULL, 10)));
		free(name);
	}
	free(line);
	fclose(f);
	return done;
}

int tgt_journal_load(const char *state_dir, void (*fn)(void *arg, const json_t *msg, const json_t *done), void *arg)
{
	char dir[FT_PATH_MAX + 16], path[FT_PATH_MAX + 400];
	DIR *d;
	struct dirent *e;
	int found = 0;

	snprintf(dir, sizeof(dir), "%s/%s", state_dir, JOURNAL_DIR);
	d = opendir(dir);
	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		if (n <= 5 || strcmp(e->d_name + n - 5, ".json") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		json_t *msg = json_load_file(path, 0, NULL);
		snprintf(path + strlen(path) - 5, 6, ".done");
		if (!json_is_object(msg)) {
			ft_warn("job journal %s/%s cannot be read: removed", dir, e->d_name);
			unlinkat(dirfd(d), e->d_name, 0);
			unlink(path);
			json_decref(msg);
			continue;
		}
		json_t *done = read_done(path);
		fn(arg, msg, done);
		json_decref(done);
		json_decref(msg);
		found++;
	}
	closedir(d);
	return found;
}
