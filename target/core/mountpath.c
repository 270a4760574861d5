/* SPDX-License-Identifier: Apache-2.0 */
/* Target mountpaths: opening them, attach/detach at run time, object placement across them, paths, work files. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/fdio.h"
#include "base/log.h"
#include "cluster/hrw.h"
#include "core/fcache.h"
#include "core/keymap.h"
#include "core/mountpath.h"
#include "core/namelock.h"

#define PROBE_XATTR "user.ft.probe"

/*
 * DESIGN (mountpath changes at run time)
 * Requests keep a pointer into t->mountpaths (o->mp) and use its fds without a lock, and other
 * files iterate t->mountpaths[0..n_mountpaths). So a slot is never moved, shrunk or reused for
 * another path: slots are append-only (n_mountpaths only grows, stored after the slot is filled)
 * and a slot's fd numbers stay valid until the process ends.
 * Placement does not read the slots directly: tgt_mountpath_pick reads an immutable "active set"
 * (slot indexes and their digests) through one atomic pointer, replaced as a whole on attach and
 * detach (RCU-like: old sets are only freed by tgt_mountpaths_close, a few hundred bytes each).
 * A detach goes active -> detaching (out of the active set: no new placement there; rebalance.c
 * moves its objects away) -> sealed: under the publish lock held exclusively, the slot's root and
 * .work fds are replaced with dup2() by fds of a removed directory, so a request still holding the
 * slot finds nothing there and cannot create anything (ENOENT) instead of touching a recycled fd
 * or the old disk; the real directory stays reachable to the caller only, for a last sweep of what
 * was published before the seal, then is closed (the disk is no longer held open) -> detached.
 * Attaching a detached path again reuses its slot (dup2 of the new fds). Attach and detach are
 * recorded in "<state_dir>/mountpaths.json" and applied over the configured list at the next start.
 * One target per process.
 */

enum { MP_ACTIVE = 0, MP_DETACHING = 1, MP_DETACHED = 2 };

typedef struct tgt_mp_set {
	struct tgt_mp_set *older; /* retired sets, freed at close */
	int n;
	int slot[FT_MAX_MOUNTPATHS];
	uint64_t digests[FT_MAX_MOUNTPATHS];
} mp_set_t;

/* Work-file and retired-tree names are unique within the process; .work is emptied at start. */
static atomic_uint_fast64_t work_counter;

/* mkdir -p of an absolute or relative path; 0 or -errno. */
static int mkdir_p(const char *path)
{
	char buf[FT_PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char saved = buf[i];
		buf[i] = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -errno;
		buf[i] = saved;
	}
	return 0;
}

/* Removes everything inside the directory fd (consumed). 0, or the first -errno. */
static int remove_contents(int fd, const atomic_int *cancel)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int first = 0;

	if (!d) {
		int e = -errno;
		close(fd);
		return e;
	}
	while ((de = readdir(d)) != NULL) {
		if (cancel && atomic_load(cancel)) {
			first = -ECANCELED;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int rc = tgt_remove_tree(dirfd(d), de->d_name, cancel);
		if (rc != 0 && first == 0)
			first = rc;
	}
	closedir(d);
	return first;
}

int tgt_remove_tree(int dirfd, const char *name, const atomic_int *cancel)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	int rc = remove_contents(fd, cancel);
	if (rc != 0)
		return rc;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* Empties .work (leftovers of a previous run: work files, retired buckets). */
static void clean_work(const tgt_mountpath_t *mp)
{
	int fd = openat(mp->work_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		ft_warn("mountpath %s: cannot open %s: %s", mp->path, TGT_WORK_DIR, strerror(errno));
		return;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int rc = tgt_remove_tree(mp->work_fd, de->d_name, NULL);
		if (rc != 0)
			ft_warn("mountpath %s: cannot remove %s/%s: %s", mp->path, TGT_WORK_DIR, de->d_name,
				strerror(-rc));
		else
			n++;
	}
	closedir(d);
	if (n > 0)
		ft_info("mountpath %s: removed %d leftover work entries", mp->path, n);
}

