/* SPDX-License-Identifier: Apache-2.0 */
/* Publishing an object version: the next version number, the "bucket still exists" check, the rename into place. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/bmd.h"
#include "core/keymap.h"
#include "core/lom.h"
#include "core/mountpath.h"
#include "core/namelock.h"
#include "core/publish.h"

#define PUBLISH_ATTEMPTS 4 /* a concurrent DELETE may prune the parent between mkdir and rename */

void tgt_next_version(const tgt_obj_t *o, char *out, size_t cap)
{
	unsigned long long v = 0;
	ft_lom_t old;
	int fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0) {
		if (ft_lom_fget(fd, &old) == 0) {
			char *end = NULL;
			errno = 0;
			v = strtoull(old.version, &end, 10);
			if (errno != 0 || end == old.version || *end != '\0')
				v = 0;
		}
		close(fd);
	}
	snprintf(out, cap, "%llu", v + 1);
}

int tgt_bucket_alive(const tgt_obj_t *o)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b = bmd ? ft_bmd_find(bmd, o->provider, o->bucket) : NULL;
	int alive = b && b->created_ns == o->bucket_created;
	ft_bmd_put(bmd);
	return alive;
}

/*
 * A name in its hashed file carries the name (core/keymap.h), set before the rename. A file there
 * that names another object (two names with one SHA-256) is never replaced: -EEXIST; a directory
 * there (made by hand) is -EISDIR. 0 or -errno.
 */
static int name_xattr(const tgt_obj_t *o, const char *work, ft_sync_policy_t sync)
{
	int rc, fd;

	if (o->obj == NULL || !o->keyed)
		return 0;
	fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		struct stat st;
		bool dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
		bool other = !dir && !tgt_key_holds(fd, o->obj, o->obj_len);
		close(fd);
		if (dir)
			return -EISDIR;
		if (other) {
			ft_warn("object %s/%s: %s holds another name: not replaced", o->bucket, o->obj, o->rel);
			return -EEXIST;
		}
	}
	fd = openat(o->mp->work_fd, work, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = tgt_key_fset(fd, o->obj, o->obj_len);
	if (rc == 0 && sync == FT_SYNC_FULL && fsync(fd) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* Renames work over o->rel (parents created). 0 or -errno; work[0] cleared once renamed. */
static int rename_into(const tgt_obj_t *o, char *work, ft_sync_policy_t sync)
{
	const tgt_mountpath_t *mp = o->mp;
	int rc = -ENOENT;

	for (int attempt = 0; attempt < PUBLISH_ATTEMPTS && rc == -ENOENT; attempt++) {
		const char *leaf = NULL;
		int dfd = tgt_parent_open(mp, o->rel, &leaf);
		if (dfd < 0) {
			rc = dfd;
			continue;
		}
		rc = renameat(mp->work_fd, work, dfd, leaf) == 0 ? 0 : -errno;
		/* An empty directory left at the name (not pruned yet) is no object: replace it. */
		if (rc == -EISDIR && unlinkat(dfd, leaf, AT_REMOVEDIR) == 0)
			rc = renameat(mp->work_fd, work, dfd, leaf) == 0 ? 0 : -errno;
		if (rc == 0) {
			work[0] = '\0';
			if (sync == FT_SYNC_FULL && fsync(dfd) != 0)
				ft_warn("object %s: directory fsync failed: %s", o->rel, strerror(errno));
		}
		close(dfd);
	}
	return rc;
}

void tgt_publish_drop_other(const tgt_obj_t *o)
{
	char other[TGT_REL_MAX];
	int rc;

	if (o->obj == NULL || (o->keyed && tgt_key_hashed(o->obj, o->obj_len)))
		return;
	if (o->keyed)
		rc = tgt_rel_path(other, sizeof(other), o->provider, o->bucket, o->obj);
	else
		rc = tgt_obj_rel_hashed(o, other, sizeof(other));
	if (rc == 0 && unlinkat(o->mp->root_fd, other, 0) == 0)
		tgt_parent_prune(o->mp, other);
}

int tgt_publish_rename(tgt_obj_t *o, char *work, ft_sync_policy_t sync)
{
	int rc = name_xattr(o, work, sync);

	if (rc != 0)
		return rc;
	rc = rename_into(o, work, sync);
	/*
	 * The path is taken: a component is another object ("a" for "a/b") or the name is a directory
	 * of others ("a/b" stored before "a"). The name goes to its hashed file (core/keymap.h).
	 */
	if ((rc == -ENOTDIR || rc == -EISDIR || rc == -ENOTEMPTY) && !o->keyed && o->obj != NULL) {
		if (tgt_obj_key(o) != 0)
			return rc;
		rc = name_xattr(o, work, sync);
		if (rc == 0)
			rc = rename_into(o, work, sync);
	}
	if (rc == 0)
		tgt_publish_drop_other(o);
	return rc;
}

int tgt_publish(tgt_obj_t *o, char *work, ft_sync_policy_t sync)
{
	tgt_publish_lock_shared(o->t);
	int rc = tgt_bucket_alive(o) ? tgt_publish_rename(o, work, sync) : -ESTALE;
	tgt_publish_unlock(o->t);
	return rc;
}
