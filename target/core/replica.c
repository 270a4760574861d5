/* SPDX-License-Identifier: Apache-2.0 */
/* Replicas of an object on its owner (main copy and mirror copies): placement, checks, writes, repair, integrity counters. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fdio.h"
#include "base/log.h"
#include "cluster/hrw.h"
#include "core/fcache.h"
#include "core/keymap.h"
#include "core/mountpath.h"
#include "core/publish.h"
#include "core/replica.h"

/*
 * DESIGN
 * Placement: the copies of an object go to the mountpaths that follow its main copy's mountpath
 * in HRW order of its name, so every reader computes the same places without any index. A
 * target with fewer mountpaths than mirror.copies keeps one replica per mountpath (it says so in
 * its log once); the PUT still succeeds (docs/data-protection.md).
 * Writing: a copy is made like a PUT: a work file in that mountpath's .work, filled with
 * copy_file_range from the published main copy (read/write where the kernel cannot), the same
 * LOM xattr, synced per the sync policy, then renamed to "<mp>/.copies/<rel>", under the publish lock
 * shared with the "bucket still exists" check so that no copy lands in a retired bucket. So a
 * copy, like an object, is either absent or whole.
 * A copy's directories are made with the helpers of mountpath.c on a view of the mountpath
 * whose root is its .copies directory (work_fd shared).
 *
 * OWNERSHIP
 * Every function closes what it opens; tgt_replica_open hands its fd to the caller on success.
 */

#define COPY_CHUNK (1u << 20) /* read/write fallback and checksum buffer */
#define COPY_REL_MAX (sizeof(TGT_COPIES_DIR) + TGT_REL_MAX)

static const char *const state_names[] = {
	[TGT_REPLICA_OK] = "good",
	[TGT_REPLICA_ABSENT] = "missing",
	[TGT_REPLICA_NO_META] = "metadata missing",
	[TGT_REPLICA_BAD_META] = "metadata corrupt",
	[TGT_REPLICA_BAD_SIZE] = "size differs from its metadata",
	[TGT_REPLICA_BAD_CKSUM] = "checksum mismatch",
	[TGT_REPLICA_STALE] = "older version than the main copy",
	[TGT_REPLICA_IO] = "I/O error",
};

_Static_assert(TGT_INTEGRITY_KINDS <= TGT_INTEGRITY_SLOTS, "tgt_t.integrity is too small");

const char *tgt_replica_state_name(tgt_replica_state_t s)
{
	return (int)s >= 0 && (size_t)s < sizeof(state_names) / sizeof(state_names[0]) ? state_names[s] : "?";
}

void tgt_integrity_count(tgt_t *t, tgt_integrity_kind_t kind)
{
	atomic_fetch_add(&t->integrity[kind], 1);
}

json_t *tgt_integrity_json(tgt_t *t)
{
	return json_pack("{s:I, s:I, s:I}", "damaged_replicas",
			 (json_int_t)atomic_load(&t->integrity[TGT_INTEGRITY_DAMAGED]), "repaired_replicas",
			 (json_int_t)atomic_load(&t->integrity[TGT_INTEGRITY_REPAIRED]), "unrepairable_objects",
			 (json_int_t)atomic_load(&t->integrity[TGT_INTEGRITY_LOST]));
}

int tgt_mirror_replicas(const tgt_obj_t *o, tgt_replica_t out[FT_MAX_MOUNTPATHS])
{
	const tgt_t *t = o->t;
	int main_index = (int)(o->mp - t->mountpaths);
	int want = o->mirror_copies > 1 ? o->mirror_copies : 1, n = 1;

	out[0] = (tgt_replica_t){.mp_index = main_index, .copy = false};
	if (want == 1 || t->n_mountpaths < 2)
		return 1;
	/* HRW order: the best of the mountpaths not taken yet, until enough are taken (n <= 16). */
	uint64_t h = o->hash;
	bool taken[FT_MAX_MOUNTPATHS] = {false};
	taken[main_index] = true;
	while (n < want) {
		uint64_t digests[FT_MAX_MOUNTPATHS];
		int index[FT_MAX_MOUNTPATHS], left = 0;
		for (int i = 0; i < t->n_mountpaths; i++) {
			if (!taken[i] && tgt_mountpath_slot_state(t, i) == 0) { /* active ones only */
				digests[left] = t->mountpath_digests[i];
				index[left++] = i;
			}
		}
		if (left == 0)
			break;
		int k = index[ft_hrw_pick(h, digests, left)];
		taken[k] = true;
		out[n++] = (tgt_replica_t){.mp_index = k, .copy = true};
	}
	if (n < want && atomic_exchange(&o->t->warned_few_mountpaths, 1) == 0)
		ft_warn("bucket %s/%s wants %d copies; this target has %d mountpaths and keeps %d (warned once)",
			o->provider, o->bucket, want, t->n_mountpaths, n);
	return n;
}