/* Fails early, with a clear message, on a filesystem without user xattrs (metadata lives there). */
static int probe_xattr(const tgt_mountpath_t *mp, char *err, size_t errlen)
{
	char name[64];
	int fd = tgt_work_create(mp, name, sizeof(name));
	int rc = 0;

	if (fd < 0) {
		snprintf(err, errlen, "mountpath %s: cannot create a work file: %s", mp->path, strerror(-fd));
		return -1;
	}
	if (fsetxattr(fd, PROBE_XATTR, "1", 1, 0) != 0) {
		snprintf(err, errlen, "mountpath %s: extended attributes not usable: %s", mp->path, strerror(errno));
		rc = -1;
	}
	close(fd);
	unlinkat(mp->work_fd, name, 0);
	return rc;
}

static int open_one(tgt_mountpath_t *mp, const char *path, char *err, size_t errlen)
{
	int rc;

	mp->root_fd = mp->work_fd = -1;
	if (strlen(path) >= sizeof(mp->path)) {
		snprintf(err, errlen, "mountpath %s: path too long", path);
		return -1;
	}
	strcpy(mp->path, path);
	rc = mkdir_p(path);
	if (rc != 0) {
		snprintf(err, errlen, "mountpath %s: cannot create: %s", path, strerror(-rc));
		return -1;
	}
	mp->root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mp->root_fd < 0) {
		snprintf(err, errlen, "mountpath %s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	if (mkdirat(mp->root_fd, TGT_WORK_DIR, 0755) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "mountpath %s: cannot create %s: %s", path, TGT_WORK_DIR, strerror(errno));
		return -1;
	}
	mp->work_fd = openat(mp->root_fd, TGT_WORK_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (mp->work_fd < 0) {
		snprintf(err, errlen, "mountpath %s: cannot open %s: %s", path, TGT_WORK_DIR, strerror(errno));
		return -1;
	}
	clean_work(mp);
	return probe_xattr(mp, err, errlen);
}

/* Two configured paths naming one directory would place objects twice. */
static int check_distinct(const tgt_t *t, int i, char *err, size_t errlen)
{
	struct stat a, b;

	if (fstat(t->mountpaths[i].root_fd, &a) != 0)
		return 0;
	for (int j = 0; j < i; j++) {
		if (fstat(t->mountpaths[j].root_fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			snprintf(err, errlen, "mountpaths %s and %s are the same directory", t->mountpaths[j].path,
				 t->mountpaths[i].path);
			return -1;
		}
	}
	return 0;
}

/* Replaces the active set by one built from the slots now active (change_lock held, or at open). 0 or -1. */
static int publish_set(tgt_t *t)
{
	mp_set_t *set = calloc(1, sizeof(*set));

	if (!set)
		return -1;
	for (int i = 0; i < t->n_mountpaths; i++) {
		if (atomic_load(&t->mp_state[i]) != MP_ACTIVE)
			continue;
		set->slot[set->n] = i;
		set->digests[set->n] = t->mountpath_digests[i];
		set->n++;
	}
	set->older = atomic_load(&t->mp_active);
	atomic_store_explicit(&t->mp_active, set, memory_order_release);
	tgt_fcache_invalidate(t); /* names may map to other mountpaths now: kept files are opened anew */
	return 0;
}

/* ---- run-time changes kept across restarts: "<state_dir>/mountpaths.json" ---- */

/*
 * {"attached": [paths attached over REST that the configuration lacks],
 *  "detached": [configured paths detached over REST]}. The mountpaths used at start are the
 * configured ones minus "detached", plus "attached". Written (tmp + fsync + rename) after each
 * attach and completed detach; absent until the first change.
 */
#define MP_STATE_FILE "mountpaths.json"

static int state_path(const tgt_t *t, char *buf, size_t cap, const char *suffix)
{
	int n = snprintf(buf, cap, "%s/%s%s", t->cfg.state_dir, MP_STATE_FILE, suffix);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int configured(const tgt_t *t, const char *path)
{
	for (int i = 0; i < t->cfg.n_mountpaths; i++)
		if (strcmp(t->cfg.mountpaths[i], path) == 0)
			return 1;
	return 0;
}

static int listed(const json_t *arr, const char *path)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), path) == 0)
			return 1;
	return 0;
}

