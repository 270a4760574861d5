/* SPDX-License-Identifier: Apache-2.0 */
/* Target janitor: one background thread deleting retired bucket trees ("rm.*" in every .work). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "target.h"

/*
 * DESIGN
 * Retiring a bucket is a rename into .work (instant, atomic); deleting its files can take long,
 * so it happens here, off the request and control threads. The janitor keeps no queue: on each
 * kick it scans the .work directories for "rm." entries, so nothing is lost or leaked when it is
 * stopped midway (leftovers are removed at the next start with the rest of .work).
 */

struct tgt_janitor {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned kicks; /* bumped by tgt_janitor_kick, under lock */
	atomic_int stop;
};

static void sweep_mountpath(const tgt_mountpath_t *mp, const atomic_int *stop)
{
	int fd = openat(mp->work_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *de;
	while (!atomic_load(stop) && (de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "rm.", 3) != 0)
			continue;
		int rc = tgt_remove_tree(mp->work_fd, de->d_name, stop);
		if (rc != 0 && rc != -ECANCELED)
			ft_warn("mountpath %s: cannot remove retired %s: %s", mp->path, de->d_name, strerror(-rc));
	}
	closedir(d);
}

static void *janitor_main(void *arg)
{
	tgt_t *t = arg;
	tgt_janitor_t *j = t->janitor;
	unsigned seen = 0;

	pthread_mutex_lock(&j->lock);
	while (!atomic_load(&j->stop)) {
		if (j->kicks == seen) {
			pthread_cond_wait(&j->cond, &j->lock);
			continue;
		}
		seen = j->kicks;
		pthread_mutex_unlock(&j->lock);
		for (int i = 0; i < t->n_mountpaths && !atomic_load(&j->stop); i++)
			sweep_mountpath(&t->mountpaths[i], &j->stop);
		pthread_mutex_lock(&j->lock);
	}
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

int tgt_janitor_start(tgt_t *t)
{
	tgt_janitor_t *j = calloc(1, sizeof(*j));
	if (!j)
		return -1;
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->cond, NULL);
	atomic_init(&j->stop, 0);
	t->janitor = j;
	if (pthread_create(&j->thread, NULL, janitor_main, t) != 0) {
		pthread_cond_destroy(&j->cond);
		pthread_mutex_destroy(&j->lock);
		free(j);
		t->janitor = NULL;
		return -1;
	}
	return 0;
}

void tgt_janitor_kick(tgt_t *t)
{
	tgt_janitor_t *j = t->janitor;
	if (!j)
		return;
	pthread_mutex_lock(&j->lock);
	j->kicks++;
	pthread_cond_signal(&j->cond);
	pthread_mutex_unlock(&j->lock);
}

void tgt_janitor_stop(tgt_t *t)
{
	tgt_janitor_t *j = t->janitor;
	if (!j)
		return;
	pthread_mutex_lock(&j->lock);
	atomic_store(&j->stop, 1);
	pthread_cond_signal(&j->cond);
	pthread_mutex_unlock(&j->lock);
	pthread_join(j->thread, NULL);
	pthread_cond_destroy(&j->cond);
	pthread_mutex_destroy(&j->lock);
	free(j);
	t->janitor = NULL;
}
