/* SPDX-License-Identifier: Apache-2.0 */
/* Erasure coding, the holder's side: receives, stores, serves and deletes the slices other targets send. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fdio.h"
#include "base/log.h"
#include "cluster/hrw.h"
#include "core/keymap.h"
#include "http/util.h"
#include "protect/ec.h"
#include "protect/ec_codec.h"
#include "protect/ec_xfer.h"
#include "target.h"

/*
 * DESIGN
 * A slice arrives into "<mp>/.work/ec.<xfer>", is verified (header, length, payload xxhash64) once
 * complete, and renamed to "<mp>/.ec/<provider>/<bucket>/<obj>" on the mountpath HRW picks for
 * the name. One slice per object per holder: a newer one replaces the older. Before a slice is
 * described or served (GET /v1/ec/meta) it is verified again; a corrupt one is removed and
 * reported missing. An interrupted transfer's work file is removed by the next start or, once
 * untouched for EC_XFER_STALE_S, by ec_sweep_stale.
 */

/* ---- control port: the holder's side ---- */

int ec_names_parse(const tgt_t *t, const char *p, const char *b, const char *obj, ec_name_t *n, char *err, size_t cap)
{
	const char *why = NULL;
	char rel[TGT_REL_MAX];

	n->obj = obj;
	if (!p || !b || !n->obj) {
		snprintf(err, cap, "provider, bucket and obj are required");
		return -1;
	}
	if (strlen(p) == 0 || strlen(p) >= sizeof(n->provider) ||
	    strspn(p, "abcdefghijklmnopqrstuvwxyz") != strlen(p)) {
		snprintf(err, cap, "bad provider \"%s\"", p);
		return -1;
	}
	if (ft_name_check_bucket(b, &why) != 0 || ft_name_check_object(n->obj, strlen(n->obj), &why) != 0) {
		snprintf(err, cap, "%s", why ? why : "bad name");
		return -1;
	}
	snprintf(n->provider, sizeof(n->provider), "%s", p);
	snprintf(n->bucket, sizeof(n->bucket), "%s", b);
	if (tgt_rel_path(rel, sizeof(rel), p, b, n->obj) != 0 ||
	    (size_t)snprintf(n->rel, sizeof(n->rel), "%s/%s", TGT_EC_DIR, rel) >= sizeof(n->rel)) {
		snprintf(err, cap, "object name too long");
		return -1;
	}
	/* a slice of "a" and one of "a/b" may meet on a mountpath: the second goes to its hashed path */
	n->krel[0] = '\0';
	size_t pre = (size_t)snprintf(n->krel, sizeof(n->krel), "%s/%s/%s/", TGT_EC_DIR, p, b);
	if (tgt_key_hashed(n->obj, strlen(n->obj)) ||
	    tgt_key_path_hashed(n->krel + pre, sizeof(n->krel) - pre, n->obj, strlen(n->obj)) != 0)
		n->krel[0] = '\0';
	n->mp = tgt_mountpath_pick(t, p, b, n->obj, strlen(n->obj));
	return 0;
}

/* provider, bucket, obj of the query, validated. 0, or -1 after answering 400. */
int ec_ctl_names(const tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp, ec_name_t *n)
{
	char why[256];

	if (ec_names_parse(t, ft_ctl_query(req, "provider"), ft_ctl_query(req, "bucket"), ft_ctl_query(req, "obj"), n,
			   why, sizeof(why)) != 0) {
		ft_ctl_error(resp, 400, "%s %s: %s", req->method, req->path, why);
		return -1;
	}
	return 0;
}

/* An unsigned query argument; 0, or -1 when absent or malformed. */
int ec_ctl_u64(const ft_ctl_req_t *req, const char *key, uint64_t *out)
{
	const char *s = ft_ctl_query(req, key);
	char *end = NULL;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0' ? 0 : -1;
}

