/* Target mountpaths: opening them, object placement across them, paths, work files, directory upkeep. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "hrw.h"
#include "log.h"
#include "target.h"

#define PROBE_XATTR "user.ft.probe"

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
		snprintf(err, errlen, "mountpath %s: extended attributes not usable: %s", mp->path,
			 strerror(errno));
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
			snprintf(err, errlen, "mountpaths %s and %s are the same directory",
				 t->mountpaths[j].path, t->mountpaths[i].path);
			return -1;
		}
	}
	return 0;
}

int tgt_mountpaths_open(tgt_t *t, char *err, size_t errlen)
{
	t->n_mountpaths = 0;
	if (t->cfg.n_mountpaths <= 0) {
		snprintf(err, errlen, "no mountpath configured (--mountpath DIR)");
		return -1;
	}
	for (int i = 0; i < t->cfg.n_mountpaths; i++) {
		tgt_mountpath_t *mp = &t->mountpaths[i];
		t->n_mountpaths = i + 1; /* so that close releases this one too */
		if (open_one(mp, t->cfg.mountpaths[i], err, errlen) != 0)
			goto fail;
		if (check_distinct(t, i, err, errlen) != 0)
			goto fail;
		t->mountpath_digests[i] = ft_hrw_digest(mp->path);
	}
	return 0;
fail:
	tgt_mountpaths_close(t);
	return -1;
}

void tgt_mountpaths_close(tgt_t *t)
{
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

const tgt_mountpath_t *tgt_mountpath_pick(const tgt_t *t, const char *provider, const char *bucket,
					  const char *obj, size_t obj_len)
{
	if (t->n_mountpaths == 1)
		return &t->mountpaths[0];
	uint64_t h = ft_hrw_name_hash(provider, bucket, obj, obj_len);
	int i = ft_hrw_pick(h, t->mountpath_digests, t->n_mountpaths);
	return &t->mountpaths[i < 0 ? 0 : i];
}

int tgt_rel_path(char *buf, size_t cap, const char *provider, const char *bucket, const char *obj)
{
	int n = obj ? snprintf(buf, cap, "%s/%s/%s", provider, bucket, obj)
		    : snprintf(buf, cap, "%s/%s", provider, bucket);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
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
	static const char *const tops[] = { "", TGT_COPIES_DIR "/", TGT_EC_DIR "/" };
	pthread_rwlock_wrlock(&t->publish_lock);
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
	pthread_rwlock_unlock(&t->publish_lock);
	tgt_list_forget(t, provider, bucket);
	if (moved > 0)
		tgt_janitor_kick(t);
	return moved;
}