/* rp's path relative to its mountpath root. */
static void replica_rel(const tgt_obj_t *o, const tgt_replica_t *rp, char *buf, size_t cap)
{
	if (rp->copy)
		snprintf(buf, cap, "%s/%s", TGT_COPIES_DIR, o->rel);
	else
		snprintf(buf, cap, "%s", o->rel);
}

/*
 * The other place of a copy of o's name below a copies directory (without the TGT_COPIES_DIR
 * prefix): its hashed path when o->rel is the name's path, its path when o->rel is hashed because
 * the main copy's path was taken. A copies directory on another mountpath holds other names'
 * copies, so a copy may sit in the other place than its main copy (core/keymap.h). *keyed tells
 * which. 0, or -1 when the name has one place only.
 */
static int copy_rel_other(const tgt_obj_t *o, char *buf, size_t cap, bool *keyed)
{
	if (o->obj == NULL)
		return -1;
	*keyed = !o->keyed;
	if (!o->keyed)
		return tgt_obj_rel_hashed(o, buf, cap);
	if (tgt_key_hashed(o->obj, o->obj_len))
		return -1;
	return tgt_rel_path(buf, cap, o->provider, o->bucket, o->obj);
}

/* Opens rel on mp and stats it: fd (*st set), or -1 with errno. */
static int open_stat(const tgt_mountpath_t *mp, const char *rel, struct stat *st)
{
	int fd = openat(mp->root_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd >= 0 && fstat(fd, st) != 0) {
		int e = errno;
		close(fd);
		errno = e == ENOENT ? EIO : e;
		return -1;
	}
	return fd;
}

static const tgt_mountpath_t *replica_mp(const tgt_obj_t *o, const tgt_replica_t *rp)
{
	return rp->copy ? &o->t->mountpaths[rp->mp_index] : o->mp;
}

/* Checksum of fd's content against lom's: OK, BAD_CKSUM or IO. *size (may be NULL) adds the bytes read. */
static tgt_replica_state_t replica_verify(int fd, const ft_lom_t *lom, int64_t *size)
{
	ft_cksum_t ck;
	char hex[FT_CKSUM_HEX_MAX];
	uint64_t off = 0;

	if (lom->cksum_type == FT_CKSUM_NONE || lom->cksum[0] == '\0')
		return TGT_REPLICA_OK;
	char *buf = malloc(COPY_CHUNK);
	if (buf == NULL || ft_cksum_init(&ck, lom->cksum_type) != 0) {
		free(buf);
		return TGT_REPLICA_IO;
	}
	while (off < lom->size) {
		size_t want = lom->size - off < COPY_CHUNK ? (size_t)(lom->size - off) : COPY_CHUNK;
		ssize_t got = pread(fd, buf, want, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			ft_cksum_abort(&ck);
			free(buf);
			return got == 0 ? TGT_REPLICA_BAD_SIZE : TGT_REPLICA_IO;
		}
		ft_cksum_update(&ck, buf, (size_t)got);
		off += (uint64_t)got;
	}
	free(buf);
	ft_cksum_final(&ck, hex);
	if (size != NULL)
		*size += (int64_t)off;
	return strcmp(hex, lom->cksum) == 0 ? TGT_REPLICA_OK : TGT_REPLICA_BAD_CKSUM;
}

tgt_replica_state_t tgt_replica_open(const tgt_obj_t *o, const tgt_replica_t *rp, bool verify, int *fd, ft_lom_t *lom,
				     int64_t *size)
{
	struct stat st;

	return tgt_replica_open_stat(o, rp, verify, fd, lom, size, &st);
}