/* Loads the state file: *doc NULL when there is none. 0, or -1 with err (unreadable or malformed). */
static int state_load(const tgt_t *t, json_t **doc, char *err, size_t errlen)
{
	char path[FT_PATH_MAX + 32];
	json_error_t jerr;

	*doc = NULL;
	if (state_path(t, path, sizeof(path), "") != 0) {
		snprintf(err, errlen, "state_dir path too long");
		return -1;
	}
	if (access(path, F_OK) != 0)
		return 0;
	json_t *j = json_load_file(path, 0, &jerr);
	json_t *a = j ? json_object_get(j, "attached") : NULL, *d = j ? json_object_get(j, "detached") : NULL;
	if (!j || !json_is_array(a) || !json_is_array(d)) {
		snprintf(err, errlen, "%s: %s (expected {\"attached\": [...], \"detached\": [...]})", path,
			 j ? "malformed" : jerr.text);
		json_decref(j);
		return -1;
	}
	*doc = j;
	return 0;
}

/* Records the slots now attached, against the configuration (change_lock held). Logs failures. */
static void state_save(const tgt_t *t)
{
	char path[FT_PATH_MAX + 32], tmp[FT_PATH_MAX + 32];
	json_t *att = json_array(), *det = json_array();

	for (int i = 0; i < t->n_mountpaths; i++) {
		const char *p = t->mountpaths[i].path;
		if (atomic_load(&t->mp_state[i]) != MP_DETACHED && !configured(t, p))
			json_array_append_new(att, json_string(p));
	}
	for (int i = 0; i < t->cfg.n_mountpaths; i++) {
		const char *p = t->cfg.mountpaths[i];
		int slot = -1;
		for (int k = 0; k < t->n_mountpaths && slot < 0; k++)
			if (strcmp(t->mountpaths[k].path, p) == 0)
				slot = k;
		if (slot < 0 || atomic_load(&t->mp_state[slot]) == MP_DETACHED)
			json_array_append_new(det, json_string(p));
	}
	json_t *doc = json_pack("{s:o, s:o}", "attached", att, "detached", det);
	if (!doc || state_path(t, path, sizeof(path), "") != 0 || state_path(t, tmp, sizeof(tmp), ".tmp") != 0) {
		ft_error("mountpaths: cannot record the change (out of memory or path too long)");
		json_decref(doc);
		return;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	char *text = json_dumps(doc, JSON_INDENT(2));
	int ok = fd >= 0 && text && ft_write_all(fd, text, strlen(text)) == 0 && fsync(fd) == 0;
	if (fd >= 0)
		close(fd);
	ok = ok && rename(tmp, path) == 0;
	if (!ok)
		ft_error("mountpaths: cannot write %s: %s (the change holds until a restart only)", path,
			 strerror(errno));
	free(text);
	json_decref(doc);
}

/* Opens path into the next slot. 0, or -1 with err. */
static int open_slot(tgt_t *t, const char *path, char *err, size_t errlen)
{
	int i = t->n_mountpaths;

	if (i >= FT_MAX_MOUNTPATHS) {
		snprintf(err, errlen, "more than %d mountpaths", FT_MAX_MOUNTPATHS);
		return -1;
	}
	t->n_mountpaths = i + 1; /* so that close releases this one too */
	if (open_one(&t->mountpaths[i], path, err, errlen) != 0 || check_distinct(t, i, err, errlen) != 0)
		return -1;
	t->mountpath_digests[i] = ft_hrw_digest(t->mountpaths[i].path);
	atomic_store(&t->mp_state[i], MP_ACTIVE);
	return 0;
}

int tgt_mountpaths_open(tgt_t *t, char *err, size_t errlen)
{
	json_t *doc = NULL;
	size_t k;
	json_t *v;

	t->n_mountpaths = 0;
	pthread_mutex_init(&t->mp_change_lock, NULL);
	if (t->cfg.n_mountpaths <= 0) {
		snprintf(err, errlen, "no mountpath configured (--mountpath DIR)");
		return -1;
	}
	if (state_load(t, &doc, err, errlen) != 0)
		return -1;
	const json_t *detached = doc ? json_object_get(doc, "detached") : NULL;
	for (int i = 0; i < t->cfg.n_mountpaths; i++) {
		if (detached && listed(detached, t->cfg.mountpaths[i])) {
			ft_info("mountpath %s: detached at run time earlier (%s), not used", t->cfg.mountpaths[i],
				MP_STATE_FILE);
			continue;
		}
		if (open_slot(t, t->cfg.mountpaths[i], err, errlen) != 0)
			goto fail;
	}
	json_array_foreach(doc ? json_object_get(doc, "attached") : NULL, k, v) {
		const char *p = json_string_value(v);
		if (!p || configured(t, p))
			continue;
		ft_info("mountpath %s: attached at run time earlier (%s)", p, MP_STATE_FILE);
		if (open_slot(t, p, err, errlen) != 0)
			goto fail;
	}
	if (t->n_mountpaths == 0) {
		snprintf(err, errlen, "every configured mountpath was detached (see %s/%s)", t->cfg.state_dir,
			 MP_STATE_FILE);
		goto fail;
	}
	if (publish_set(t) != 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	json_decref(doc);
	return 0;
fail:
	json_decref(doc);
	tgt_mountpaths_close(t);
	return -1;
}

void tgt_mountpaths_close(tgt_t *t)
{
	mp_set_t *set = atomic_exchange(&t->mp_active, NULL);
	while (set) {
		mp_set_t *older = set->older;
		free(set);
		set = older;
	}
	for (int i = 0; i < t->n_mountpaths; i++) {
		tgt_mountpath_t *mp = &t->mountpaths[i];
		if (mp->work_fd >= 0)
			close(mp->work_fd);
		if (mp->root_fd >= 0)
			close(mp->root_fd);
		mp->work_fd = mp->root_fd = -1;
	}
	t->n_mountpaths = 0;
}

const tgt_mountpath_t *tgt_mountpath_pick_hash(const tgt_t *t, uint64_t name_hash)
{
	const mp_set_t *set = atomic_load_explicit(&t->mp_active, memory_order_acquire);

	if (!set || set->n == 0)
		return &t->mountpaths[0];
	if (set->n == 1)
		return &t->mountpaths[set->slot[0]];
	int i = ft_hrw_pick(name_hash, set->digests, set->n);
	return &t->mountpaths[set->slot[i < 0 ? 0 : i]];
}

const tgt_mountpath_t *tgt_mountpath_pick(const tgt_t *t, const char *provider, const char *bucket, const char *obj,
					  size_t obj_len)
{
	return tgt_mountpath_pick_hash(t, ft_hrw_name_hash(provider, bucket, obj, obj_len));
}

int tgt_rel_path(char *buf, size_t cap, const char *provider, const char *bucket, const char *obj)
{
	size_t pl = strlen(provider), bl = strlen(bucket), n = pl + 1 + bl + (obj ? 1 : 0);

	if (n >= cap)
		return -1;
	memcpy(buf, provider, pl);
	buf[pl] = '/';
	memcpy(buf + pl + 1, bucket, bl);
	if (obj != NULL)
		buf[n - 1] = '/';
	buf[n] = '\0';
	/* a name that is no path gets its hashed file name (core/keymap.h) */
	return obj ? tgt_key_path(buf + n, cap - n, obj, strlen(obj)) : 0;
}

int tgt_mountpath_avail(const tgt_mountpath_t *mp, int64_t reserve, uint64_t *avail)
{
	struct statvfs sv;

	if (fstatvfs(mp->root_fd, &sv) != 0)
		return -errno;
	uint64_t free_bytes = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
	uint64_t res = reserve > 0 ? (uint64_t)reserve : 0;
	*avail = free_bytes > res ? free_bytes - res : 0;
	return 0;
}

int tgt_work_create(const tgt_mountpath_t *mp, char *name, size_t cap)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		uint64_t n = atomic_fetch_add(&work_counter, 1);
		snprintf(name, cap, "put.%ld.%llu", (long)getpid(), (unsigned long long)n);
		int fd = openat(mp->work_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int tgt_work_anon(const tgt_mountpath_t *mp)
{
	char name[64];
	int fd = openat(mp->work_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0)
		return fd;
	snprintf(name, sizeof(name), "anon.%ld.%llu", (long)getpid(),
		 (unsigned long long)atomic_fetch_add(&work_counter, 1));
	fd = openat(mp->work_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	unlinkat(mp->work_fd, name, 0);
	return fd;
}

void tgt_work_drop(const tgt_mountpath_t *mp, int *fd, char *name)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	if (name[0]) {
		unlinkat(mp->work_fd, name, 0);
		name[0] = '\0';
	}
}

/* Slow path of tgt_parent_open: mkdir + open each component of dir (modified in place) in turn. */
static int parent_create(const tgt_mountpath_t *mp, char *dir)
{
	int cur = mp->root_fd;
	char *comp = dir;

	for (;;) {
		char *slash = strchr(comp, '/');
		if (slash)
			*slash = '\0';
		if (mkdirat(cur, comp, 0755) != 0 && errno != EEXIST) {
			int e = -errno;
			if (cur != mp->root_fd)
				close(cur);
			return e;
		}
		int next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = next < 0 ? -errno : 0;
		if (cur != mp->root_fd)
			close(cur);
		if (next < 0)
			return e == -ELOOP ? -ENOTDIR : e; /* ENOENT: pruned meanwhile, caller retries */
		cur = next;
		if (!slash)
			return cur;
		comp = slash + 1;
	}
}

int tgt_parent_open(const tgt_mountpath_t *mp, const char *rel, const char **leaf)
{
	char dir[TGT_REL_MAX];
	const char *slash = strrchr(rel, '/');
	size_t len = slash ? (size_t)(slash - rel) : 0;

	*leaf = slash ? slash + 1 : rel;
	if (len == 0)
		return openat(mp->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (len >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, rel, len);
	dir[len] = '\0';
	/* Fast path: the directories exist already. */
	int fd = openat(mp->root_fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	if (errno != ENOENT)
		return -errno;
	return parent_create(mp, dir);
}

void tgt_parent_prune(const tgt_mountpath_t *mp, const char *rel)
{
	char dir[TGT_REL_MAX];
	size_t len = strlen(rel);
	/* rel = "<provider>/<bucket>/<obj>": the bucket dir ends at the second '/'. */
	const char *p = strchr(rel, '/');
	const char *q = p ? strchr(p + 1, '/') : NULL;

	if (!q || len >= sizeof(dir))
		return;
	size_t bucket_len = (size_t)(q - rel);
	memcpy(dir, rel, len + 1);
	for (;;) {
		char *slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) <= bucket_len)
			return;
		*slash = '\0';
		if (unlinkat(mp->root_fd, dir, AT_REMOVEDIR) != 0)
			return; /* not empty (or gone): the directories above are not empty either */
	}
}

int tgt_bucket_retire(tgt_t *t, const char *provider, const char *bucket)
{
	char rel[TGT_REL_MAX], name[FT_BUCKET_NAME_MAX + 64];
	int moved = 0;

	if (tgt_rel_path(rel, sizeof(rel), provider, bucket, NULL) != 0)
		return 0;
	/* The bucket's objects, then the extra copies and EC slices kept for it (same layout below them). */
	static const char *const tops[] = {"", TGT_COPIES_DIR "/", TGT_EC_DIR "/"};
	tgt_publish_lock_exclusive(t);
	for (int i = 0; i < t->n_mountpaths; i++) {
		const tgt_mountpath_t *mp = &t->mountpaths[i];
		for (size_t k = 0; k < sizeof(tops) / sizeof(tops[0]); k++) {
			char src[sizeof(TGT_COPIES_DIR) + sizeof(TGT_EC_DIR) + TGT_REL_MAX];
			uint64_t n = atomic_fetch_add(&work_counter, 1);
			snprintf(src, sizeof(src), "%s%s", tops[k], rel);
			snprintf(name, sizeof(name), "rm.%llu.%s", (unsigned long long)n, bucket);
			if (renameat(mp->root_fd, src, mp->work_fd, name) == 0)
				moved += k == 0;
			else if (errno != ENOENT)
				ft_warn("mountpath %s: cannot retire %s: %s", mp->path, src, strerror(errno));
		}
	}
	tgt_fcache_invalidate(t); /* the retired files are still linked (in .work): kept fds must go */
	tgt_publish_unlock(t);
	return moved;
}

/* ---- attach and detach at run time (rebalance.c drives them; see DESIGN above) ---- */

int tgt_mountpath_slot_state(const tgt_t *t, int slot)
{
	if (slot < 0 || slot >= t->n_mountpaths)
		return -1;
	return atomic_load(&t->mp_state[slot]);
}

int tgt_mountpath_is_active(const tgt_t *t, const tgt_mountpath_t *mp)
{
	if (mp < t->mountpaths || mp >= t->mountpaths + FT_MAX_MOUNTPATHS)
		return 0;
	return tgt_mountpath_slot_state(t, (int)(mp - t->mountpaths)) == MP_ACTIVE;
}

/* The slot holding path (any state), or -1. */
static int slot_of(const tgt_t *t, const char *path)
{
	for (int i = 0; i < t->n_mountpaths; i++)
		if (strcmp(t->mountpaths[i].path, path) == 0)
			return i;
	return -1;
}

static void close_fds(tgt_mountpath_t *mp)
{
	if (mp->work_fd >= 0)
		close(mp->work_fd);
	if (mp->root_fd >= 0)
		close(mp->root_fd);
	mp->work_fd = mp->root_fd = -1;
}

int tgt_mountpath_attach(tgt_t *t, const char *path, char *err, size_t cap)
{
	tgt_mountpath_t fresh = {.root_fd = -1, .work_fd = -1};
	struct stat a, b;
	int rc, slot;

	size_t plen = strlen(path);
	if (path[0] != '/' || strstr(path, "/../") || strstr(path, "/./") ||
	    (plen >= 3 && strcmp(path + plen - 3, "/..") == 0) || (plen >= 2 && strcmp(path + plen - 2, "/.") == 0) ||
	    plen >= sizeof(fresh.path)) {
		snprintf(err, cap,
			 "mountpath \"%s\": expected an absolute path of fewer than %d bytes, without \".\" or \"..\"",
			 path, FT_PATH_MAX);
		return -EINVAL;
	}
	pthread_mutex_lock(&t->mp_change_lock);
	slot = slot_of(t, path);
	if (slot >= 0 && atomic_load(&t->mp_state[slot]) != MP_DETACHED) {
		snprintf(err, cap, "mountpath %s is %s", path,
			 atomic_load(&t->mp_state[slot]) == MP_ACTIVE ? "attached already" : "being detached");
		rc = -EEXIST;
		goto out;
	}
	if (slot < 0 && t->n_mountpaths >= FT_MAX_MOUNTPATHS) {
		snprintf(err, cap, "all %d mountpath slots are taken (detached ones included until a restart)",
			 FT_MAX_MOUNTPATHS);
		rc = -ENOSPC;
		goto out;
	}
	if (open_one(&fresh, path, err, cap) != 0) {
		rc = -EINVAL;
		goto out;
	}
	for (int i = 0; i < t->n_mountpaths; i++) {
		if (i == slot || atomic_load(&t->mp_state[i]) == MP_DETACHED)
			continue;
		if (fstat(fresh.root_fd, &a) == 0 && fstat(t->mountpaths[i].root_fd, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			snprintf(err, cap, "mountpath %s is the same directory as %s", path, t->mountpaths[i].path);
			rc = -EEXIST;
			goto out;
		}
	}
	if (slot >= 0) {
		/* Same fd numbers, new directories: holders of the slot see either the dead or the new ones. */
		tgt_mountpath_t *mp = &t->mountpaths[slot];
		if (dup3(fresh.root_fd, mp->root_fd, O_CLOEXEC) < 0 ||
		    dup3(fresh.work_fd, mp->work_fd, O_CLOEXEC) < 0) {
			snprintf(err, cap, "mountpath %s: dup3: %s", path, strerror(errno));
			rc = -EIO;
			goto out;
		}
	} else {
		slot = t->n_mountpaths;
		tgt_mountpath_t *mp = &t->mountpaths[slot];
		*mp = fresh;
		fresh.root_fd = fresh.work_fd = -1; /* now the slot's */
		t->mountpath_digests[slot] = ft_hrw_digest(mp->path);
		__atomic_store_n(&t->n_mountpaths, slot + 1, __ATOMIC_RELEASE);
	}
	atomic_store(&t->mp_state[slot], MP_ACTIVE);
	tgt_fcache_invalidate(t); /* kept files of this slot's paths: opened anew */
	if (publish_set(t) != 0) {
		atomic_store(&t->mp_state[slot], MP_DETACHED);
		tgt_fcache_invalidate(t); /* kept files of this slot's paths: opened anew */
		snprintf(err, cap, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	state_save(t);
	rc = slot;
out:
	pthread_mutex_unlock(&t->mp_change_lock);
	close_fds(&fresh);
	return rc;
}

int tgt_mountpath_detach_begin(tgt_t *t, const char *path, char *err, size_t cap)
{
	int rc, active = 0;

	pthread_mutex_lock(&t->mp_change_lock);
	int slot = slot_of(t, path);
	if (slot < 0 || atomic_load(&t->mp_state[slot]) == MP_DETACHED) {
		snprintf(err, cap, "mountpath %s is not attached", path);
		rc = -ENOENT;
		goto out;
	}
	if (atomic_load(&t->mp_state[slot]) == MP_DETACHING) {
		snprintf(err, cap, "mountpath %s is being detached already", path);
		rc = -EBUSY;
		goto out;
	}
	for (int i = 0; i < t->n_mountpaths; i++)
		active += atomic_load(&t->mp_state[i]) == MP_ACTIVE;
	if (active <= 1) {
		snprintf(err, cap, "mountpath %s is the last one attached: attach another first", path);
		rc = -EPERM;
		goto out;
	}
	atomic_store(&t->mp_state[slot], MP_DETACHING);
	tgt_fcache_invalidate(t); /* kept files of this slot's paths: opened anew */
	if (publish_set(t) != 0) {
		atomic_store(&t->mp_state[slot], MP_ACTIVE);
		tgt_fcache_invalidate(t); /* kept files of this slot's paths: opened anew */
		snprintf(err, cap, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	rc = slot;
out:
	pthread_mutex_unlock(&t->mp_change_lock);
	return rc;
}

void tgt_mountpath_detach_abort(tgt_t *t, int slot)
{
	pthread_mutex_lock(&t->mp_change_lock);
	atomic_store(&t->mp_state[slot], MP_ACTIVE);
	tgt_fcache_invalidate(t); /* kept files of this slot's paths: opened anew */
	if (publish_set(t) != 0)
		ft_error("mountpath %s: out of memory while re-activating it", t->mountpaths[slot].path);
	pthread_mutex_unlock(&t->mp_change_lock);
}

/* An fd of a directory that no longer exists: every lookup or creation under it fails with ENOENT. */
static int dead_dir(const tgt_t *t)
{
	char tmpl[] = "/tmp/ft-detached.XXXXXX";
	int fd = -1;

	if (mkdtemp(tmpl)) {
		fd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rmdir(tmpl);
		if (fd >= 0)
			return fd;
	}
	for (int i = 0; i < t->n_mountpaths && fd < 0; i++) {
		const tgt_mountpath_t *mp = &t->mountpaths[i];
		char name[64];
		if (atomic_load(&t->mp_state[i]) != MP_ACTIVE)
			continue;
		snprintf(name, sizeof(name), "dead.%llu", (unsigned long long)atomic_fetch_add(&work_counter, 1));
		if (mkdirat(mp->work_fd, name, 0700) != 0)
			continue;
		fd = openat(mp->work_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		unlinkat(mp->work_fd, name, AT_REMOVEDIR);
	}
	return fd;
}

int tgt_mountpath_detach_seal(tgt_t *t, int slot, tgt_mountpath_t *real)
{
	tgt_mountpath_t *mp = &t->mountpaths[slot];
	int dead = dead_dir(t);

	real->root_fd = real->work_fd = -1;
	snprintf(real->path, sizeof(real->path), "%s", mp->path);
	if (dead < 0)
		return -errno;
	real->root_fd = fcntl(mp->root_fd, F_DUPFD_CLOEXEC, 0);
	real->work_fd = fcntl(mp->work_fd, F_DUPFD_CLOEXEC, 0);
	int rc = real->root_fd < 0 || real->work_fd < 0 ? -EMFILE : 0;
	tgt_publish_lock_exclusive(t);
	if (rc == 0 && (dup3(dead, mp->root_fd, O_CLOEXEC) < 0 || dup3(dead, mp->work_fd, O_CLOEXEC) < 0))
		rc = -errno;
	tgt_publish_unlock(t);
	tgt_fcache_invalidate(t); /* files kept open from the real directory are closed by the sweeps */
	close(dead);
	if (rc != 0)
		close_fds(real);
	return rc;
}

void tgt_mountpath_detach_end(tgt_t *t, int slot, tgt_mountpath_t *real)
{
	if (real->root_fd >= 0 && real->work_fd >= 0)
		clean_work(real);
	close_fds(real);
	pthread_mutex_lock(&t->mp_change_lock);
	atomic_store(&t->mp_state[slot], MP_DETACHED);
	tgt_fcache_invalidate(t); /* kept files of this slot's paths: opened anew */
	state_save(t);
	pthread_mutex_unlock(&t->mp_change_lock);
	ft_info("mountpath %s detached", t->mountpaths[slot].path);
}