/* Opens path rel on mp when it is a file; fd or -1. */
static int open_file(const tgt_mountpath_t *mp, const char *rel)
{
	struct stat st;
	int fd = openat(mp->root_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Opens n's slice on n->mp: at its path, else at its hashed path (then n->rel is that). fd or -1. */
static int ec_slice_open_here(ec_name_t *n)
{
	int fd = open_file(n->mp, n->rel);

	if (fd < 0 && n->krel[0] && strcmp(n->rel, n->krel) != 0 && (fd = open_file(n->mp, n->krel)) >= 0)
		memcpy(n->rel, n->krel, strlen(n->krel) + 1);
	return fd;
}

/* Opens the slice, on its mountpath or (after a mountpath change) any other; fd or -1, *mp set. */
static int ec_slice_open(const tgt_t *t, ec_name_t *n)
{
	int fd = ec_slice_open_here(n);

	for (int i = 0; fd < 0 && i < t->n_mountpaths; i++) {
		if (&t->mountpaths[i] == n->mp)
			continue;
		ec_name_t at = *n;
		at.mp = &t->mountpaths[i];
		fd = ec_slice_open_here(&at);
		if (fd >= 0)
			*n = at;
	}
	return fd;
}

static void ec_slice_remove(const ec_name_t *n)
{
	if (unlinkat(n->mp->root_fd, n->rel, 0) == 0)
		tgt_parent_prune(n->mp, n->rel);
}

/* Moves the verified work file to rel on n->mp. 0 or -errno. */
static int ec_slice_rename(const ec_name_t *n, const char *rel, const char *work, ft_sync_policy_t sync)
{
	int rc = -ENOENT;

	for (int attempt = 0; attempt < EC_PUBLISH_ATTEMPTS && rc == -ENOENT; attempt++) {
		const char *leaf = NULL;
		int dfd = tgt_parent_open(n->mp, rel, &leaf);
		if (dfd < 0) {
			rc = dfd;
			continue;
		}
		rc = renameat(n->mp->work_fd, work, dfd, leaf) == 0 ? 0 : -errno;
		if (rc == -EISDIR && unlinkat(dfd, leaf, AT_REMOVEDIR) == 0)
			rc = renameat(n->mp->work_fd, work, dfd, leaf) == 0 ? 0 : -errno;
		if (rc == 0 && sync == FT_SYNC_FULL)
			fsync(dfd);
		close(dfd);
	}
	return rc;
}

/* The slice's object name in the work file's name xattr, for a slice at a hashed path: walkers of .ec read it. */
static int ec_slice_name(const ec_name_t *n, const char *work)
{
	int fd = openat(n->mp->work_fd, work, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int rc = fd < 0 ? -errno : tgt_key_fset(fd, n->obj, strlen(n->obj));

	if (fd >= 0)
		close(fd);
	return rc;
}

/*
 * Moves the verified work file to n->rel on n->mp, or to n->krel when that path is taken (a
 * component is another object's slice, or the name a directory of others). 0 or -errno.
 */
static int ec_slice_commit(ec_name_t *n, const char *work, ft_sync_policy_t sync)
{
	int rc = n->krel[0] ? 0 : ec_slice_name(n, work); /* a name that is no path: n->rel is hashed */

	if (rc == 0)
		rc = ec_slice_rename(n, n->rel, work, sync);

	if (rc == 0 && n->krel[0] && strcmp(n->rel, n->krel) != 0 && unlinkat(n->mp->root_fd, n->krel, 0) == 0)
		tgt_parent_prune(n->mp, n->krel); /* an older slice left at the hashed path */
	if ((rc == -ENOTDIR || rc == -EISDIR || rc == -ENOTEMPTY) && n->krel[0] && strcmp(n->rel, n->krel) != 0) {
		memcpy(n->rel, n->krel, strlen(n->krel) + 1);
		rc = ec_slice_name(n, work);
		if (rc == 0)
			rc = ec_slice_rename(n, n->rel, work, sync);
	}
	return rc;
}

/* Whether the slice's bucket is the current incarnation of a bucket in the BMD: 1 yes, 0 no, -1 no BMD yet. */
static int ec_bucket_current(const ft_ec_meta_t *m)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b = bmd ? ft_bmd_find(bmd, m->provider, m->bucket) : NULL;
	int ok = bmd == NULL ? -1 : b && b->created_ns == m->bucket_created;

	ft_bmd_put(bmd);
	return ok;
}

/*
 * Removes the work files of transfers whose sender stopped (died) mid-way: "ec.<xfer>" files in
 * mp's .work untouched for EC_XFER_STALE_S. Runs at most once per EC_SWEEP_EVERY_S per target.
 */
void ec_sweep_stale(const tgt_t *t)
{
	static atomic_llong last_sweep;
	long long now = (long long)(ft_now_ns() / 1000000000LL), prev = atomic_load(&last_sweep);

	if (now - prev < EC_SWEEP_EVERY_S || !atomic_compare_exchange_strong(&last_sweep, &prev, now))
		return;
	for (int i = 0; i < t->n_mountpaths; i++) {
		int dfd = dup(t->mountpaths[i].work_fd);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		struct dirent *e;
		struct stat st;
		if (d == NULL) {
			if (dfd >= 0)
				close(dfd);
			continue;
		}
		rewinddir(d);
		while ((e = readdir(d)) != NULL) {
			const char *x = e->d_name + 3;
			if (strncmp(e->d_name, "ec.", 3) != 0 || strspn(x, "0123456789abcdef") != strlen(x))
				continue;
			if (fstatat(t->mountpaths[i].work_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    now - (long long)st.st_mtime > EC_XFER_STALE_S) {
				ft_warn("ec: removing %s/%s/%s: an abandoned slice transfer", t->mountpaths[i].path,
					TGT_WORK_DIR, e->d_name);
				unlinkat(t->mountpaths[i].work_fd, e->d_name, 0);
			}
		}
		closedir(d);
	}
}

/* Whether a is a newer version of an object than b: a later mtime, or the same and a higher numeric version. */
static int ec_newer(const ft_lom_t *a, const ft_lom_t *b)
{
	char *ea = NULL, *eb = NULL;

	if (a->mtime_ns != b->mtime_ns)
		return a->mtime_ns > b->mtime_ns;
	unsigned long long va = strtoull(a->version, &ea, 10), vb = strtoull(b->version, &eb, 10);
	return a->version[0] && b->version[0] && *ea == '\0' && *eb == '\0' && va > vb;
}

/* The header of the slice of n held here (any mountpath) into m; 0, or -1 when none can be read. */
static int ec_held(const tgt_t *t, const ec_name_t *n, ft_ec_meta_t *m)
{
	ec_name_t at = *n;
	uint8_t *hdr = malloc(FT_EC_HDR_MAX);
	int fd = hdr ? ec_slice_open(t, &at) : -1, rc = -1;
	size_t hlen;

	if (fd >= 0) {
		ssize_t got = pread(fd, hdr, FT_EC_HDR_MAX, 0);
		rc = got > 0 && ft_ec_hdr_decode(m, hdr, (size_t)got, &hlen) == 0 ? 0 : -1;
		close(fd);
	}
	free(hdr);
	return rc;
}

/*
 * Last byte in: verify the whole slice (verified: a slice already checked, in memory or as it
 * streamed in, NULL: read it back from fd) and move it into place, unless the slice held here is
 * of a newer version of the object (the owner's fan-outs run without its name lock: a later PUT's
 * may arrive first); then the incoming one is dropped and the answer is still 200 ("kept": the
 * newer one stays). The check and the rename are under the name lock here (local I/O only). The
 * outcome in *out; the caller removes work. nowait (a loop thread): when the name lock is taken,
 * nothing is done and out->status is 0; ask again from a thread that may wait.
 */
void ec_slice_store(tgt_t *t, ec_name_t *n, int fd, const char *work, const ft_ec_meta_t *verified, int nowait,
		    ec_store_t *out)
{
	ft_ec_meta_t *m = malloc(sizeof(*m));
	size_t hlen;
	int rc;

	out->status = 500;
	out->kept = 0;
	out->msg[0] = '\0';
	if (m == NULL) {
		snprintf(out->msg, sizeof(out->msg), "out of memory");
		return;
	}
	rc = ec_sync(t, fd);
	if (rc == 0 && verified != NULL)
		*m = *verified;
	else if (rc == 0)
		rc = ft_ec_slice_verify(fd, m, &hlen);
	if (rc != 0) {
		out->status = rc == -EBADMSG ? 400 : 500;
		snprintf(out->msg, sizeof(out->msg), "slice of \"%s/%s\" %s", n->bucket, n->obj,
			 rc == -EBADMSG ? "is corrupt (bad header, length or checksum)" : strerror(-rc));
		goto out;
	}
	out->idx = m->idx;
	out->replica = m->replica;
	if (strcmp(m->provider, n->provider) != 0 || strcmp(m->bucket, n->bucket) != 0 || strcmp(m->obj, n->obj) != 0) {
		out->status = 400;
		snprintf(out->msg, sizeof(out->msg), "slice header names \"%s/%s\", the query \"%s/%s\"", m->bucket,
			 m->obj, n->bucket, n->obj);
		goto out;
	}
	if ((rc = ec_bucket_current(m)) != 1) {
		out->status = rc < 0 ? 503 : 404;
		if (rc < 0)
			snprintf(out->msg, sizeof(out->msg), "target %s has not joined a cluster yet", t->id);
		else
			snprintf(out->msg, sizeof(out->msg), "bucket \"%s\" (this incarnation) does not exist here",
				 m->bucket);
		goto out;
	}
	uint64_t h = ft_hrw_name_hash(n->provider, n->bucket, n->obj, strlen(n->obj));
	ft_ec_meta_t *held = malloc(sizeof(*held));
	int kept = 0;

	if (nowait && tgt_name_trylock_hash(t, h) != 0) {
		free(held);
		out->status = 0; /* busy: the caller asks again, from a thread that may wait */
		goto out;
	}
	if (!nowait)
		tgt_name_lock_hash(t, h);
	if (held && ec_held(t, n, held) == 0 && held->bucket_created == m->bucket_created &&
	    ec_newer(&held->lom, &m->lom))
		kept = 1;
	rc = kept ? 0 : ec_slice_commit(n, work, t->cfg.sync);
	tgt_name_unlock_hash(t, h);
	if (kept)
		ft_debug("ec: %s %d of %s/%s version %s dropped: version %s is here", m->replica ? "replica" : "slice",
			 m->idx, m->bucket, m->obj, m->lom.version, held->lom.version);
	free(held);
	if (kept) {
		out->status = 200;
		out->kept = 1;
		goto out;
	}
	if (rc != 0) {
		out->status = rc == -ENOTDIR ? 409 : 500;
		snprintf(out->msg, sizeof(out->msg), "cannot store the slice of \"%s/%s\": %s", n->bucket, n->obj,
			 rc == -ENOTDIR ? "a component of its path is another object's slice" : strerror(-rc));
		goto out;
	}
	ft_debug("ec: stored %s %d of %s/%s (%" PRIu64 " bytes)", m->replica ? "replica" : "slice", m->idx, m->bucket,
		 m->obj, m->slice_size);
	out->status = 200;
out:
	free(m);
}

/* ec_slice_store answered on the control port. */
static void ec_ctl_commit(tgt_t *t, ec_name_t *n, int fd, const char *work, const ft_ec_meta_t *verified,
			  ft_ctl_resp_t *resp)
{
	ec_store_t st;

	ec_slice_store(t, n, fd, work, verified, 0, &st);
	if (st.status != 200) {
		ft_ctl_error(resp, st.status, "%s", st.msg);
		return;
	}
	resp->status = 200;
	resp->json = st.kept ? json_pack("{s:i, s:b, s:b}", "idx", st.idx, "replica", st.replica, "kept", 1)
			     : json_pack("{s:i, s:b}", "idx", st.idx, "replica", st.replica);
}

/*
 * A slice in one chunk (the common case: every slice up to EC_XFER_CHUNK): checked in memory
 * first, so a corrupt one never touches the disk and a good one is not read back; then written to
 * its work file and committed.
 */
static void ec_ctl_slice_whole(tgt_t *t, ec_name_t *n, const ft_ctl_req_t *req, const char *xfer, ft_ctl_resp_t *resp)
{
	ft_ec_meta_t *m = malloc(sizeof(*m));
	char work[64];
	size_t hlen;
	int fd = -1, rc;

	if (m == NULL) {
		ft_ctl_error(resp, 500, "out of memory");
		return;
	}
	rc = ft_ec_slice_verify_mem((const uint8_t *)req->body, req->body_len, m, &hlen);
	if (rc != 0) {
		ft_ctl_error(resp, rc == -EBADMSG ? 400 : 500, "slice of \"%s/%s\" %s", n->bucket, n->obj,
			     rc == -EBADMSG ? "is corrupt (bad header, length or checksum)" : strerror(-rc));
		goto out;
	}
	snprintf(work, sizeof(work), "ec.%s", xfer);
	fd = openat(n->mp->work_fd, work, O_RDWR | O_CLOEXEC | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		ft_ctl_error(resp, 500, "POST %s: transfer %s: %s", req->path, xfer, strerror(errno));
		goto out;
	}
	rc = ft_write_all(fd, req->body, req->body_len);
	if (rc != 0)
		ft_ctl_error(resp, rc == -ENOSPC ? 507 : 500, "POST %s: write: %s", req->path, strerror(-rc));
	else
		ec_ctl_commit(t, n, fd, work, m, resp);
	close(fd);
	unlinkat(n->mp->work_fd, work, 0); /* gone already once committed */
	ec_sweep_stale(t);
out:
	free(m);
}

/* POST /v1/ec/slice?provider&bucket&obj&xfer&off&total: one chunk of a slice transfer. */
static void ec_ctl_slice_post(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *xfer = ft_ctl_query(req, "xfer");
	uint64_t off, total;
	char work[64];
	ec_name_t n;
	int fd;

	if (ec_ctl_names(t, req, resp, &n) != 0)
		return;
	if (!xfer || strlen(xfer) == 0 || strlen(xfer) > 32 || strspn(xfer, "0123456789abcdef") != strlen(xfer) ||
	    ec_ctl_u64(req, "off", &off) != 0 || ec_ctl_u64(req, "total", &total) != 0) {
		ft_ctl_error(resp, 400, "POST %s: xfer (hex), off and total are required", req->path);
		return;
	}
	if (off > total || req->body_len > total - off || (req->body_len == 0 && off < total)) {
		ft_ctl_error(resp, 400, "POST %s: chunk [%" PRIu64 ", +%zu) outside the %" PRIu64 "-byte slice",
			     req->path, off, req->body_len, total);
		return;
	}
	if (off == 0 && req->body_len == total) {
		ec_ctl_slice_whole(t, &n, req, xfer, resp);
		return;
	}
	snprintf(work, sizeof(work), "ec.%s", xfer);
	fd = openat(n.mp->work_fd, work, O_RDWR | O_CLOEXEC | (off == 0 ? O_CREAT | O_TRUNC : 0), 0644);
	if (fd < 0) {
		ft_ctl_error(resp, errno == ENOENT ? 409 : 500, "POST %s: transfer %s: %s", req->path, xfer,
			     errno == ENOENT ? "unknown (its first chunk never came)" : strerror(errno));
		return;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != off || lseek(fd, (off_t)off, SEEK_SET) != (off_t)off) {
		ft_ctl_error(resp, 409, "POST %s: transfer %s: chunk at %" PRIu64 " out of order", req->path, xfer,
			     off);
		goto fail;
	}
	int e = req->body_len > 0 ? ft_write_all(fd, req->body, req->body_len) : 0;
	if (e != 0) {
		ft_ctl_error(resp, e == -ENOSPC ? 507 : 500, "POST %s: write: %s", req->path, strerror(-e));
		goto fail;
	}
	if (off + req->body_len < total) {
		close(fd);
		resp->status = 200;
		resp->json = json_pack("{s:I}", "received", (json_int_t)(off + req->body_len));
		return;
	}
	ec_ctl_commit(t, &n, fd, work, NULL, resp);
	ec_sweep_stale(t);
fail:
	close(fd);
	unlinkat(n.mp->work_fd, work, 0); /* gone already once committed */
}

/*
 * GET /v1/ec/meta?provider&bucket&obj: the framed header (ec_codec.h) of the slice held here, as
 * bytes, once the whole slice verified (corrupt: removed, 404).
 */
static void ec_ctl_meta(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	ft_ec_meta_t *m = malloc(sizeof(*m));
	size_t hlen = 0;
	ec_name_t n;
	int fd = -1, rc;

	if (m == NULL) {
		ft_ctl_error(resp, 500, "out of memory");
		goto out;
	}
	if (ec_ctl_names(t, req, resp, &n) != 0)
		goto out;
	fd = ec_slice_open(t, &n);
	if (fd < 0) {
		ft_ctl_error(resp, 404, "no slice of \"%s/%s\" here", n.bucket, n.obj);
		goto out;
	}
	rc = ft_ec_slice_verify(fd, m, &hlen);
	if (rc == -EBADMSG) {
		ft_error("ec: slice of %s/%s on %s is corrupt: removed", n.bucket, n.obj, n.mp->path);
		ec_slice_remove(&n);
		ft_ctl_error(resp, 404, "the slice of \"%s/%s\" here was corrupt (removed)", n.bucket, n.obj);
		goto out;
	}
	if (rc != 0) {
		ft_ctl_error(resp, 500, "slice of \"%s/%s\": %s", n.bucket, n.obj, strerror(-rc));
		goto out;
	}
	ft_ctl_send_fd(resp, 200, fd, 0, hlen);
	fd = -1; /* the server's now */
out:
	if (fd >= 0)
		close(fd);
	free(m);
}

/*
 * GET /v1/ec/slice?provider&bucket&obj: the slice file held here as bytes, its framed header
 * (the slice metadata) then its payload, sent from the file. Not verified here: the restorer
 * checks the payload against the checksum in the header.
 */
static void ec_ctl_slice_get(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	ft_ec_meta_t *m = malloc(sizeof(*m));
	uint8_t *hdr = malloc(FT_EC_HDR_MAX);
	size_t hlen = 0;
	struct stat st;
	ssize_t got;
	ec_name_t n;
	int fd = -1;

	if (m == NULL || hdr == NULL) {
		ft_ctl_error(resp, 500, "out of memory");
		goto out;
	}
	if (ec_ctl_names(t, req, resp, &n) != 0)
		goto out;
	fd = ec_slice_open(t, &n);
	if (fd < 0) {
		ft_ctl_error(resp, 404, "no slice of \"%s/%s\" here", n.bucket, n.obj);
		goto out;
	}
	got = pread(fd, hdr, FT_EC_HDR_MAX, 0);
	if (got < 0 || ft_ec_hdr_decode(m, hdr, (size_t)got, &hlen) != 0) {
		ft_ctl_error(resp, 500, "the slice of \"%s/%s\" here has a bad header", n.bucket, n.obj);
		goto out;
	}
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != hlen + m->slice_size) {
		ft_ctl_error(resp, 500, "the slice of \"%s/%s\" here is not as long as its header says", n.bucket,
			     n.obj);
		goto out;
	}
	ft_ctl_send_fd(resp, 200, fd, 0, (uint64_t)st.st_size);
	fd = -1; /* the server's now */
out:
	if (fd >= 0)
		close(fd);
	free(hdr);
	free(m);
}

/* DELETE /v1/ec/slice?provider&bucket&obj[&before=ns]: drops the slice (only one stored before "before"). */
static void ec_ctl_slice_delete(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	uint64_t before = 0;
	int removed = 0;
	ec_name_t n;

	if (ec_ctl_names(t, req, resp, &n) != 0)
		return;
	if (ft_ctl_query(req, "before") && ec_ctl_u64(req, "before", &before) != 0) {
		ft_ctl_error(resp, 400, "DELETE %s: bad \"before\"", req->path);
		return;
	}
	for (int i = 0; i < t->n_mountpaths; i++) {
		ec_name_t at = n;
		ft_lom_t lom;
		uint8_t hdr[FT_EC_HDR_MAX];
		ft_ec_meta_t *m;
		at.mp = &t->mountpaths[i];
		int fd = ec_slice_open_here(&at);
		if (fd < 0)
			continue;
		ssize_t got = pread(fd, hdr, sizeof(hdr), 0);
		size_t hlen;
		m = malloc(sizeof(*m));
		int keep = 0;
		if (m && got > 0 && ft_ec_hdr_decode(m, hdr, (size_t)got, &hlen) == 0) {
			lom = m->lom;
			keep = before > 0 && lom.mtime_ns >= (int64_t)before; /* stored by a later PUT */
		}
		free(m);
		close(fd);
		if (!keep) {
			ec_slice_remove(&at);
			removed++;
		}
	}
	if (removed == 0) {
		ft_ctl_error(resp, 404, "no slice of \"%s/%s\" here", n.bucket, n.obj);
		return;
	}
	resp->status = 200;
	resp->json = json_pack("{s:i}", "removed", removed);
}

void tgt_ec_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	int get = strcmp(req->method, "GET") == 0;

	if (strcmp(req->path, "/v1/ec/slice") == 0) {
		if (strcmp(req->method, "POST") == 0)
			ec_ctl_slice_post(t, req, resp);
		else if (get)
			ec_ctl_slice_get(t, req, resp);
		else if (strcmp(req->method, "DELETE") == 0)
			ec_ctl_slice_delete(t, req, resp);
		else
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use GET, POST or DELETE)", req->method,
				     req->path);
		return;
	}
	if (strcmp(req->path, "/v1/ec/encode") == 0) {
		if (strcmp(req->method, "POST") == 0)
			ec_ctl_encode(t, req, resp);
		else
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use POST)", req->method, req->path);
		return;
	}
	if (strcmp(req->path, "/v1/ec/meta") == 0) {
		if (get)
			ec_ctl_meta(t, req, resp);
		else
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use GET)", req->method, req->path);
		return;
	}
	ft_ctl_error(resp, 404, "no such control endpoint: %s %s", req->method, req->path);
}
