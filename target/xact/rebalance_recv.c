/* SPDX-License-Identifier: Apache-2.0 */
/* Rebalance receiver: takes the chunks another target sends, verifies and publishes the object. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/smap.h"
#include "core/lom.h"
#include "protect/protect.h"
#include "target.h"
#include "xact/rebalance.h"

static int xfer_ok(const char *x)
{
	size_t n = x ? strlen(x) : 0;

	if (n == 0 || n >= RB_XFER_MAX || x[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((x[i] >= 'a' && x[i] <= 'z') || (x[i] >= 'A' && x[i] <= 'Z') || (x[i] >= '0' && x[i] <= '9') ||
		      x[i] == '.' || x[i] == '-' || x[i] == '_'))
			return 0;
	return 1;
}

/* Last chunk: verify, set the metadata, publish unless a newer copy is here. */
static void receive_finish(tgt_t *t, tgt_obj_t *o, int fd, char *work, const ft_lom_t *lom, ft_ctl_resp_t *resp)
{
	char hex[FT_CKSUM_HEX_MAX], perr[256];
	ft_lom_t here;
	int rc = 0;

	if (lom->cksum_type != FT_CKSUM_NONE) {
		rc = rb_file_cksum(fd, lom->size, lom->cksum_type, hex);
		if (rc == 0 && strcmp(hex, lom->cksum) != 0) {
			ft_ctl_error(resp, 422,
				     "object %s/%s: checksum mismatch (got %s, metadata says %s): not stored",
				     o->bucket, o->obj, hex, lom->cksum);
			return;
		}
	}
	if (rc == 0)
		rc = rb_sync_fd(t, fd);
	if (rc == 0)
		rc = ft_lom_fset(fd, lom);
	if (rc != 0) {
		ft_ctl_error(resp, 500, "object %s/%s: %s", o->bucket, o->obj, strerror(-rc));
		return;
	}
	tgt_name_lock(o);
	if (rb_lom_at(o->mp, o->rel, &here, NULL) == 0 && here.mtime_ns >= lom->mtime_ns) {
		tgt_name_unlock(o);
		resp->status = 200;
		resp->json = json_pack("{s:s}", "result", "kept");
		return; /* the caller removes the work file */
	}
	rc = tgt_publish(o, work, t->cfg.sync);
	int pfd = -1, prc = 0;
	if (rc == 0)
		prc = tgt_protect_local(o, lom, &pfd, perr, sizeof(perr));
	tgt_name_unlock(o);
	if (tgt_protect_remote(o, pfd, lom, perr, sizeof(perr)) != 0)
		prc = -1;
	if (prc != 0)
		ft_warn("rebalance: %s/%s stored, but not with the bucket's redundancy: %s", o->bucket, o->obj, perr);
	if (rc != 0) {
		ft_ctl_error(resp, rc == -ESTALE ? 404 : 409, "object %s/%s: cannot publish: %s", o->bucket, o->obj,
			     rc == -ESTALE ? "bucket destroyed" : strerror(-rc));
		return;
	}
	tgt_list_bump(t, o->provider, o->bucket);
	resp->status = 200;
	resp->json = json_pack("{s:s}", "result", "stored");
}