tgt_replica_state_t tgt_replica_open_stat(const tgt_obj_t *o, const tgt_replica_t *rp, bool verify, int *fd,
					  ft_lom_t *lom, int64_t *size, struct stat *st)
{
	char rel[COPY_REL_MAX];
	tgt_replica_state_t s;
	bool keyed = o->keyed;

	replica_rel(o, rp, rel, sizeof(rel));
	*fd = open_stat(replica_mp(o, rp), rel, st);
	/* a mirror copy not at its main copy's place: in the other one (copy_rel_other) */
	size_t pre = sizeof(TGT_COPIES_DIR);
	if (rp->copy && (*fd < 0 ? errno == ENOENT || errno == ENOTDIR : S_ISDIR(st->st_mode)) &&
	    copy_rel_other(o, rel + pre, sizeof(rel) - pre, &keyed) == 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = open_stat(replica_mp(o, rp), rel, st);
	}
	if (*fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? TGT_REPLICA_ABSENT : TGT_REPLICA_IO;
	/* a hashed file name holds the object its name xattr names, no other (core/keymap.h) */
	if (!S_ISREG(st->st_mode) || (o->obj && keyed && !tgt_key_holds(*fd, o->obj, o->obj_len))) {
		s = TGT_REPLICA_ABSENT;
		goto fail;
	}
	int rc = ft_lom_fget(*fd, lom);
	if (rc != 0) {
		s = rc == -ENODATA ? TGT_REPLICA_NO_META : rc == -EBADMSG ? TGT_REPLICA_BAD_META : TGT_REPLICA_IO;
		goto fail;
	}
	if ((uint64_t)st->st_size != lom->size) {
		s = TGT_REPLICA_BAD_SIZE;
		goto fail;
	}
	if (verify && (s = replica_verify(*fd, lom, size)) != TGT_REPLICA_OK)
		goto fail;
	return TGT_REPLICA_OK;
fail:
	close(*fd);
	*fd = -1;
	return s;
}

bool tgt_replica_same(const ft_lom_t *a, const ft_lom_t *b)
{
	return a->size == b->size && a->mtime_ns == b->mtime_ns && strcmp(a->cksum, b->cksum) == 0 &&
	       strcmp(a->version, b->version) == 0;
}

/* A view of mp rooted at its .copies directory (created when create). 0 or -errno; close view->root_fd. */
static int copies_view(const tgt_mountpath_t *mp, tgt_mountpath_t *view, bool create)
{
	*view = *mp;
	if (create && mkdirat(mp->root_fd, TGT_COPIES_DIR, 0755) != 0 && errno != EEXIST)
		return -errno;
	view->root_fd = openat(mp->root_fd, TGT_COPIES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return view->root_fd < 0 ? -errno : 0;
}

int tgt_replica_write(const tgt_obj_t *o, const tgt_replica_t *rp, int src_fd, const ft_lom_t *lom)
{
	tgt_t *t = o->t;
	tgt_mountpath_t view = {.root_fd = -1};
	const tgt_mountpath_t *mp = replica_mp(o, rp);
	char work[64] = "";
	uint64_t avail = 0;
	int wfd = -1, rc;

	rc = tgt_mountpath_avail(mp, t->cfg.reserve_bytes, &avail);
	if (rc == 0 && lom->size > avail)
		rc = -ENOSPC;
	if (rc == 0 && rp->copy) {
		rc = copies_view(mp, &view, true);
		mp = &view;
	}
	if (rc != 0)
		goto out;
	wfd = tgt_work_create(mp, work, sizeof(work));
	if (wfd < 0) {
		rc = wfd;
		work[0] = '\0';
		goto out;
	}
	rc = ft_copy_range(src_fd, 0, wfd, 0, lom->size);
	if (rc == 0)
		rc = ft_lom_fset(wfd, lom);
	if (rc == 0 && t->cfg.sync == FT_SYNC_DATA && fdatasync(wfd) != 0)
		rc = -errno;
	if (rc == 0 && t->cfg.sync == FT_SYNC_FULL && fsync(wfd) != 0)
		rc = -errno;
	if (rc != 0)
		goto out;
	tgt_obj_t at = *o;
	at.mp = mp;
	rc = tgt_publish(&at, work, t->cfg.sync);
out:
	if (wfd >= 0)
		close(wfd);
	if (work[0])
		unlinkat(mp->work_fd, work, 0);
	if (view.root_fd >= 0)
		close(view.root_fd);
	return rc;
}

int tgt_replica_set_aside(const tgt_obj_t *o, char *aside, size_t cap)
{
	static atomic_uint_fast64_t seq;

	snprintf(aside, cap, "damaged.%ld.%llu", (long)getpid(), (unsigned long long)atomic_fetch_add(&seq, 1));
	if (renameat(o->mp->root_fd, o->rel, o->mp->work_fd, aside) != 0) {
		aside[0] = '\0';
		return -errno;
	}
	tgt_fcache_invalidate(o->t); /* moved, still linked: a kept fd of it must go */
	return 0;
}

void tgt_replica_put_back(const tgt_obj_t *o, char *aside)
{
	const char *leaf;

	if (!aside[0])
		return;
	int dfd = tgt_parent_open(o->mp, o->rel, &leaf);
	if (dfd < 0 || renameat2(o->mp->work_fd, aside, dfd, leaf, RENAME_NOREPLACE) != 0)
		unlinkat(o->mp->work_fd, aside, 0); /* a new main copy is there (or no way back) */
	if (dfd >= 0)
		close(dfd);
	tgt_fcache_invalidate(o->t);
	aside[0] = '\0';
}

void tgt_replica_drop(const tgt_obj_t *o, char *aside)
{
	if (aside[0])
		unlinkat(o->mp->work_fd, aside, 0);
	aside[0] = '\0';
}

static void note_damaged(const tgt_obj_t *o, const tgt_replica_t *rp, tgt_replica_state_t s)
{
	tgt_integrity_count(o->t, TGT_INTEGRITY_DAMAGED);
	ft_error("object %s/%s: %s on %s is damaged: %s", o->bucket, o->obj, rp->copy ? "mirror copy" : "main copy",
		 o->t->mountpaths[rp->mp_index].path, tgt_replica_state_name(s));
}

int tgt_replica_heal(tgt_obj_t *o, tgt_replica_t reps[FT_MAX_MOUNTPATHS], int n, bool verify_main, int *fd,
		     ft_lom_t *lom, tgt_heal_t *h)
{
	tgt_replica_state_t st[FT_MAX_MOUNTPATHS] = {TGT_REPLICA_ABSENT};
	ft_lom_t loms[FT_MAX_MOUNTPATHS];
	int fds[FT_MAX_MOUNTPATHS];
	int best = -1;

	memset(h, 0, sizeof(*h));
	tgt_name_lock(o);
	for (int k = 0; k < n; k++) {
		st[k] = tgt_replica_open(o, &reps[k], k > 0 || verify_main, &fds[k], &loms[k], &h->bytes);
		if (st[k] != TGT_REPLICA_ABSENT)
			h->existed = true;
		if (st[k] != TGT_REPLICA_OK)
			continue;
		if (k > 0 && st[0] == TGT_REPLICA_OK && !tgt_replica_same(&loms[0], &loms[k])) {
			st[k] = TGT_REPLICA_STALE; /* left from before the last PUT: rewrite it */
			close(fds[k]);
			fds[k] = -1;
			continue;
		}
		/* The main copy when good, else the newest good copy. */
		if (best < 0 || (best > 0 && loms[k].mtime_ns > loms[best].mtime_ns))
			best = k;
	}
	h->main = st[0];
	for (int k = 0; k < n; k++) {
		if (st[k] != TGT_REPLICA_OK && st[k] != TGT_REPLICA_ABSENT && st[k] != TGT_REPLICA_STALE) {
			h->damaged++;
			note_damaged(o, &reps[k], st[k]);
		}
	}
	for (int k = 0; best >= 0 && k < n; k++) {
		if (st[k] == TGT_REPLICA_OK)
			continue;
		int rc = tgt_replica_write(o, &reps[k], fds[best], &loms[best]);
		const char *what = reps[k].copy ? "mirror copy" : "main copy";
		const char *where = o->t->mountpaths[reps[k].mp_index].path;
		if (rc != 0) {
			h->failed++;
			ft_error("object %s/%s: cannot rewrite the %s on %s: %s", o->bucket, o->obj, what, where,
				 strerror(-rc));
			continue;
		}
		h->repaired++;
		h->bytes += (int64_t)loms[best].size;
		tgt_integrity_count(o->t, TGT_INTEGRITY_REPAIRED);
		ft_warn("object %s/%s: %s on %s (%s) rewritten from the %s", o->bucket, o->obj, what, where,
			tgt_replica_state_name(st[k]), best == 0 ? "main copy" : "mirror copy");
	}
	if (best >= 0) {
		*fd = fds[best];
		*lom = loms[best];
		fds[best] = -1;
	} else if (st[0] != TGT_REPLICA_ABSENT && st[0] != TGT_REPLICA_IO) {
		int rc = tgt_replica_set_aside(o, h->aside, sizeof(h->aside));
		if (rc != 0)
			ft_warn("object %s/%s: cannot move the damaged main copy aside: %s", o->bucket, o->obj,
				strerror(-rc));
	}
	tgt_name_unlock(o);
	for (int k = 0; k < n; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	return best;
}

int tgt_replica_remove(const tgt_obj_t *o, int i)
{
	tgt_mountpath_t view;
	int removed = 0;

	if (copies_view(&o->t->mountpaths[i], &view, false) != 0)
		return 0;
	if (unlinkat(view.root_fd, o->rel, 0) == 0) {
		removed = 1;
		tgt_parent_prune(&view, o->rel);
	}
	/* the copy may be in the name's other place (copy_rel_other) */
	char rel[TGT_REL_MAX];
	bool keyed;
	if (copy_rel_other(o, rel, sizeof(rel), &keyed) == 0 && unlinkat(view.root_fd, rel, 0) == 0) {
		removed = 1;
		tgt_parent_prune(&view, rel);
	}
	close(view.root_fd);
	return removed;
}