/* PUT /v1/rebalance/obj: one chunk of an object sent by another target. */
void rb_recv_chunk(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *xfer = ft_ctl_query(req, "xfer");
	int64_t off, total, lom_len, peer_v = 0;
	char work[RB_XFER_MAX + 8];
	ft_lom_t lom;
	tgt_obj_t o;
	struct stat st;

	if (rb_query_obj(t, req, resp, &o) != 0)
		return;
	if (!xfer_ok(xfer) || rb_query_i64(req, "offset", &off) != 0 || rb_query_i64(req, "total", &total) != 0 ||
	    rb_query_i64(req, "lom", &lom_len) != 0) {
		ft_ctl_error(resp, 400, "rebalance transfer needs xfer ([A-Za-z0-9._-]), offset, total and lom");
		return;
	}
	rb_query_i64(req, "smap", &peer_v);
	size_t body = req->body_len;
	if ((uint64_t)lom_len > body || lom_len > FT_LOM_MAX ||
	    (uint64_t)off + (body - (size_t)lom_len) > (uint64_t)total) {
		ft_ctl_error(resp, 400,
			     "rebalance chunk of %zu bytes (metadata %lld) does not fit at offset %lld of %lld", body,
			     (long long)lom_len, (long long)off, (long long)total);
		return;
	}
	size_t dlen = body - (size_t)lom_len;
	int last = (uint64_t)off + dlen == (uint64_t)total;
	if (last && (lom_len == 0 || ft_lom_decode(&lom, (const uint8_t *)req->body, (size_t)lom_len) != 0 ||
		     lom.size != (uint64_t)total)) {
		ft_ctl_error(resp, 400, "object %s/%s: last chunk without valid metadata of %lld bytes", o.bucket,
			     o.obj, (long long)total);
		return;
	}
	if (off == 0 && rb_ownership_conflict(t, &o, peer_v, 1, resp))
		return;
	snprintf(work, sizeof(work), "rb.%s", xfer);
	int fd = openat(o.mp->work_fd, work, O_RDWR | O_CLOEXEC | (off == 0 ? O_CREAT | O_TRUNC : 0), 0644);
	if (fd < 0) {
		ft_ctl_error(resp, errno == ENOENT ? 409 : 500, "transfer %s: %s", xfer,
			     errno == ENOENT ? "unknown (start again at offset 0)" : strerror(errno));
		return;
	}
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != (uint64_t)off) {
		ft_ctl_error(resp, 409, "transfer %s: have %lld bytes, chunk at offset %lld", xfer,
			     (long long)st.st_size, (long long)off);
		goto drop;
	}
	const char *p = req->body ? req->body + lom_len : "";
	for (size_t done = 0; done < dlen;) {
		ssize_t n = pwrite(fd, p + done, dlen - done, (off_t)((uint64_t)off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			ft_ctl_error(resp, e == ENOSPC || e == EDQUOT ? 507 : 500, "transfer %s: write: %s", xfer,
				     strerror(e));
			goto drop;
		}
		done += (size_t)n;
	}
	if (!last) {
		close(fd);
		resp->status = 200;
		resp->json = json_pack("{s:s}", "result", "partial");
		return;
	}
	receive_finish(t, &o, fd, work, &lom, resp);
drop:
	close(fd);
	if (work[0])
		unlinkat(o.mp->work_fd, work, 0);
}

/* DELETE /v1/rebalance/obj?...&xfer=: the sender gave up; drop the partial work file. */
void rb_recv_abort(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *xfer = ft_ctl_query(req, "xfer");
	char work[RB_XFER_MAX + 8];
	tgt_obj_t o;

	if (rb_query_obj(t, req, resp, &o) != 0)
		return;
	if (!xfer_ok(xfer)) {
		ft_ctl_error(resp, 400, "xfer missing or invalid");
		return;
	}
	snprintf(work, sizeof(work), "rb.%s", xfer);
	unlinkat(o.mp->work_fd, work, 0);
	resp->status = 200;
}

/* The sender's digest in a transfer work name "rb.<16 hex digest>.<pid>.<n>"; -1 for another name (rb.local.N). */
static int work_sender(const char *name, uint64_t *digest)
{
	char *end = NULL;

	if (strncmp(name, "rb.", 3) != 0 || strlen(name) < 3 + 16 + 1 || name[3 + 16] != '.')
		return -1;
	for (int i = 3; i < 3 + 16; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return -1;
	*digest = strtoull(name + 3, &end, 16);
	return end == name + 3 + 16 ? 0 : -1;
}

static int in_map(const ft_smap_t *m, uint64_t digest)
{
	for (int i = 0; i < m->n_targets; i++)
		if (m->target_digests[i] == digest)
			return 1;
	return 0;
}

void rb_recv_sweep(tgt_t *t, const ft_smap_t *cur)
{
	int n = __atomic_load_n(&t->n_mountpaths, __ATOMIC_ACQUIRE), removed = 0;

	for (int i = 0; i < n; i++) {
		int st = tgt_mountpath_slot_state(t, i);
		if (st != 0 && st != 1) /* active or detaching */
			continue;
		int fd = openat(t->mountpaths[i].work_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		struct dirent *de;
		uint64_t digest;
		while ((de = readdir(d)) != NULL) {
			if (work_sender(de->d_name, &digest) == 0 && !in_map(cur, digest) &&
			    unlinkat(t->mountpaths[i].work_fd, de->d_name, 0) == 0)
				removed++;
		}
		closedir(d);
	}
	if (removed > 0)
		ft_info("rebalance: removed %d partial transfers from targets no longer in Smap v%lld", removed,
			(long long)cur->version);
}
